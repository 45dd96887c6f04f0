package nft

import (
	"maps"
	"net/netip"
	"slices"
	"sync"

	"github.com/loutres/juneau/pkg/listdiff"
)

// Programmed is what Sync programs of a DesiredState: every mapping and direct NIC it
// keeps after leaving out the invalid and conflicting ones.
type Programmed struct {
	// Mappings maps each translated ElasticIP to its Pod IP.
	Mappings map[netip.Addr]netip.Addr
	// Direct maps each allowed direct NIC address to its host interface.
	Direct map[netip.Addr]string
}

// Check validates desired exactly as Sync does, without touching the kernel. It returns
// what Sync would program and the error Sync would return: one wrapping
// ErrInvalidConfig (then Sync changes nothing, and Programmed is empty) or
// ErrInvalidMapping (what was left out). Callers deciding what depends on the
// datapath — answering ARP, a Pod's readiness — use it to agree with Sync.
func Check(desired DesiredState) (Programmed, error) {
	s, err := normalize(desired)
	if s == nil {
		return Programmed{}, err
	}
	return Programmed{Mappings: maps.Clone(s.eip2vpc), Direct: maps.Clone(s.directOf)}, err
}

// Checker is Check for a caller that checks one desired state after another, each
// close to the last (the node agent, at every sync): it keeps the index of the last
// state and applies only the change to it, found as Sync finds it (the lists in the
// same order make it cheap), so that a check on 100,000 mappings costs what the change
// costs, where Check rebuilds the whole index (docs/performance.md#scale). Its answers
// are Check's, but not copies: the maps of a Programmed it returns are its index's own,
// changed by its next Check (copying them took ~6 ms and 7 MB a sync at 100,000), so a
// caller reads them before that call and never writes them. Safe for concurrent use
// under that rule.
type Checker struct {
	mu           sync.Mutex
	ix           *index
	cfg          Config
	prevM, prevC []Mapping
	prevD        []DirectNIC
	// seenM, seenC: the versions of prevM and prevC (as the Programmer's).
	seenM, seenC uint64
}

// Check is Check(desired), from the change since the last call.
func (c *Checker) Check(desired DesiredState) (Programmed, error) {
	if err := validConfig(desired.Config); err != nil {
		return Programmed{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ix == nil || c.cfg.ExternalInterface != desired.ExternalInterface || !slices.Equal(c.cfg.ClusterCIDRs, desired.ClusterCIDRs) {
		ix, err := newIndex(desired.Config)
		if err != nil {
			return Programmed{}, err
		}
		ix.apply(nil, desired.Mappings, nil, desired.Direct, nil, desired.InCluster)
		c.ix = ix
		c.cfg = Config{ExternalInterface: desired.ExternalInterface, ClusterCIDRs: slices.Clone(desired.ClusterCIDRs)}
		c.prevM = append(c.prevM[:0], desired.Mappings...)
		c.prevD = append(c.prevD[:0], desired.Direct...)
		c.prevC = append(c.prevC[:0], desired.InCluster...)
	} else {
		wM, wD, wC := listdiff.Since(desired.MappingsChange, c.seenM, c.prevM, desired.Mappings), listdiff.Of(c.prevD, desired.Direct),
			listdiff.Since(desired.InClusterChange, c.seenC, c.prevC, desired.InCluster)
		c.ix.apply(c.prevM[wM.Start:wM.OldEnd], desired.Mappings[wM.Start:wM.NewEnd],
			c.prevD[wD.Start:wD.OldEnd], desired.Direct[wD.Start:wD.NewEnd],
			c.prevC[wC.Start:wC.OldEnd], desired.InCluster[wC.Start:wC.NewEnd])
		c.prevM = listdiff.Follow(c.prevM, desired.Mappings, wM)
		c.prevD = listdiff.Follow(c.prevD, desired.Direct, wD)
		c.prevC = listdiff.Follow(c.prevC, desired.InCluster, wC)
	}
	c.seenM, c.seenC = desired.MappingsChange.To, desired.InClusterChange.To
	s := c.ix.s
	return Programmed{Mappings: s.eip2vpc, Direct: s.directOf}, c.ix.err()
}
