package ipam

import (
	"net/netip"
	"slices"
	"sync"

	"github.com/google/btree"

	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
)

// Index knows which addresses are reserved (one AllocationClaim each) and finds the free
// ones of a list of pools. It is fed from the claim cache: Mark on add, Unmark on delete,
// Replace after a relist. Per pool it keeps the free addresses as an ordered set of
// disjoint intervals (a B-tree keyed by their first address): taking the first free
// address, marking and unmarking one each cost O(log n) in the number of intervals, and
// memory grows with the number of reserved addresses, never with the size of the pool,
// so an IPv6 /64 costs what a /24 with as many reservations costs.
//
// The allocation loop of a caller, whose cache may lag behind the API server:
//
//	for {
//		c, ok := idx.Take(pools) // marked: no other worker gets it
//		if !ok {
//			// every pool is exhausted
//		}
//		err := createClaim(c) // named c.Addr
//		if apierrors.IsAlreadyExists(err) {
//			continue // the cache had not seen it yet: it stays marked, ask again
//		}
//		if err != nil {
//			idx.Unmark(c.Addr)
//		}
//		...
//	}
//
// Every Mark for an address the cache never confirms is undone by the next Replace.
// An Index is safe for concurrent use.
type Index struct {
	mu    sync.Mutex
	used  map[netip.Addr]struct{}
	pools map[string]*poolIndex
}

// NewIndex returns an empty Index.
func NewIndex() *Index {
	return &Index{used: map[netip.Addr]struct{}{}, pools: map[string]*poolIndex{}}
}

// Mark records addr as reserved. Marking a reserved address again changes nothing.
func (x *Index) Mark(addr netip.Addr) {
	addr = addr.Unmap()
	if !addr.IsValid() {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.used[addr]; ok {
		return
	}
	x.used[addr] = struct{}{}
	for _, p := range x.pools {
		p.mark(addr)
	}
}

// Unmark records that addr is free again.
func (x *Index) Unmark(addr netip.Addr) {
	addr = addr.Unmap()
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.used[addr]; !ok {
		return
	}
	delete(x.used, addr)
	for _, p := range x.pools {
		p.unmark(addr)
	}
}

// Replace makes addrs the complete set of reserved addresses.
func (x *Index) Replace(addrs []netip.Addr) {
	used := make(map[netip.Addr]struct{}, len(addrs))
	for _, a := range addrs {
		if a = a.Unmap(); a.IsValid() {
			used[a] = struct{}{}
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.used = used
	clear(x.pools) // rebuilt on next use
}

// Take returns the first free address of pools, in pool order and then address order,
// skipping what automatic allocation leaves out (iprange.Range.Auto), and marks it in
// the same step, so concurrent callers never get the same candidate. The caller Unmarks
// it if the reservation fails for a reason other than the address being taken already.
func (x *Index) Take(pools []Pool) (Candidate, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, p := range pools {
		pi := x.poolLocked(p)
		if a, ok := pi.first(); ok {
			c := Candidate{Pool: p.Name, Addr: a}
			x.used[c.Addr] = struct{}{}
			for _, q := range x.pools {
				q.mark(c.Addr)
			}
			return c, true
		}
	}
	return Candidate{}, false
}

// poolLocked returns the index of p, (re)building it when p's entries changed.
func (x *Index) poolLocked(p Pool) *poolIndex {
	if pi, ok := x.pools[p.Name]; ok && slices.Equal(pi.ranges, p.Ranges) {
		return pi
	}
	pi := buildPoolIndex(p.Ranges)
	for a := range x.used {
		pi.mark(a)
	}
	x.pools[p.Name] = pi
	return pi
}

// interval is a run of free addresses First..Last of one family.
type interval struct {
	first, last netip.Addr
}

func intervalLess(a, b interval) bool { return a.first.Less(b.first) }

// poolIndex holds the free addresses of a pool (the union of its entries) as disjoint,
// non-adjacent intervals. An address automatic picks leave out (iprange.Range.Auto) is
// never free, whatever Unmark says.
type poolIndex struct {
	ranges []iprange.Range
	spans  []iprange.Range // the pool's addresses: sorted, disjoint, not adjacent
	skip   map[netip.Addr]struct{}
	free   *btree.BTreeG[interval]
}

func buildPoolIndex(ranges []iprange.Range) *poolIndex {
	pi := &poolIndex{ranges: slices.Clone(ranges), skip: map[netip.Addr]struct{}{},
		free: btree.NewG(32, intervalLess)}
	var valid []iprange.Range
	for _, r := range ranges {
		if r.Valid() {
			valid = append(valid, r)
		}
	}
	sorted := slices.Clone(valid)
	slices.SortFunc(sorted, func(a, b iprange.Range) int { return a.First.Compare(b.First) })
	for _, r := range sorted {
		if n := len(pi.spans); n > 0 && joins(pi.spans[n-1].Last, r.First) {
			if pi.spans[n-1].Last.Less(r.Last) {
				pi.spans[n-1].Last = r.Last
			}
			continue
		}
		pi.spans = append(pi.spans, iprange.Range{First: r.First, Last: r.Last})
	}
	for _, s := range pi.spans {
		pi.free.ReplaceOrInsert(interval{first: s.First, last: s.Last})
	}
	for _, r := range valid {
		for _, a := range leftOut(r) {
			if !autoInAny(valid, a) {
				pi.take(a)
				pi.skip[a] = struct{}{}
			}
		}
	}
	return pi
}

// joins reports whether a span ending at last and a range starting at first (sorted
// after it) make one run of addresses.
func joins(last, first netip.Addr) bool {
	if last.Is4() != first.Is4() {
		return false
	}
	next := last.Next()
	return !next.IsValid() || first.Compare(next) <= 0
}

// leftOut lists the addresses of r that automatic picks leave out: the ends outside
// r.Auto() (a few addresses at most).
func leftOut(r iprange.Range) []netip.Addr {
	auto, ok := r.Auto()
	if !ok {
		auto = iprange.Range{First: r.Last.Next(), Last: r.Last}
	}
	var out []netip.Addr
	for a := r.First; a.IsValid() && a.Less(auto.First); a = a.Next() {
		out = append(out, a)
	}
	for a := auto.Last.Next(); a.IsValid() && !r.Last.Less(a); a = a.Next() {
		out = append(out, a)
	}
	return out
}

// autoInAny reports whether some entry lets automatic picks hand out a.
func autoInAny(ranges []iprange.Range, a netip.Addr) bool {
	for _, r := range ranges {
		if auto, ok := r.Auto(); ok && auto.Contains(a) {
			return true
		}
	}
	return false
}

// inPool reports whether a is one of the pool's addresses.
func (pi *poolIndex) inPool(a netip.Addr) bool {
	// First span whose last address is >= a.
	i, _ := slices.BinarySearchFunc(pi.spans, a, func(s iprange.Range, a netip.Addr) int { return s.Last.Compare(a) })
	return i < len(pi.spans) && pi.spans[i].Contains(a)
}

// first is the lowest free address.
func (pi *poolIndex) first() (netip.Addr, bool) {
	iv, ok := pi.free.Min()
	return iv.first, ok
}

// around is the free interval that starts at or before a, if any.
func (pi *poolIndex) around(a netip.Addr) (interval, bool) {
	var found interval
	ok := false
	pi.free.DescendLessOrEqual(interval{first: a}, func(iv interval) bool {
		found, ok = iv, true
		return false
	})
	return found, ok
}

// take removes a from the free intervals, splitting the one that holds it.
func (pi *poolIndex) take(a netip.Addr) {
	iv, ok := pi.around(a)
	if !ok || iv.last.Less(a) {
		return // not free
	}
	pi.free.Delete(iv)
	if iv.first.Less(a) {
		pi.free.ReplaceOrInsert(interval{first: iv.first, last: a.Prev()})
	}
	if a.Less(iv.last) {
		pi.free.ReplaceOrInsert(interval{first: a.Next(), last: iv.last})
	}
}

// give adds a to the free intervals, joining its free neighbours.
func (pi *poolIndex) give(a netip.Addr) {
	merged := interval{first: a, last: a}
	if before, ok := pi.around(a); ok {
		if !before.last.Less(a) {
			return // already free
		}
		if before.last.Next() == a {
			pi.free.Delete(before)
			merged.first = before.first
		}
	}
	if next := a.Next(); next.IsValid() {
		if after, ok := pi.free.Get(interval{first: next}); ok {
			pi.free.Delete(after)
			merged.last = after.last
		}
	}
	pi.free.ReplaceOrInsert(merged)
}

func (pi *poolIndex) mark(a netip.Addr) {
	if _, skipped := pi.skip[a]; skipped {
		return // never free either way
	}
	pi.take(a)
}

func (pi *poolIndex) unmark(a netip.Addr) {
	if _, skipped := pi.skip[a]; skipped || !pi.inPool(a) {
		return
	}
	pi.give(a)
}

// intervals is the number of free intervals (memory use grows with it).
func (pi *poolIndex) intervals() int { return pi.free.Len() }
