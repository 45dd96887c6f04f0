package pool

import (
	"net/netip"
	"slices"
	"sync"

	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// counts keeps, for every pool, the claims its status counts, maintained from claim
// events so that a claim costs the pools it touches O(1) each and no pool is recounted
// from every claim. A pool is counted afresh from the claim cache only when it appears or
// its addresses change.
//
// Every change is idempotent (a set of claim names per pool), so the order in which the
// claim and pool informers deliver their events does not matter: a recount reads the
// claim cache, which an informer updates before it calls the handlers, so a claim event
// that follows a recount finds its claim counted already (or already gone).
type counts struct {
	mu    sync.Mutex
	pools map[string]*poolCount
}

// poolCount is what one pool's status counts.
type poolCount struct {
	addresses []string        // spec.addresses the count was made for
	ranges    []iprange.Range // nil when the entries cannot be read
	// claims holds the names of the claims counted: those on an address of the pool or,
	// for a pool whose entries cannot be read, those naming it. The value says whether
	// the address is one automatic allocation skips (pinned through requestedIP).
	claims map[string]bool
	pinned int64
}

// tally is the count of one pool at one moment.
type tally struct {
	allocated, pinned int64
}

func newCounts() *counts {
	return &counts{pools: map[string]*poolCount{}}
}

// count returns the pool's tally, counting it afresh from all claims when its addresses
// differ from those it was counted for (or it was never counted).
func (c *counts) count(pool *v1alpha1.AddressPool, all func() []*v1alpha1.AllocationClaim) tally {
	c.mu.Lock()
	defer c.mu.Unlock()
	pc := c.pools[pool.Name]
	if pc == nil || !slices.Equal(pc.addresses, pool.Spec.Addresses) {
		pc = recount(pool, all())
		c.pools[pool.Name] = pc
	}
	return pc.tally()
}

func (pc *poolCount) tally() tally {
	return tally{allocated: int64(len(pc.claims)), pinned: pc.pinned}
}

// setPool counts a new or changed pool afresh; pools whose addresses did not change keep
// their count.
func (c *counts) setPool(pool *v1alpha1.AddressPool, all func() []*v1alpha1.AllocationClaim) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pc := c.pools[pool.Name]; pc != nil && slices.Equal(pc.addresses, pool.Spec.Addresses) {
		return
	}
	c.pools[pool.Name] = recount(pool, all())
}

func (c *counts) deletePool(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pools, name)
}

// addClaim counts the claim in every pool it belongs to and returns those pools.
func (c *counts) addClaim(claim *v1alpha1.AllocationClaim) []string {
	return c.apply(claim, true)
}

// removeClaim uncounts the claim wherever it was counted and returns those pools.
func (c *counts) removeClaim(claim *v1alpha1.AllocationClaim) []string {
	return c.apply(claim, false)
}

func (c *counts) apply(claim *v1alpha1.AllocationClaim, add bool) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	addr, addrErr := netip.ParseAddr(claim.Spec.Address)
	var touched []string
	for name, pc := range c.pools {
		var pinned bool
		switch {
		case pc.ranges == nil:
			if claim.Spec.AddressPool != name {
				continue
			}
		case addrErr != nil:
			continue
		default:
			in, skipped := classify(pc.ranges, addr)
			if !in {
				continue
			}
			pinned = skipped
		}
		if pc.set(claim.Name, pinned, add) {
			touched = append(touched, name)
		}
	}
	return touched
}

// set adds or removes one claim and says whether the count changed.
func (pc *poolCount) set(name string, pinned, add bool) bool {
	was, counted := pc.claims[name]
	switch {
	case add && counted && was == pinned:
		return false
	case add:
		if counted && was {
			pc.pinned--
		}
		pc.claims[name] = pinned
		if pinned {
			pc.pinned++
		}
	case !counted:
		return false
	default:
		delete(pc.claims, name)
		if was {
			pc.pinned--
		}
	}
	return true
}

// recount counts one pool from all claims (docs/reference.md#addresspool): claims on its
// addresses, whatever pool they name, or, when its entries cannot be read, the claims
// naming it.
func recount(pool *v1alpha1.AddressPool, claims []*v1alpha1.AllocationClaim) *poolCount {
	pc := &poolCount{addresses: slices.Clone(pool.Spec.Addresses), claims: map[string]bool{}}
	ranges, err := iprange.ParsePool(pool.Spec.Addresses)
	if err == nil {
		pc.ranges = ranges
	}
	for _, claim := range claims {
		if pc.ranges == nil {
			if claim.Spec.AddressPool == pool.Name {
				pc.set(claim.Name, false, true)
			}
			continue
		}
		addr, err := netip.ParseAddr(claim.Spec.Address)
		if err != nil {
			continue
		}
		if in, pinned := classify(pc.ranges, addr); in {
			pc.set(claim.Name, pinned, true)
		}
	}
	return pc
}

// classify says whether addr lies in the ranges and, if so, whether it is an address
// automatic allocation skips (a network or broadcast address pinned through requestedIP).
func classify(ranges []iprange.Range, addr netip.Addr) (in, pinned bool) {
	for _, r := range ranges {
		if !r.Contains(addr) {
			continue
		}
		auto, ok := r.Auto()
		return true, !ok || !auto.Contains(addr)
	}
	return false, false
}
