package listdiff

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// entry is shaped like the node agent's entries: addresses, a string, an integer.
type entry struct {
	A, B  netip.Addr
	Name  string
	Limit int32
}

// naive is Of entry by entry, the definition.
func naive[T comparable](old, new []T) Window {
	p := 0
	for p < len(old) && p < len(new) && old[p] == new[p] {
		p++
	}
	o, n := len(old), len(new)
	for o > p && n > p && old[o-1] == new[n-1] {
		o--
		n--
	}
	return Window{Start: p, OldEnd: o, NewEnd: n}
}

// Of compares blocks of entries as memory; it must find exactly the window of the
// entry-by-entry definition, for changes anywhere (block boundaries included),
// insertions, removals, and equal strings stored at other addresses; Follow must then
// turn the old list into the new one.
func TestOf(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := make([]entry, 1000)
	for i := range base {
		base[i] = entry{A: netip.AddrFrom4([4]byte{10, 225, byte(i >> 8), byte(i)}), B: netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)})}
	}
	for round := range 2000 {
		old := slices.Clone(base[:rng.IntN(len(base)+1)])
		new := slices.Clone(old)
		for range rng.IntN(3) {
			switch k := rng.IntN(4); {
			case len(new) == 0 || k == 0: // insert
				i := rng.IntN(len(new) + 1)
				new = slices.Insert(new, i, entry{A: netip.MustParseAddr("10.226.0.1"), B: netip.MustParseAddr("10.244.9.9")})
			case k == 1: // remove
				i := rng.IntN(len(new))
				new = slices.Delete(new, i, i+1)
			case k == 2: // change at a block boundary
				i := min(len(new)-1, block*rng.IntN(len(new)/block+1))
				new[i].Limit++
			default:
				new[rng.IntN(len(new))].B = netip.AddrFrom4([4]byte{10, 245, 0, byte(round)})
			}
		}
		got, want := Of(old, new), naive(old, new)
		if got != want {
			t.Fatalf("round %d (%d -> %d entries): window %+v, want %+v", round, len(old), len(new), got, want)
		}
		if got.Empty() != slices.Equal(old, new) {
			t.Fatalf("round %d: Empty() = %v for lists equal: %v", round, got.Empty(), slices.Equal(old, new))
		}
		if res := Follow(slices.Clone(old), new, got); !slices.Equal(res, new) {
			t.Fatalf("round %d: Follow did not give the new list", round)
		}
	}

	// The same names built anew: other bytes, equal entries.
	named := func(prefix string) []entry {
		out := make([]entry, 300)
		for i := range out {
			out[i] = entry{Name: prefix + strconv.Itoa(i), B: netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)})}
		}
		return out
	}
	old, new := named("veth"), named("veth")
	new[200].B = netip.MustParseAddr("10.244.200.200")
	if got, want := Of(old, new), (Window{Start: 200, OldEnd: 201, NewEnd: 201}); got != want {
		t.Errorf("equal strings at other addresses: window %+v, want %+v", got, want)
	}
}

// BenchmarkOf10k finds one changed entry among 10,000, the Go side of every
// incremental sync.
func BenchmarkOf10k(b *testing.B) {
	old := make([]entry, 10000)
	for i := range old {
		old[i] = entry{A: netip.AddrFrom4([4]byte{10, 225, byte(i >> 8), byte(i)}), B: netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)})}
	}
	new := slices.Clone(old)
	new[5000].B = netip.MustParseAddr("10.245.0.1")
	for b.Loop() {
		if w := Of(old, new); w.Start != 5000 {
			b.Fatal(w)
		}
	}
}

// TestSortedAgreesWithSets: over random sorted lists of named entries (a name at most
// once per list, at any address), Sorted finds exactly what set differences find: an
// entry whose address changed is removed and added.
func TestSortedAgreesWithSets(t *testing.T) {
	type named struct {
		name string
		at   int
	}
	byAtThenName := func(a, b named) int {
		if a.at != b.at {
			return a.at - b.at
		}
		return strings.Compare(a.name, b.name)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	random := func() []named {
		out := []named{}
		seen := map[string]bool{}
		for range rng.IntN(12) {
			x := named{name: "n" + strconv.Itoa(rng.IntN(10)), at: rng.IntN(4)}
			if !seen[x.name] {
				seen[x.name] = true
				out = append(out, x)
			}
		}
		slices.SortFunc(out, byAtThenName)
		return out
	}
	for range 2000 {
		old, new := random(), random()
		var wantRemoved, wantAdded []named
		for _, x := range old {
			if !slices.Contains(new, x) {
				wantRemoved = append(wantRemoved, x)
			}
		}
		for _, x := range new {
			if !slices.Contains(old, x) {
				wantAdded = append(wantAdded, x)
			}
		}
		removed, added := Sorted(old, new, byAtThenName)
		if !slices.Equal(removed, wantRemoved) || !slices.Equal(added, wantAdded) {
			t.Fatalf("Sorted(%v, %v) = %v, %v; want %v, %v", old, new, removed, added, wantRemoved, wantAdded)
		}
	}
}
