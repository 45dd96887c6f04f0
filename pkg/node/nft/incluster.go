package nft

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/google/nftables"
)

// In-cluster clients (README.md, "In-cluster clients"): every node knows
// every NAT mapping of the cluster, in the map MapClusterEIP2VPC, and
// translates its own cluster clients' connections to an ElasticIP at their
// origin with connection tracking. This file validates those mappings (the
// part of index that concerns them) and writes their elements.

// clusterIndex counts the in-cluster mapping entries, the node's own
// mappings included, by ElasticIP and Pod IP. A mapping E -> P is kept when
// E is given with one Pod IP only and no entry uses E as its Pod IP (traffic
// to a Pod IP is never redirected). A Pod IP with several ElasticIPs is
// fine: each is translated to it, and the replies are reversed by their own
// connection.
type clusterIndex struct {
	count map[Mapping]int          // well-formed entries (unmapped addresses, no bandwidth)
	byEIP map[netip.Addr][]Mapping // the distinct entries of each ElasticIP
	byPod map[netip.Addr][]Mapping // ... and of each Pod IP
	bad   map[Mapping]int          // malformed entries, as given (no bandwidth)
	issue map[netip.Addr]struct{}  // addresses with a conflict to report
}

func newClusterIndex() clusterIndex {
	return clusterIndex{
		count: map[Mapping]int{}, byEIP: map[netip.Addr][]Mapping{}, byPod: map[netip.Addr][]Mapping{},
		bad: map[Mapping]int{}, issue: map[netip.Addr]struct{}{},
	}
}

// entry counts one in-cluster mapping in (n = 1) or out (n = -1) and records
// the addresses whose decision or conflicts may change.
func (c *clusterIndex) entry(m Mapping, n int, touched addrSet) {
	t := Mapping{ElasticIP: m.ElasticIP.Unmap(), PodIP: m.PodIP.Unmap()}
	if !wellFormed(t) {
		count(c.bad, Mapping{ElasticIP: m.ElasticIP, PodIP: m.PodIP}, n)
		return
	}
	switch count(c.count, t, n) {
	case 1:
		if n > 0 {
			c.byEIP[t.ElasticIP] = append(c.byEIP[t.ElasticIP], t)
			c.byPod[t.PodIP] = append(c.byPod[t.PodIP], t)
		}
	case 0:
		c.byEIP[t.ElasticIP] = without(c.byEIP, t.ElasticIP, t)
		c.byPod[t.PodIP] = without(c.byPod, t.PodIP, t)
	}
	// The Pod IP too: its use as a Pod IP decides whether it may be an
	// ElasticIP.
	touched.add(t.ElasticIP, t.PodIP)
}

// of decides the Pod IP of an in-cluster ElasticIP.
func (c *clusterIndex) of(eip netip.Addr) (netip.Addr, bool) {
	es := c.byEIP[eip]
	if len(es) != 1 || len(c.byPod[eip]) != 0 {
		return netip.Addr{}, false
	}
	return es[0].PodIP, true
}

// updateCluster applies the decisions of the touched addresses to the state
// and records the element changes.
func (ix *index) updateCluster(touched addrSet, dl *delta) {
	s := ix.s
	for e := range touched {
		want, ok := ix.cl.of(e)
		have, had := s.cluster[e]
		if ok == had && (!ok || want == have) {
			continue
		}
		if had {
			dl.clusterRemoved = append(dl.clusterRemoved, Mapping{ElasticIP: e, PodIP: have})
			delete(s.cluster, e)
		}
		if ok {
			dl.clusterAdded = append(dl.clusterAdded, Mapping{ElasticIP: e, PodIP: want})
			s.cluster[e] = want
		}
	}
	byEIP := func(a, b Mapping) int { return a.ElasticIP.Compare(b.ElasticIP) }
	slices.SortFunc(dl.clusterRemoved, byEIP)
	slices.SortFunc(dl.clusterAdded, byEIP)
}

func (c *clusterIndex) issues(a netip.Addr) []error {
	var errs []error
	asEIP, asPod := c.byEIP[a], c.byPod[a]
	if pods := distinct(asEIP, func(m Mapping) netip.Addr { return m.PodIP }); len(pods) > 1 {
		errs = append(errs, fmt.Errorf("in-cluster clients: ElasticIP %v mapped to several Pod IPs %v", a, sortedAddrs(pods)))
	}
	if len(asEIP) > 0 && len(asPod) > 0 {
		errs = append(errs, fmt.Errorf("in-cluster clients: %v used both as ElasticIP and as Pod IP", a))
	}
	return errs
}

// errs reports the malformed entries and the conflicts, sorted.
func (c *clusterIndex) errs() []error {
	var errs []error
	for _, m := range slices.SortedFunc(maps.Keys(c.bad), compareMapping) {
		errs = append(errs, fmt.Errorf("in-cluster mapping %v: %s", m, malformed(m)))
	}
	for _, a := range sortedKeys(c.issue) {
		errs = append(errs, c.issues(a)...)
	}
	return errs
}

// addCluster adds the elements of the in-cluster map for mappings to out,
// keys only when keysOnly (deletions).
func addCluster(out map[*nftables.Set][]nftables.SetElement, s familySets, mappings []Mapping, keysOnly bool) {
	for _, m := range mappings {
		el := nftables.SetElement{Key: addrBytes(m.ElasticIP)}
		if !keysOnly {
			el.Val = addrBytes(m.PodIP)
		}
		set := s.of(m.ElasticIP).clusterEIP2VPC
		out[set] = append(out[set], el)
	}
}
