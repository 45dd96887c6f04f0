package nft

import (
	"net/netip"
	"slices"
)

// index validates a desired state entry by entry and keeps the applied state
// (state) up to date, so that a change of a few entries costs work in
// proportion to those entries, not to the whole state. It counts every entry
// it was given, well-formed ones by ElasticIP, Pod IP or address, so that the
// decision for one address (kept, or left out because of a conflict) only
// looks at the entries naming that address.
//
// The decisions are those of a whole-state validation (normalize), one
// address at a time:
//   - a mapping E -> P is kept when E is given with one Pod IP and one
//     bandwidth only, P with E only, and E is no mapping's Pod IP;
//   - a mapping whose ElasticIP and Pod IP are of different families is
//     malformed (no NAT64);
//   - a direct NIC address is allowed when it is given for one interface
//     with one bandwidth only; an interface is filtered in a family's table
//     when at least one entry with a usable name lists it with an address of
//     that family, or with a malformed address (then in both);
//   - a kept ElasticIP with a bandwidth is limited; so is an allowed direct
//     NIC address with a bandwidth unless a kept mapping uses it;
//   - an in-cluster mapping E -> P is kept when E is given (in InCluster or
//     Mappings) with one Pod IP only and is no such mapping's Pod IP (see
//     incluster.go).
type index struct {
	s *state

	natCount map[Mapping]int            // well-formed mapping entries (unmapped addresses)
	byEIP    map[netip.Addr][]Mapping   // the distinct well-formed entries of each ElasticIP
	byPod    map[netip.Addr][]Mapping   // ... and of each Pod IP
	natBad   map[Mapping]int            // malformed entries, as given
	natIssue map[netip.Addr]struct{}    // addresses with a conflict to report
	dirCount map[DirectNIC]int          // well-formed direct NIC entries
	byAddr   map[netip.Addr][]DirectNIC // the distinct well-formed entries of each address
	ifaces   map[familyIface]int        // entries with a usable interface name, by name and family (nil: malformed address)
	dirBad   map[DirectNIC]int          // malformed entries, as given
	dirIssue map[netip.Addr]struct{}    // addresses with a conflict to report
	cl       clusterIndex
}

// delta is what a change of the desired state changes in the kernel.
type delta struct {
	// NAT map elements: removed and added mappings, with the bandwidth that
	// decides whether they have an element in eip2vpc_unlimited; reflagged
	// mappings (a limit came or went) only lose or gain that element.
	removed, added, reflagged []Mapping
	direct                    directChange
	limits                    limitChange
	// Elements of the in-cluster map: a new Pod IP for an ElasticIP is a
	// removal and an addition.
	clusterRemoved, clusterAdded []Mapping
}

func (d *delta) empty() bool {
	return len(d.removed)+len(d.added)+len(d.reflagged)+len(d.direct.removedIfaces)+len(d.direct.addedIfaces)+
		len(d.direct.removedPairs)+len(d.direct.addedPairs)+len(d.limits.removed)+len(d.limits.added)+
		len(d.limits.changed)+len(d.limits.removedSrc)+len(d.limits.addedSrc)+
		len(d.clusterRemoved)+len(d.clusterAdded) == 0
}

// directChange is what a sync writes to the anti-spoofing sets.
type directChange struct {
	removedIfaces, addedIfaces []familyIface
	removedPairs, addedPairs   []DirectNIC
}

// newIndex returns an empty index for a configuration, or an error wrapping
// ErrInvalidConfig.
func newIndex(c Config) (*index, error) {
	if err := validConfig(c); err != nil {
		return nil, err
	}
	return &index{
		s:        newState(c),
		natCount: map[Mapping]int{}, byEIP: map[netip.Addr][]Mapping{}, byPod: map[netip.Addr][]Mapping{},
		natBad: map[Mapping]int{}, natIssue: map[netip.Addr]struct{}{},
		dirCount: map[DirectNIC]int{}, byAddr: map[netip.Addr][]DirectNIC{}, ifaces: map[familyIface]int{},
		dirBad: map[DirectNIC]int{}, dirIssue: map[netip.Addr]struct{}{},
		cl: newClusterIndex(),
	}, nil
}

// addrSet collects the addresses a change touches.
type addrSet map[netip.Addr]struct{}

func (a addrSet) add(x ...netip.Addr) {
	for _, v := range x {
		a[v] = struct{}{}
	}
}

// apply takes entries out of and into the desired state (an entry given
// twice counts twice), updates the applied state and returns what changed:
// mappings (M), direct NICs (D) and in-cluster mappings (C).
func (ix *index) apply(remM, addM []Mapping, remD, addD []DirectNIC, remC, addC []Mapping) delta {
	nm, nd, nc := 2*(len(remM)+len(addM)), len(remD)+len(addD), 2*(len(remC)+len(addC))
	eips, natAddrs := make(addrSet, nm), make(addrSet, nm)
	dirAddrs, names := make(addrSet, nd), make(map[string]struct{}, nd)
	clAddrs := make(addrSet, nm+nc)
	for _, m := range remM {
		ix.mapping(m, -1, eips, natAddrs, clAddrs)
	}
	for _, m := range addM {
		ix.mapping(m, 1, eips, natAddrs, clAddrs)
	}
	for _, m := range remC {
		ix.cl.entry(m, -1, clAddrs)
	}
	for _, m := range addC {
		ix.cl.entry(m, 1, clAddrs)
	}
	for _, d := range remD {
		ix.directNIC(d, -1, dirAddrs, names)
	}
	for _, d := range addD {
		ix.directNIC(d, 1, dirAddrs, names)
	}

	var dl delta
	limitAddrs := make(addrSet, nm+nd)
	ix.updateNAT(eips, &dl, limitAddrs)
	ix.updateDirect(dirAddrs, names, &dl, limitAddrs)
	ix.updateLimits(limitAddrs, &dl)
	ix.updateCluster(clAddrs, &dl)
	for a := range clAddrs {
		noteIssues(ix.cl.issue, a, ix.cl.issues)
	}
	for a := range natAddrs {
		noteIssues(ix.natIssue, a, ix.natIssues)
	}
	for _, addrs := range []addrSet{dirAddrs, limitAddrs} {
		for a := range addrs {
			noteIssues(ix.dirIssue, a, ix.dirIssues)
		}
	}
	return dl
}

// mapping counts one mapping entry in (n = 1) or out (n = -1) and records
// the ElasticIPs whose decision may change and the addresses whose conflicts
// may change. A well-formed entry also counts as an in-cluster mapping.
func (ix *index) mapping(m Mapping, n int, eips, natAddrs, clAddrs addrSet) {
	t := Mapping{ElasticIP: m.ElasticIP.Unmap(), PodIP: m.PodIP.Unmap(), BandwidthMbps: m.BandwidthMbps}
	if !wellFormed(t) || !validBandwidth(t.BandwidthMbps) {
		count(ix.natBad, m, n)
		return
	}
	ix.cl.entry(t, n, clAddrs)
	switch count(ix.natCount, t, n) {
	case 1: // first of its kind
		if n > 0 {
			ix.byEIP[t.ElasticIP] = append(ix.byEIP[t.ElasticIP], t)
			ix.byPod[t.PodIP] = append(ix.byPod[t.PodIP], t)
		}
	case 0: // last one gone
		ix.byEIP[t.ElasticIP] = without(ix.byEIP, t.ElasticIP, t)
		ix.byPod[t.PodIP] = without(ix.byPod, t.PodIP, t)
	}
	eips.add(t.ElasticIP, t.PodIP)
	for _, o := range ix.byPod[t.PodIP] {
		eips.add(o.ElasticIP)
	}
	natAddrs.add(t.ElasticIP, t.PodIP)
}

// directNIC counts one direct NIC entry in or out.
func (ix *index) directNIC(d DirectNIC, n int, addrs addrSet, names map[string]struct{}) {
	if d.HostInterface == "" || len(d.HostInterface) > maxIfNameLen || d.HostInterface == ix.s.iface {
		count(ix.dirBad, d, n)
		return
	}
	names[d.HostInterface] = struct{}{}
	t := DirectNIC{HostInterface: d.HostInterface, Address: d.Address.Unmap(), BandwidthMbps: d.BandwidthMbps}
	if !usable(t.Address) || !validBandwidth(t.BandwidthMbps) {
		// Fails closed: the interface is filtered in both tables.
		count(ix.ifaces, familyIface{name: d.HostInterface}, n)
		count(ix.dirBad, d, n)
		return
	}
	count(ix.ifaces, familyIface{fam: familyOf(t.Address), name: d.HostInterface}, n)
	switch count(ix.dirCount, t, n) {
	case 1:
		if n > 0 {
			ix.byAddr[t.Address] = append(ix.byAddr[t.Address], t)
		}
	case 0:
		ix.byAddr[t.Address] = without(ix.byAddr, t.Address, t)
	}
	addrs.add(t.Address)
}

// count adds n to m[k], deletes the key at zero, and returns the new count
// when it became 1 from 0 or 0 from 1 (else -1).
func count[K comparable](m map[K]int, k K, n int) int {
	was := m[k]
	now := was + n
	if now <= 0 {
		delete(m, k)
		now = 0
	} else {
		m[k] = now
	}
	if (was == 0 && now == 1) || (was == 1 && now == 0) {
		return now
	}
	return -1
}

// without removes v from m[k], deleting the key when nothing is left.
func without[T comparable](m map[netip.Addr][]T, k netip.Addr, v T) []T {
	l := slices.DeleteFunc(m[k], func(x T) bool { return x == v })
	if len(l) == 0 {
		delete(m, k)
		return nil
	}
	return l
}

// natOf decides the mapping of an ElasticIP from the entries naming it.
func (ix *index) natOf(eip netip.Addr) (Mapping, bool) {
	es := ix.byEIP[eip]
	if len(es) != 1 || len(ix.byPod[es[0].PodIP]) != 1 || len(ix.byPod[eip]) != 0 {
		return Mapping{}, false
	}
	return es[0], true
}

// updateNAT applies the decisions of the touched ElasticIPs to the state and
// records the element changes. Every mapping that goes is taken out before
// any new one is put in, so a Pod IP moving between ElasticIPs stays
// consistent.
func (ix *index) updateNAT(eips addrSet, dl *delta, limitAddrs addrSet) {
	s := ix.s
	var puts []Mapping
	for e := range eips {
		want, ok := ix.natOf(e)
		pod, had := s.eip2vpc[e]
		have := Mapping{ElasticIP: e, PodIP: pod, BandwidthMbps: s.natBW[e]}
		if ok == had && (!ok || want == have) {
			continue
		}
		limitAddrs.add(e)
		if had && ok && want.PodIP == pod && limited(want) != limited(have) {
			dl.reflagged = append(dl.reflagged, want)
		}
		if had {
			limitAddrs.add(pod)
			if !ok || want.PodIP != pod {
				dl.removed = append(dl.removed, have)
			}
			delete(s.eip2vpc, e)
			delete(s.natBW, e)
			if s.vpc2eip[pod] == e {
				delete(s.vpc2eip, pod)
			}
		}
		if ok {
			limitAddrs.add(want.PodIP)
			if !had || want.PodIP != pod {
				dl.added = append(dl.added, want)
			}
			puts = append(puts, want)
		}
	}
	for _, m := range puts {
		s.eip2vpc[m.ElasticIP] = m.PodIP
		s.vpc2eip[m.PodIP] = m.ElasticIP
		s.natBW[m.ElasticIP] = m.BandwidthMbps
	}
	byEIP := func(a, b Mapping) int { return a.ElasticIP.Compare(b.ElasticIP) }
	slices.SortFunc(dl.removed, byEIP)
	slices.SortFunc(dl.added, byEIP)
	slices.SortFunc(dl.reflagged, byEIP)
}

func limited(m Mapping) bool { return m.BandwidthMbps > 0 }

// directOf decides whether an address may be sent from, and through which
// interface.
func (ix *index) directOf(a netip.Addr) (DirectNIC, bool) {
	es := ix.byAddr[a]
	if len(es) != 1 {
		return DirectNIC{}, false
	}
	return es[0], true
}

// updateDirect applies the decisions of the touched direct NIC addresses and
// interfaces. An address that moved to another interface is a removed and an
// added pair; its old interface stays filtered as long as it is listed.
func (ix *index) updateDirect(addrs addrSet, names map[string]struct{}, dl *delta, limitAddrs addrSet) {
	s, c := ix.s, &dl.direct
	for a := range addrs {
		limitAddrs.add(a) // its bandwidth may have changed
		want, ok := ix.directOf(a)
		iface, had := s.directOf[a]
		if (ok && had && want.HostInterface == iface) || (!ok && !had) {
			continue
		}
		if had {
			c.removedPairs = append(c.removedPairs, DirectNIC{HostInterface: iface, Address: a})
			delete(s.directOf, a)
		}
		if ok {
			c.addedPairs = append(c.addedPairs, DirectNIC{HostInterface: want.HostInterface, Address: a})
			s.directOf[a] = want.HostInterface
		}
	}
	for n := range names {
		// A direct NIC's interface is filtered in every family's table, whatever the
		// families of its addresses: a NIC with only an IPv4 address must not send IPv6
		// with a source of its choosing, nor the reverse (docs/datapath.md#anti-spoofing).
		listed := ix.ifaces[familyIface{name: n}]
		for _, f := range families {
			listed += ix.ifaces[familyIface{fam: f, name: n}]
		}
		for _, f := range families {
			k := familyIface{fam: f, name: n}
			_, had := s.directIfaces[k]
			switch want := listed > 0; {
			case want && !had:
				c.addedIfaces = append(c.addedIfaces, k)
				s.directIfaces[k] = struct{}{}
			case !want && had:
				c.removedIfaces = append(c.removedIfaces, k)
				delete(s.directIfaces, k)
			}
		}
	}
	slices.SortFunc(c.removedIfaces, compareFamilyIface)
	slices.SortFunc(c.addedIfaces, compareFamilyIface)
	slices.SortFunc(c.removedPairs, compareDirect)
	slices.SortFunc(c.addedPairs, compareDirect)
}

// limitOf decides the limit keyed by address a (an ElasticIP, NAT or
// direct) and the source its outbound traffic carries. A kept mapping's
// limit wins over a direct NIC's on the same address.
func (ix *index) limitOf(a netip.Addr) (mbps int32, src netip.Addr, ok bool) {
	s := ix.s
	if pod, isEIP := s.eip2vpc[a]; isEIP {
		bw := s.natBW[a]
		return bw, pod, bw > 0
	}
	if _, isPod := s.vpc2eip[a]; isPod {
		return 0, netip.Addr{}, false
	}
	if _, allowed := s.directOf[a]; allowed {
		bw := ix.byAddr[a][0].BandwidthMbps
		return bw, a, bw > 0
	}
	return 0, netip.Addr{}, false
}

// updateLimits applies the limits of the touched addresses: limit chains
// removed, added or given a new rate, and the outbound map's sources.
func (ix *index) updateLimits(addrs addrSet, dl *delta) {
	s, c := ix.s, &dl.limits
	for a := range addrs {
		mbps, src, ok := ix.limitOf(a)
		have, had := s.limits[a]
		from := s.limitFrom[a]
		switch {
		case !ok && !had:
			continue
		case ok && !had:
			c.added = append(c.added, a)
			c.addedSrc = append(c.addedSrc, limitSource{addr: src, eip: a})
		case !ok && had:
			c.removed = append(c.removed, a)
			c.removedSrc = append(c.removedSrc, limitSource{addr: from, eip: a})
		default:
			if mbps != have {
				c.changed = append(c.changed, a)
			}
			if src != from {
				c.removedSrc = append(c.removedSrc, limitSource{addr: from, eip: a})
				c.addedSrc = append(c.addedSrc, limitSource{addr: src, eip: a})
			}
		}
		if ok {
			s.limits[a] = mbps
		} else {
			delete(s.limits, a)
			delete(s.limitFrom, a)
		}
	}
	for _, r := range c.removedSrc {
		if s.limitSrc[r.addr] == r.eip {
			delete(s.limitSrc, r.addr)
		}
	}
	for _, r := range c.addedSrc {
		s.limitSrc[r.addr] = r.eip
		s.limitFrom[r.eip] = r.addr
	}
	for _, l := range [][]netip.Addr{c.removed, c.added, c.changed} {
		slices.SortFunc(l, netip.Addr.Compare)
	}
	bySrc := func(a, b limitSource) int { return a.addr.Compare(b.addr) }
	slices.SortFunc(c.removedSrc, bySrc)
	slices.SortFunc(c.addedSrc, bySrc)
}
