package nft

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
)

// noteIssues records in set whether address a has conflicts to report.
func noteIssues(set map[netip.Addr]struct{}, a netip.Addr, issues func(netip.Addr) []error) {
	if len(issues(a)) > 0 {
		set[a] = struct{}{}
	} else {
		delete(set, a)
	}
}

func (ix *index) natIssues(a netip.Addr) []error {
	var errs []error
	asEIP, asPod := ix.byEIP[a], ix.byPod[a]
	if pods := distinct(asEIP, func(m Mapping) netip.Addr { return m.PodIP }); len(pods) > 1 {
		errs = append(errs, fmt.Errorf("ElasticIP %v mapped to several Pod IPs %v", a, sortedAddrs(pods)))
	}
	if eips := distinct(asPod, func(m Mapping) netip.Addr { return m.ElasticIP }); len(eips) > 1 {
		errs = append(errs, fmt.Errorf("Pod IP %v mapped to several ElasticIPs %v", a, sortedAddrs(eips)))
	}
	if len(asEIP) > 0 && len(asPod) > 0 {
		errs = append(errs, fmt.Errorf("%v used both as ElasticIP and as Pod IP", a))
	}
	if len(distinct(asEIP, func(m Mapping) int32 { return m.BandwidthMbps })) > 1 {
		errs = append(errs, fmt.Errorf("ElasticIP %v listed with different bandwidths", a))
	}
	return errs
}

func (ix *index) dirIssues(a netip.Addr) []error {
	var errs []error
	es := ix.byAddr[a]
	if names := distinct(es, func(d DirectNIC) string { return d.HostInterface }); len(names) > 1 {
		slices.Sort(names)
		errs = append(errs, fmt.Errorf("address %v listed for several direct NICs %q", a, names))
	}
	if len(distinct(es, func(d DirectNIC) int32 { return d.BandwidthMbps })) > 1 {
		errs = append(errs, fmt.Errorf("direct NIC address %v listed with different bandwidths", a))
	}
	if d, ok := ix.directOf(a); ok && d.BandwidthMbps > 0 {
		_, isEIP := ix.s.eip2vpc[a]
		_, isPod := ix.s.vpc2eip[a]
		if isEIP || isPod {
			errs = append(errs, fmt.Errorf("direct NIC address %v is also used by a NAT mapping: its bandwidth limit is ignored", a))
		}
	}
	return errs
}

func distinct[T any, K comparable](l []T, key func(T) K) []K {
	var out []K
	for _, v := range l {
		if k := key(v); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// err reports everything left out, wrapping ErrInvalidMapping, or nil. It
// looks only at what is wrong, so it costs nothing when all is well.
func (ix *index) err() error {
	if len(ix.natBad)+len(ix.natIssue)+len(ix.dirBad)+len(ix.dirIssue)+len(ix.cl.bad)+len(ix.cl.issue) == 0 {
		return nil
	}
	var errs []error
	for _, m := range slices.SortedFunc(maps.Keys(ix.natBad), compareMapping) {
		if validBandwidth(m.BandwidthMbps) {
			errs = append(errs, fmt.Errorf("%v: %s", m, malformed(m)))
		} else {
			errs = append(errs, fmt.Errorf("%v: %w", m, errBandwidth))
		}
	}
	for _, a := range sortedKeys(ix.natIssue) {
		errs = append(errs, ix.natIssues(a)...)
	}
	for _, d := range slices.SortedFunc(maps.Keys(ix.dirBad), compareDirect) {
		switch {
		case d.HostInterface == "" || len(d.HostInterface) > maxIfNameLen:
			errs = append(errs, fmt.Errorf("direct NIC %v: host interface name %q", d, d.HostInterface))
		case d.HostInterface == ix.s.iface:
			errs = append(errs, fmt.Errorf("direct NIC %v: host interface is the external interface", d))
		case !usable(d.Address.Unmap()):
			errs = append(errs, fmt.Errorf("direct NIC %v: address must be a unicast address (IPv6: not link-local)", d))
		default:
			errs = append(errs, fmt.Errorf("direct NIC %v: %w", d, errBandwidth))
		}
	}
	for _, a := range sortedKeys(ix.dirIssue) {
		errs = append(errs, ix.dirIssues(a)...)
	}
	errs = append(errs, ix.cl.errs()...)
	return fmt.Errorf("%w: %w", ErrInvalidMapping, errors.Join(errs...))
}

// wellFormed reports a mapping of two distinct usable addresses of one
// family (unmapped).
func wellFormed(m Mapping) bool {
	return usable(m.ElasticIP) && usable(m.PodIP) && m.ElasticIP != m.PodIP && m.ElasticIP.Is4() == m.PodIP.Is4()
}

// malformed says what is wrong with a mapping that is not wellFormed.
func malformed(m Mapping) string {
	e, p := m.ElasticIP.Unmap(), m.PodIP.Unmap()
	if usable(e) && usable(p) && e.Is4() != p.Is4() {
		fam := "IPv4"
		if e.Is6() {
			fam = "IPv6"
		}
		return fmt.Sprintf("ElasticIP and Pod IP are of different families: an %s ElasticIP is translated only to the Pod's %s address (no NAT64)", fam, fam)
	}
	return "addresses must be distinct unicast addresses of one family (IPv6: not link-local)"
}

func compareMapping(a, b Mapping) int {
	if c := a.ElasticIP.Compare(b.ElasticIP); c != 0 {
		return c
	}
	if c := a.PodIP.Compare(b.PodIP); c != 0 {
		return c
	}
	return int(a.BandwidthMbps) - int(b.BandwidthMbps)
}
