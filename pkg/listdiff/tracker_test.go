package listdiff

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// A Tracker's change, over random runs of inserts, removals and replaced runs between
// marks, holds the whole difference: the lists agree before its window and after it;
// Since takes it for the reader of the version it starts at and compares otherwise; a
// single insert's or removal's window is the exact one Of finds.
func TestTracker(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var list []int
	var tr Tracker
	tr.Reset(0)
	if c := tr.Mark(); c.From != 0 || c.To == 0 {
		t.Fatalf("a first mark tells nothing but its version: %+v", c)
	}
	prev := slices.Clone(list)
	seen := uint64(0)
	for round := range 3000 {
		edits := rng.IntN(4) // none included
		replaced := false    // a replaced run's window is the run, whatever it holds
		for range edits {
			switch k := rng.IntN(3); {
			case len(list) > 0 && k == 0:
				i := rng.IntN(len(list))
				tr.Remove(i)
				list = slices.Delete(list, i, i+1)
			case k == 1: // a run replaced, by as many entries or not
				i := rng.IntN(len(list) + 1)
				j := i + rng.IntN(len(list)-i+1)
				by := make([]int, rng.IntN(3))
				for x := range by {
					by[x] = rng.IntN(50)
				}
				tr.Replace(i, j, len(by))
				replaced = true
				list = slices.Replace(list, i, j, by...)
			default:
				i := rng.IntN(len(list) + 1)
				tr.Insert(i)
				list = slices.Insert(list, i, rng.IntN(50))
			}
		}
		c := tr.Mark()
		w := c.Window
		if c.From == 0 || c.To <= c.From {
			t.Fatalf("round %d: change %+v does not follow a version", round, c)
		}
		if w.Start > w.OldEnd || w.Start > w.NewEnd || w.OldEnd > len(prev) || w.NewEnd > len(list) || len(prev)-w.OldEnd != len(list)-w.NewEnd {
			t.Fatalf("round %d: window %+v out of the lists (%d, %d)", round, w, len(prev), len(list))
		}
		if !slices.Equal(prev[:w.Start], list[:w.Start]) || !slices.Equal(prev[w.OldEnd:], list[w.NewEnd:]) {
			t.Fatalf("round %d: the lists differ outside window %+v:\n%v\n%v", round, w, prev, list)
		}
		if edits == 0 && !w.Empty() {
			t.Fatalf("round %d: no edit, window %+v", round, w)
		}
		if edits == 1 && !replaced {
			exact := Of(prev, list)
			if exact.Empty() != w.Empty() || (!exact.Empty() && w.OldEnd-w.Start > 1+exact.OldEnd-exact.Start) {
				t.Fatalf("round %d: one edit's window %+v, Of finds %+v", round, w, exact)
			}
		}
		if got := Since(c, seen, prev, list); got != w {
			t.Fatalf("round %d: Since gave %+v to the reader of the version before, want %+v", round, got, w)
		}
		if got := Since(c, seen+12345, prev, list); got != Of(prev, list) {
			t.Fatalf("round %d: Since gave %+v to a reader of another version, want Of's", round, got)
		}
		seen = c.To
		prev = slices.Clone(list)
		if rng.IntN(200) == 0 {
			tr.Reset(len(list))
			if c := tr.Mark(); c.From != 0 {
				t.Fatalf("round %d: the mark after a reset tells a change: %+v", round, c)
			} else {
				seen = c.To
			}
		}
	}
}
