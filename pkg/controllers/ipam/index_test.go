package ipam

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"sync"
	"testing"

	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
)

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = addr(s)
	}
	return out
}

// next is the address Take hands out now, left free again: what the next allocation
// would get.
func next(x *Index, pools []Pool) (Candidate, bool) {
	c, ok := x.Take(pools)
	if ok {
		x.Unmark(c.Addr)
	}
	return c, ok
}

// candidates are the next limit addresses Take hands out, in order, left free again.
func candidates(x *Index, pools []Pool, limit int) []Candidate {
	var out []Candidate
	for len(out) < limit {
		c, ok := x.Take(pools)
		if !ok {
			break
		}
		out = append(out, c)
	}
	for _, c := range out {
		x.Unmark(c.Addr)
	}
	return out
}

// used reports whether addr is marked.
func used(x *Index, addr netip.Addr) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	_, ok := x.used[addr.Unmap()]
	return ok
}

func cands(pool string, ss ...string) []Candidate {
	out := make([]Candidate, len(ss))
	for i, s := range ss {
		out[i] = Candidate{Pool: pool, Addr: addr(s)}
	}
	return out
}

func TestIndexCandidates(t *testing.T) {
	tests := []struct {
		name  string
		pools [][]string // first element of each: pool name
		used  []string
		limit int
		want  []Candidate
	}{{
		name:  "pool order first, then address order inside a pool whatever the entry order",
		pools: [][]string{{"a", "10.225.51.10-10.225.51.11"}, {"b", "10.225.51.100", "10.225.51.0/30"}},
		limit: 10,
		want:  append(cands("a", "10.225.51.10", "10.225.51.11"), cands("b", "10.225.51.1", "10.225.51.2", "10.225.51.100")...),
	}, {
		name:  "a /24 skips its network and broadcast addresses",
		pools: [][]string{{"a", "10.225.51.0/24"}},
		limit: 1,
		want:  cands("a", "10.225.51.1"),
	}, {
		name:  "a /24 ends at .254",
		pools: [][]string{{"a", "10.225.51.0/24"}},
		used:  rangeStrings("10.225.51.1", 252), // .1 to .252
		limit: 10,
		want:  cands("a", "10.225.51.253", "10.225.51.254"),
	}, {
		name:  "a /31 hands out both addresses",
		pools: [][]string{{"a", "10.225.51.4/31"}},
		limit: 10,
		want:  cands("a", "10.225.51.4", "10.225.51.5"),
	}, {
		name:  "a /32 hands out its address",
		pools: [][]string{{"a", "10.225.51.7/32"}},
		limit: 10,
		want:  cands("a", "10.225.51.7"),
	}, {
		name:  "a /30 hands out its two middle addresses",
		pools: [][]string{{"a", "10.225.51.8/30"}},
		limit: 10,
		want:  cands("a", "10.225.51.9", "10.225.51.10"),
	}, {
		name:  "single addresses and an inclusive range keep their ends",
		pools: [][]string{{"a", "10.225.51.50", "10.225.51.40-10.225.51.42", "10.225.51.30"}},
		limit: 10,
		want:  cands("a", "10.225.51.30", "10.225.51.40", "10.225.51.41", "10.225.51.42", "10.225.51.50"),
	}, {
		name:  "used addresses are skipped; the next pool takes over when one is exhausted",
		pools: [][]string{{"a", "10.225.51.0/30"}, {"b", "10.225.51.20-10.225.51.22"}},
		used:  []string{"10.225.51.1", "10.225.51.2", "10.225.51.21"},
		limit: 10,
		want:  cands("b", "10.225.51.20", "10.225.51.22"),
	}, {
		name:  "all pools exhausted",
		pools: [][]string{{"a", "10.225.51.0/30"}, {"b", "10.225.51.9"}},
		used:  []string{"10.225.51.1", "10.225.51.2", "10.225.51.9"},
		limit: 10,
		want:  nil,
	}, {
		name:  "an address listed plainly stays allocatable though a CIDR of the pool would skip it",
		pools: [][]string{{"a", "10.225.51.0/30", "10.225.51.3"}},
		limit: 10,
		want:  cands("a", "10.225.51.1", "10.225.51.2", "10.225.51.3"),
	}, {
		name:  "limit cuts across pools",
		pools: [][]string{{"a", "10.225.51.1"}, {"b", "10.225.51.2-10.225.51.9"}},
		limit: 3,
		want:  append(cands("a", "10.225.51.1"), cands("b", "10.225.51.2", "10.225.51.3")...),
	}, {
		name:  "no pools",
		limit: 3,
		want:  nil,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var pools []Pool
			for _, p := range tc.pools {
				pools = append(pools, mustPool(t, p[0], p[1:]...))
			}
			idx := NewIndex()
			for _, u := range tc.used {
				idx.Mark(addr(u))
			}
			got := candidates(idx, pools, tc.limit)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("candidates = %v\nwant %v", got, tc.want)
			}
			c, ok := next(idx, pools)
			if len(tc.want) == 0 {
				if ok {
					t.Fatalf("next = %v, want exhaustion", c)
				}
				return
			}
			if !ok || c != tc.want[0] {
				t.Fatalf("next = %v, %v; want %v", c, ok, tc.want[0])
			}
		})
	}
}

// rangeStrings returns n consecutive addresses from first.
func rangeStrings(first string, n int) []string {
	out := make([]string, n)
	a := addr(first)
	for i := range out {
		out[i] = a.String()
		a = a.Next()
	}
	return out
}

func TestIndexMarkUnmark(t *testing.T) {
	pools := []Pool{mustPool(t, "a", "10.225.51.0/29")}
	idx := NewIndex()
	expectNext := func(want string) {
		t.Helper()
		got, ok := next(idx, pools)
		if want == "" {
			if ok {
				t.Fatalf("next = %v, want exhaustion", got)
			}
			return
		}
		if !ok || got.Addr != addr(want) || got.Pool != "a" {
			t.Fatalf("next = %v, %v; want %s in pool a", got, ok, want)
		}
	}
	expectNext("10.225.51.1")
	idx.Mark(addr("10.225.51.1"))
	idx.Mark(addr("10.225.51.1")) // twice: still one reservation
	expectNext("10.225.51.2")
	idx.Mark(addr("10.225.51.2"))
	idx.Mark(addr("10.225.51.3"))
	idx.Unmark(addr("10.225.51.1"))
	expectNext("10.225.51.1")
	idx.Unmark(addr("10.225.51.1")) // twice: no effect
	idx.Unmark(addr("10.225.51.99"))
	if free := candidates(idx, pools, 10); len(free) != 4 {
		t.Fatalf("free addresses %v, want the 6 automatic ones but the 2 marked", free)
	}
	for _, a := range rangeStrings("10.225.51.1", 6) {
		idx.Mark(addr(a))
	}
	expectNext("")
	// The network address pinned by a requestedIP and then released does not become
	// automatically allocatable.
	idx.Mark(addr("10.225.51.0"))
	idx.Unmark(addr("10.225.51.0"))
	expectNext("")
	idx.Unmark(addr("10.225.51.6"))
	expectNext("10.225.51.6")
	if !used(idx, addr("10.225.51.5")) || used(idx, addr("10.225.51.6")) || !used(idx, addr("::ffff:10.225.51.5")) {
		t.Fatal("the marks disagree with Mark and Unmark")
	}
}

func TestIndexMarksBeforePoolAndPoolChanges(t *testing.T) {
	idx := NewIndex()
	idx.Mark(addr("10.225.51.1"))
	idx.Mark(addr("10.225.51.2"))
	idx.Mark(addr("10.225.51.20"))
	small := mustPool(t, "a", "10.225.51.0/30")
	if c, ok := next(idx, []Pool{small}); ok {
		t.Fatalf("next = %v; marks made before the pool was seen must count", c)
	}
	// spec.addresses is append-only: the grown pool is rebuilt with every mark.
	grown := mustPool(t, "a", "10.225.51.0/30", "10.225.51.20-10.225.51.21")
	if got := candidates(idx, []Pool{grown}, 10); !reflect.DeepEqual(got, cands("a", "10.225.51.21")) {
		t.Fatalf("free after the pool grew = %v; want only 10.225.51.21", got)
	}
	idx.Replace(addrs("10.225.51.2", "10.225.51.21"))
	got := candidates(idx, []Pool{grown}, 10)
	if want := cands("a", "10.225.51.1", "10.225.51.20"); !reflect.DeepEqual(got, want) {
		t.Fatalf("free after Replace = %v, want %v", got, want)
	}
}

// The allocation loop a controller runs against an API server its cache lags behind.
func TestIndexAllocationLoopWithLaggingCache(t *testing.T) {
	pools := []Pool{mustPool(t, "a", "10.225.51.0/29"), mustPool(t, "b", "10.225.52.0/31")}
	server := map[netip.Addr]bool{} // claims that exist, by name
	for _, a := range addrs("10.225.51.1", "10.225.51.2", "10.225.51.4") {
		server[a] = true
	}
	idx := NewIndex() // the cache saw none of them
	create := func(a netip.Addr) error {
		if server[a] {
			return fmt.Errorf("allocationclaims %q already exists", a)
		}
		server[a] = true
		return nil
	}
	var got []Candidate
	for range 5 {
		attempts := 0
		for {
			attempts++
			if attempts > 20 {
				t.Fatal("allocation loop does not converge")
			}
			c, ok := idx.Take(pools) // marked: kept on success and on AlreadyExists alike
			if !ok {
				t.Fatal("pools exhausted too early")
			}
			if err := create(c.Addr); err == nil {
				got = append(got, c)
				break
			}
		}
	}
	want := append(cands("a", "10.225.51.3", "10.225.51.5", "10.225.51.6"), cands("b", "10.225.52.0", "10.225.52.1")...)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("allocated %v, want %v", got, want)
	}
	if c, ok := next(idx, pools); ok {
		t.Fatalf("next = %v, want exhaustion once every address is claimed", c)
	}
}

// A /16 that is 90% used, in random places: Take must always agree with a plain scan.
func TestIndexHugePoolNinetyPercentUsed(t *testing.T) {
	p := mustPool(t, "big", "10.225.0.0/16")
	idx := NewIndex()
	rng := rand.New(rand.NewPCG(1, 2))
	used := make([]bool, 1<<16)
	used[0], used[1<<16-1] = true, true // never handed out automatically
	base := addr("10.225.0.0").As4()
	at := func(i int) netip.Addr {
		return netip.AddrFrom4([4]byte{base[0], base[1], byte(i >> 8), byte(i)})
	}
	marked := 0
	for marked < 65534*9/10 {
		i := 1 + rng.IntN(65534)
		if !used[i] {
			used[i] = true
			idx.Mark(at(i))
			marked++
		}
	}
	firstFree := func() int {
		for i, u := range used {
			if !u {
				return i
			}
		}
		return -1
	}
	if free := candidates(idx, []Pool{p}, 1<<16); len(free) != 65534-marked {
		t.Fatalf("%d free addresses, want %d", len(free), 65534-marked)
	}
	for step := range 2000 {
		want := firstFree()
		c, ok := idx.Take([]Pool{p})
		if want < 0 {
			if ok {
				t.Fatalf("step %d: Take = %v, want exhaustion", step, c)
			}
			break
		}
		if !ok || c.Addr != at(want) {
			t.Fatalf("step %d: Take = %v, %v; want %v", step, c, ok, at(want))
		}
		used[want] = true
		if step%3 == 0 { // churn: a random reservation goes away
			i := 1 + rng.IntN(65534)
			if used[i] {
				idx.Unmark(at(i))
				used[i] = false
			}
		}
	}
}

func TestIndexIgnoresInvalid(t *testing.T) {
	idx := NewIndex()
	idx.Mark(addr("2001:db8::1")) // in no pool: remembered, harmless
	idx.Mark(netip.Addr{})
	idx.Unmark(netip.Addr{})
	p := mustPool(t, "a", "10.225.51.1")
	if c, ok := next(idx, []Pool{p}); !ok || c.Addr != addr("10.225.51.1") {
		t.Fatalf("next = %v, %v", c, ok)
	}
	// A hand-built pool with invalid ranges keeps its valid ones.
	hand := Pool{Name: "h", Ranges: []iprange.Range{{}, {First: addr("10.225.51.9"), Last: addr("10.225.51.8")},
		{First: addr("10.225.51.1"), Last: addr("2001:db8::1")}, {First: addr("10.225.51.7"), Last: addr("10.225.51.7")}}}
	if got := candidates(idx, []Pool{hand}, 5); !reflect.DeepEqual(got, cands("h", "10.225.51.7")) {
		t.Fatalf("candidates = %v", got)
	}
}

func TestIndexIPv6(t *testing.T) {
	idx := NewIndex()
	p := mustPool(t, "six", "fd00:225:51::/64", "fd00:225:52::5-fd00:225:52::6")
	// The Subnet-Router anycast address fd00:225:51:: is left out.
	want := cands("six", "fd00:225:51::1", "fd00:225:51::2", "fd00:225:51::3")
	if got := candidates(idx, []Pool{p}, 3); !reflect.DeepEqual(got, want) {
		t.Fatalf("candidates = %v, want %v", got, want)
	}
	idx.Mark(addr("fd00:225:51::1"))
	idx.Mark(addr("fd00:225:51::3"))
	idx.Mark(addr("fd00:225:51::")) // pinned by a requestedIP
	want = cands("six", "fd00:225:51::2", "fd00:225:51::4")
	if got := candidates(idx, []Pool{p}, 2); !reflect.DeepEqual(got, want) {
		t.Fatalf("candidates = %v, want %v", got, want)
	}
	idx.Unmark(addr("fd00:225:51::"))
	if c, _ := next(idx, []Pool{p}); c.Addr != addr("fd00:225:51::2") {
		t.Fatalf("after the pinned anycast address is freed, next = %v: it must stay out of automatic picks", c)
	}

	// The last addresses of the space are handled without overflow.
	top := mustPool(t, "top", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe-ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")
	a, _ := idx.Take([]Pool{top})
	b, _ := idx.Take([]Pool{top})
	if _, ok := idx.Take([]Pool{top}); ok || b.Addr != addr("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff") {
		t.Fatalf("top of the space: took %v, %v and more", a, b)
	}
	idx.Unmark(b.Addr)
	idx.Unmark(a.Addr)
	if got := candidates(idx, []Pool{top}, 3); len(got) != 2 {
		t.Fatalf("after unmarking, candidates = %v", got)
	}

	// An IPv4 and an IPv6 pool share one Index without touching each other.
	v4 := mustPool(t, "four", "10.225.51.0/30")
	if c, _ := idx.Take([]Pool{v4}); c.Addr != addr("10.225.51.1") {
		t.Fatalf("IPv4 take = %v", c)
	}
	if c, _ := next(idx, []Pool{p}); c.Addr != addr("fd00:225:51::2") {
		t.Fatalf("IPv6 next after an IPv4 take = %v", c)
	}
}

// A small IPv6 pool under random churn agrees with a plain scan, and the free intervals
// stay disjoint, sorted and not adjacent.
func TestIndexIPv6AgainstModel(t *testing.T) {
	p := mustPool(t, "six", "fd00::/120", "fd00::1:0-fd00::1:3f")
	var all []netip.Addr
	for _, r := range p.Ranges {
		for a := r.First; a.IsValid() && !r.Last.Less(a); a = a.Next() {
			all = append(all, a)
		}
	}
	used := map[netip.Addr]bool{addr("fd00::"): true} // the anycast address is never handed out
	idx := NewIndex()
	rng := rand.New(rand.NewPCG(5, 6))
	for step := range 5000 {
		a := all[rng.IntN(len(all))]
		switch rng.IntN(3) {
		case 0:
			if a != addr("fd00::") {
				idx.Mark(a)
				used[a] = true
			}
		case 1:
			if a != addr("fd00::") {
				idx.Unmark(a)
				delete(used, a)
			}
		default:
			var want netip.Addr
			for _, b := range all {
				if !used[b] {
					want = b
					break
				}
			}
			c, ok := idx.Take([]Pool{p})
			if ok != want.IsValid() || c.Addr != want {
				t.Fatalf("step %d: Take = %v, %v; want %v", step, c, ok, want)
			}
			if ok {
				used[c.Addr] = true
			}
		}
		checkIntervals(t, idx, "six")
	}
}

func checkIntervals(t *testing.T, idx *Index, pool string) {
	t.Helper()
	idx.mu.Lock()
	defer idx.mu.Unlock()
	pi := idx.pools[pool]
	if pi == nil {
		return
	}
	var prev interval
	first := true
	pi.free.Ascend(func(iv interval) bool {
		if iv.last.Less(iv.first) || (!first && !prev.last.Next().Less(iv.first)) {
			t.Fatalf("free intervals out of shape: %v then %v", prev, iv)
		}
		prev, first = iv, false
		return true
	})
}

// The memory of a /64 grows with the reservations, not with the pool.
func TestIndexSlash64MemoryFollowsReservations(t *testing.T) {
	p := mustPool(t, "six", "fd00:225:51::/64")
	idx := NewIndex()
	for range 10000 {
		if _, ok := idx.Take([]Pool{p}); !ok {
			t.Fatal("a /64 ran out")
		}
	}
	if n := idx.pools["six"].intervals(); n != 1 {
		t.Fatalf("10000 consecutive picks left %d free intervals, want 1", n)
	}
	// Free every other one: one interval per hole, plus the tail.
	for i := uint64(1); i <= 10000; i += 2 {
		a, _ := iprange.Add(addr("fd00:225:51::"), i)
		idx.Unmark(a)
	}
	if n := idx.pools["six"].intervals(); n != 5001 {
		t.Fatalf("5000 holes left %d free intervals, want 5001", n)
	}
	if c, _ := next(idx, []Pool{p}); c.Addr != addr("fd00:225:51::1") {
		t.Fatalf("next = %v", c)
	}
}

// BenchmarkTake measures one allocation (Take, then Unmark of the result so the
// occupancy stays put) in a /16 that is empty or 90% used at random places.
func BenchmarkTake(b *testing.B) {
	for _, pct := range []int{0, 90} {
		b.Run(fmt.Sprintf("occupancy=%d%%", pct), func(b *testing.B) {
			p, err := NewPool("big", []string{"10.225.0.0/16"})
			if err != nil {
				b.Fatal(err)
			}
			pools := []Pool{p}
			idx := NewIndex()
			rng := rand.New(rand.NewPCG(3, 4))
			want := 65534 * pct / 100
			marked := map[netip.Addr]bool{}
			for len(marked) < want {
				a := netip.AddrFrom4([4]byte{10, 225, byte(rng.IntN(256)), byte(rng.IntN(256))})
				if a != addr("10.225.0.0") && a != addr("10.225.255.255") {
					idx.Mark(a)
					marked[a] = true
				}
			}
			next(idx, pools) // build the pool's bitmap outside the timer
			b.ReportAllocs()
			for b.Loop() {
				c, ok := idx.Take(pools)
				if !ok {
					b.Fatal("exhausted")
				}
				idx.Unmark(c.Addr)
			}
		})
	}
}

// Workers of one controller share an Index.
func TestIndexConcurrentUse(t *testing.T) {
	p := mustPool(t, "a", "10.225.51.0/24")
	other := mustPool(t, "b", "10.225.52.0/24") // taken from while a is marked
	idx := NewIndex()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 50 {
				a := netip.AddrFrom4([4]byte{10, 225, 51, byte(1 + w*50 + i)})
				idx.Mark(a)
				if c, ok := idx.Take([]Pool{other}); ok {
					idx.Unmark(c.Addr)
				}
			}
		})
	}
	wg.Wait()
	if free := candidates(idx, []Pool{p}, 300); len(free) != 54 {
		t.Fatalf("%d free addresses, want 254-200", len(free))
	}
	if c, ok := next(idx, []Pool{p}); !ok || c.Addr != addr("10.225.51.201") {
		t.Fatalf("next = %v, %v; want 10.225.51.201", c, ok)
	}
}

// Concurrent Takes never hand out the same address and stop when the pool is full.
func TestTakeIsExclusive(t *testing.T) {
	pool, err := NewPool("p", []string{"10.225.51.0/28"}) // 14 automatic addresses
	if err != nil {
		t.Fatal(err)
	}
	x := NewIndex()
	got := make(chan netip.Addr, 64)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				c, ok := x.Take([]Pool{pool})
				if !ok {
					return
				}
				got <- c.Addr
			}
		})
	}
	wg.Wait()
	close(got)
	seen := map[netip.Addr]bool{}
	for a := range got {
		if seen[a] {
			t.Errorf("%s taken twice", a)
		}
		seen[a] = true
	}
	if len(seen) != 14 {
		t.Errorf("took %d addresses, want 14", len(seen))
	}
}
