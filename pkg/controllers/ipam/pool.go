package ipam

import (
	"fmt"
	"net/netip"

	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
)

// Pool is an AddressPool's entries in the order its spec lists them.
type Pool struct {
	Name   string
	Ranges []iprange.Range
}

// Candidate is a free address and the pool it comes from.
type Candidate struct {
	Pool string
	Addr netip.Addr
}

// NewPool parses the spec.addresses entries of the AddressPool called name.
func NewPool(name string, entries []string) (Pool, error) {
	if len(entries) == 0 {
		return Pool{}, fmt.Errorf("pool %q has no addresses", name)
	}
	ranges, err := iprange.ParsePool(entries)
	if err != nil {
		return Pool{}, fmt.Errorf("pool %q: %w", name, err)
	}
	return Pool{Name: name, Ranges: ranges}, nil
}

// PoolFor returns the first of pools that has addr in one of its entries. Network and
// broadcast addresses count: a requestedIP may pin them.
func PoolFor(pools []Pool, addr netip.Addr) (poolName string, ok bool) {
	addr = addr.Unmap()
	for _, p := range pools {
		if iprange.Contain(p.Ranges, addr) {
			return p.Name, true
		}
	}
	return "", false
}

// Family is the family of the pool's addresses (a pool holds one); false for a pool
// without entries.
func (p Pool) Family() (iprange.Family, bool) {
	return iprange.PoolFamily(p.Ranges)
}

// OfFamily returns the pools of family f, in order.
func OfFamily(pools []Pool, f iprange.Family) []Pool {
	var out []Pool
	for _, p := range pools {
		if pf, ok := p.Family(); ok && pf == f {
			out = append(out, p)
		}
	}
	return out
}
