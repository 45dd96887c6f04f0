package ipam

import (
	"cmp"
	"net/netip"
	"slices"
	"sync"
)

// Index knows which addresses are reserved (one AllocationClaim each) and finds the free
// ones of a list of pools. It is fed from the claim cache: Mark on add, Unmark on delete,
// Replace after a relist. Per pool it keeps a bitmap with summary levels, so finding the
// next free address costs O(log n) however full the pool is.
//
// The allocation loop of a caller, whose cache may lag behind the API server:
//
//	for {
//		c, ok := idx.Next(pools)
//		if !ok {
//			// every pool is exhausted
//		}
//		err := createClaim(c) // named c.Addr
//		if apierrors.IsAlreadyExists(err) {
//			idx.Mark(c.Addr) // the cache had not seen it yet: ask again
//			continue
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
	if !addr.Is4() {
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
		if a = a.Unmap(); a.Is4() {
			used[a] = struct{}{}
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.used = used
	clear(x.pools) // rebuilt on next use
}

// Used reports whether addr is marked as reserved.
func (x *Index) Used(addr netip.Addr) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	_, ok := x.used[addr.Unmap()]
	return ok
}

// Forget drops what the Index built for the pool called name (the pool was deleted).
// Marks are kept: they belong to addresses, not to pools.
func (x *Index) Forget(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.pools, name)
}

// Next returns the first free address of pools, in pool order and then address order,
// skipping the network and broadcast addresses of CIDR entries shorter than /31.
// It reserves nothing: the caller creates the claim and then marks it.
func (x *Index) Next(pools []Pool) (Candidate, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, p := range pools {
		pi := x.poolLocked(p)
		if pos, ok := pi.bits.nextClear(0); ok {
			return Candidate{Pool: p.Name, Addr: pi.addrAt(pos)}, true
		}
	}
	return Candidate{}, false
}

// Take is Next and Mark in one step, so concurrent callers never get the same
// candidate. The caller Unmarks it if the reservation fails for a reason other than the
// address being taken already.
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

// Candidates returns up to limit free addresses, in the order Next would hand them out.
func (x *Index) Candidates(pools []Pool, limit int) []Candidate {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []Candidate
	for _, p := range pools {
		if len(out) >= limit {
			break
		}
		pi := x.poolLocked(p)
		for pos, ok := pi.bits.nextClear(0); ok && len(out) < limit; pos, ok = pi.bits.nextClear(pos + 1) {
			out = append(out, Candidate{Pool: p.Name, Addr: pi.addrAt(pos)})
		}
	}
	return out
}

// Counts returns the pool's figures for AddressPool status. allocated is the number of
// reserved addresses in the pool; total is the number automatic picks may hand out plus
// any network or broadcast address pinned by a claim, so total-allocated is exactly the
// number of addresses still free for automatic picks.
func (x *Index) Counts(pool Pool) (total, allocated uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	pi := x.poolLocked(pool)
	return pi.size - uint64(len(pi.skip)) + pi.allocatedSkip, pi.allocated
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
	first, last uint32
	offset      uint64
}

// poolIndex lays the pool's addresses (the union of its entries) out as bit positions.
// A set bit is an address automatic picks must not hand out: reserved, or skipped.
type poolIndex struct {
	ranges        []Range
	spans         []span // sorted, disjoint, not adjacent
	skip          map[netip.Addr]struct{}
	bits          *bitTree
	size          uint64
	allocated     uint64 // reserved addresses inside the pool
	allocatedSkip uint64 // of which skipped ends
}

func buildPoolIndex(ranges []Range) *poolIndex {
	pi := &poolIndex{ranges: slices.Clone(ranges), skip: map[netip.Addr]struct{}{}}
	var valid []Range
	for _, r := range ranges {
		if r.First.Is4() && r.Last.Is4() && !r.Last.Less(r.First) {
			valid = append(valid, r)
		}
	}
	sorted := slices.Clone(valid)
	slices.SortFunc(sorted, func(a, b Range) int { return a.First.Compare(b.First) })
	for _, r := range sorted {
		f, l := u32(r.First), u32(r.Last)
		if n := len(pi.spans); n > 0 && uint64(f) <= uint64(pi.spans[n-1].last)+1 {
			pi.spans[n-1].last = max(pi.spans[n-1].last, l)
			continue
		}
		pi.spans = append(pi.spans, span{first: f, last: l})
	}
	for i := range pi.spans {
		pi.spans[i].offset = pi.size
		pi.size += uint64(pi.spans[i].last-pi.spans[i].first) + 1
	}
	pi.bits = newBitTree(pi.size)
	for _, r := range valid {
		if !r.SkipEnds {
			continue
		}
		for _, end := range []netip.Addr{r.First, r.Last} {
			if !autoInAny(valid, end) {
				pi.skip[end] = struct{}{}
				pos, _ := pi.posOf(end)
				pi.bits.set(pos)
			}
		}
	}
	return pi
}

// autoInAny reports whether some entry lets automatic picks hand out a.
func autoInAny(ranges []Range, a netip.Addr) bool {
	v := u32(a)
	for _, r := range ranges {
		if f, l, ok := r.autoSpan(); ok && f <= v && v <= l {
			return true
		}
	}
	return false
}

func (pi *poolIndex) posOf(a netip.Addr) (uint64, bool) {
	if !a.Is4() {
		return 0, false
	}
	v := u32(a)
	// First span whose last address is >= v.
	i, _ := slices.BinarySearchFunc(pi.spans, v, func(s span, v uint32) int { return cmp.Compare(s.last, v) })
	if i == len(pi.spans) || v < pi.spans[i].first {
		return 0, false
	}
	return pi.spans[i].offset + uint64(v-pi.spans[i].first), true
}

func (pi *poolIndex) addrAt(pos uint64) netip.Addr {
	// Last span whose offset is <= pos.
	i, found := slices.BinarySearchFunc(pi.spans, pos, func(s span, p uint64) int { return cmp.Compare(s.offset, p) })
	if !found {
		i--
	}
	s := pi.spans[i]
	return fromU32(s.first + uint32(pos-s.offset))
}

func (pi *poolIndex) mark(a netip.Addr) {
	pos, ok := pi.posOf(a)
	if !ok {
		return
	}
	pi.allocated++
	if _, skipped := pi.skip[a]; skipped {
		pi.allocatedSkip++
		return // its bit stays set either way
	}
	pi.bits.set(pos)
}

func (pi *poolIndex) unmark(a netip.Addr) {
	pos, ok := pi.posOf(a)
	if !ok {
		return
	}
	pi.allocated--
	if _, skipped := pi.skip[a]; skipped {
		pi.allocatedSkip--
		return
	}
	pi.bits.clear(pos)
}
