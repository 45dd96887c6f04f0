package ipam

import (
	"math/rand/v2"
	"testing"
)

// naiveNextClear is the model the bitTree must agree with.
func naiveNextClear(set []bool, from uint64) (uint64, bool) {
	for i := from; i < uint64(len(set)); i++ {
		if !set[i] {
			return i, true
		}
	}
	return 0, false
}

func TestBitTreeAgainstModel(t *testing.T) {
	// Sizes around word, summary and chunk boundaries.
	for _, n := range []uint64{0, 1, 2, 63, 64, 65, 4095, 4096, 4097, 16384, 16385, 262145} {
		rng := rand.New(rand.NewPCG(n, 7))
		tree := newBitTree(n)
		model := make([]bool, n)
		check := func(step int) {
			t.Helper()
			probes := []uint64{0, n / 2, n - min(n, 1), n, n + 1, rng.Uint64N(n + 1)}
			for _, from := range probes {
				got, gotOK := tree.nextClear(from)
				want, wantOK := naiveNextClear(model, from)
				if got != want || gotOK != wantOK {
					t.Fatalf("n=%d step %d: nextClear(%d) = %d, %v; want %d, %v", n, step, from, got, gotOK, want, wantOK)
				}
			}
		}
		check(-1)
		if n == 0 {
			continue
		}
		// Fill densely (sequentially, then randomly), then free randomly: both directions
		// of every summary level get exercised.
		for i := range n * 3 / 4 {
			tree.set(i)
			model[i] = true
		}
		check(0)
		ops := int(min(n*2, 5000))
		for step := range ops {
			i := rng.Uint64N(n)
			if step < ops/2 {
				tree.set(i)
				model[i] = true
			} else {
				tree.clear(i)
				model[i] = false
			}
			if tree.isSet(i) != model[i] {
				t.Fatalf("n=%d: isSet(%d) = %v, want %v", n, i, tree.isSet(i), model[i])
			}
			if step%37 == 0 {
				check(step)
			}
		}
		check(ops)
		// Full, then one free bit anywhere must be found from 0.
		for i := range n {
			tree.set(i)
			model[i] = true
		}
		check(ops + 1)
		last := n - 1
		tree.clear(last)
		model[last] = false
		check(ops + 2)
	}
}

func TestBitTreeOutOfRangeIgnored(t *testing.T) {
	tree := newBitTree(10)
	tree.set(10)
	tree.set(1000)
	tree.clear(11)
	if got, ok := tree.nextClear(0); !ok || got != 0 {
		t.Fatalf("nextClear(0) = %d, %v; want 0, true", got, ok)
	}
	for i := range uint64(10) {
		tree.set(i)
	}
	if got, ok := tree.nextClear(0); ok {
		t.Fatalf("full tree: nextClear(0) = %d, true; want none (padding must never be found)", got)
	}
}

func TestBitTreeSparseMemory(t *testing.T) {
	// A /8 worth of bits touches only the chunks that hold set bits.
	tree := newBitTree(1 << 24)
	tree.set(5)
	tree.set(1<<24 - 1)
	allocated := 0
	for _, c := range tree.leaves {
		if c != nil {
			allocated++
		}
	}
	if allocated != 2 {
		t.Fatalf("allocated leaf chunks = %d, want 2", allocated)
	}
}
