package ipam

import (
	"cmp"
	"net/netip"
	"slices"
	"sync"

	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
)

// Index knows which addresses are reserved (one AllocationClaim each) and finds the free
// ones of a list of pools. It is fed from the claim cache: Mark on add, Unmark on delete,
// Replace after a relist. Per pool it keeps a bitmap with summary levels, so finding the
// next free address costs O(log n) however full the pool is.
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
		if pos, ok := pi.bits.nextClear(0); ok {
			c := Candidate{Pool: p.Name, Addr: pi.addrAt(pos)}
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

// span is a run of pool addresses laid out from bit offset on.
type span struct {
	first, last netip.Addr
	offset      uint64
}

// poolIndex lays the pool's addresses (the union of its entries) out as bit positions.
// A set bit is an address automatic picks must not hand out: reserved, or skipped.
type poolIndex struct {
	ranges []iprange.Range
	spans  []span // sorted, disjoint, not adjacent
	skip   map[netip.Addr]struct{}
	bits   *bitTree
	size   uint64
}

func buildPoolIndex(ranges []iprange.Range) *poolIndex {
	pi := &poolIndex{ranges: slices.Clone(ranges), skip: map[netip.Addr]struct{}{}}
	var valid []iprange.Range
	for _, r := range ranges {
		if r.Valid() {
			valid = append(valid, r)
		}
	}
	sorted := slices.Clone(valid)
	slices.SortFunc(sorted, func(a, b iprange.Range) int { return a.First.Compare(b.First) })
	for _, r := range sorted {
		if n := len(pi.spans); n > 0 && joins(pi.spans[n-1].last, r.First) {
			if pi.spans[n-1].last.Less(r.Last) {
				pi.spans[n-1].last = r.Last
			}
			continue
		}
		pi.spans = append(pi.spans, span{first: r.First, last: r.Last})
	}
	for i := range pi.spans {
		pi.spans[i].offset = pi.size
		pi.size += iprange.Range{First: pi.spans[i].first, Last: pi.spans[i].last}.Size()
	}
	pi.bits = newBitTree(pi.size)
	for _, r := range valid {
		for _, a := range leftOut(r) {
			if !autoInAny(valid, a) {
				pi.skip[a] = struct{}{}
				pos, _ := pi.posOf(a)
				pi.bits.set(pos)
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

func (pi *poolIndex) posOf(a netip.Addr) (uint64, bool) {
	// First span whose last address is >= a.
	i, _ := slices.BinarySearchFunc(pi.spans, a, func(s span, a netip.Addr) int { return s.last.Compare(a) })
	if i == len(pi.spans) || a.Less(pi.spans[i].first) {
		return 0, false
	}
	d, ok := iprange.Distance(pi.spans[i].first, a)
	return pi.spans[i].offset + d, ok
}

func (pi *poolIndex) addrAt(pos uint64) netip.Addr {
	// Last span whose offset is <= pos.
	i, found := slices.BinarySearchFunc(pi.spans, pos, func(s span, p uint64) int { return cmp.Compare(s.offset, p) })
	if !found {
		i--
	}
	a, _ := iprange.Add(pi.spans[i].first, pos-pi.spans[i].offset)
	return a
}

func (pi *poolIndex) mark(a netip.Addr) {
	if _, skipped := pi.skip[a]; skipped {
		return // its bit stays set either way
	}
	if pos, ok := pi.posOf(a); ok {
		pi.bits.set(pos)
	}
}

func (pi *poolIndex) unmark(a netip.Addr) {
	if _, skipped := pi.skip[a]; skipped {
		return
	}
	if pos, ok := pi.posOf(a); ok {
		pi.bits.clear(pos)
	}
}
