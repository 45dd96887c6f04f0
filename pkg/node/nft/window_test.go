package nft

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"testing"
)

// naiveWindow is windowOf entry by entry, the definition.
func naiveWindow[T comparable](old, new []T) window {
	p := 0
	for p < len(old) && p < len(new) && old[p] == new[p] {
		p++
	}
	o, n := len(old), len(new)
	for o > p && n > p && old[o-1] == new[n-1] {
		o--
		n--
	}
	return window{start: p, oldEnd: o, newEnd: n}
}

// windowOf compares blocks of entries as memory; it must find exactly the window
// of the entry-by-entry definition, for changes anywhere (block boundaries
// included), insertions, removals, and equal strings stored at other addresses;
// follow must then turn the old list into the new one.
func TestWindowOf(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := make([]Mapping, 1000)
	for i := range base {
		base[i] = Mapping{ElasticIP: netip.AddrFrom4([4]byte{10, 225, byte(i >> 8), byte(i)}), PodIP: netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)})}
	}
	for round := range 2000 {
		old := slices.Clone(base[:rng.IntN(len(base)+1)])
		new := slices.Clone(old)
		for range rng.IntN(3) {
			switch k := rng.IntN(4); {
			case len(new) == 0 || k == 0: // insert
				i := rng.IntN(len(new) + 1)
				new = slices.Insert(new, i, Mapping{ElasticIP: netip.MustParseAddr("10.226.0.1"), PodIP: netip.MustParseAddr("10.244.9.9")})
			case k == 1: // remove
				i := rng.IntN(len(new))
				new = slices.Delete(new, i, i+1)
			case k == 2: // change at a block boundary
				i := min(len(new)-1, block*rng.IntN(len(new)/block+1))
				new[i].BandwidthMbps++
			default:
				new[rng.IntN(len(new))].PodIP = netip.AddrFrom4([4]byte{10, 245, 0, byte(round)})
			}
		}
		got, want := windowOf(old, new), naiveWindow(old, new)
		if got != want {
			t.Fatalf("round %d (%d -> %d entries): window %+v, want %+v", round, len(old), len(new), got, want)
		}
		if res := follow(slices.Clone(old), new, got); !slices.Equal(res, new) {
			t.Fatalf("round %d: follow did not give the new list", round)
		}
	}

	// The same interface names built anew: other bytes, equal entries.
	direct := func(prefix string) []DirectNIC {
		out := make([]DirectNIC, 300)
		for i := range out {
			out[i] = DirectNIC{HostInterface: prefix + strconv.Itoa(i), Address: netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)})}
		}
		return out
	}
	old, new := direct("veth"), direct("veth")
	new[200].Address = netip.MustParseAddr("10.244.200.200")
	if got, want := windowOf(old, new), (window{start: 200, oldEnd: 201, newEnd: 201}); got != want {
		t.Errorf("equal strings at other addresses: window %+v, want %+v", got, want)
	}
}

// BenchmarkWindowOf10k finds one changed mapping among 10,000, the Go side of
// every incremental sync.
func BenchmarkWindowOf10k(b *testing.B) {
	old := benchState(10000).Mappings
	new := slices.Clone(old)
	new[5000].PodIP = netip.MustParseAddr("10.245.0.1")
	for b.Loop() {
		if w := windowOf(old, new); w.start != 5000 {
			b.Fatal(w)
		}
	}
}
