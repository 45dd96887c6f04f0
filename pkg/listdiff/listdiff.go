// Package listdiff finds where two versions of a sorted list differ, in time
// proportional to their length at memory speed plus the size of the change: the
// common beginning and end are skipped, compared in blocks as raw memory, and what
// lies between is the change. The node agent's lists (NAT mappings, answered
// advertisements) change by a few entries between two syncs, so a sync reads or
// copies only those (docs/performance.md#scale).
package listdiff

import (
	"bytes"
	"slices"
	"unsafe"
)

// Window is where two lists differ: Old[Start:OldEnd] became New[Start:NewEnd], the
// rest is the same in both.
type Window struct{ Start, OldEnd, NewEnd int }

// Empty reports whether the two lists are equal.
func (w Window) Empty() bool { return w.OldEnd == w.Start && w.NewEnd == w.Start }

// Of is the window where old and new differ.
func Of[T comparable](old, new []T) Window {
	p := commonPrefix(old, new)
	s := commonSuffix(old[p:], new[p:])
	return Window{Start: p, OldEnd: len(old) - s, NewEnd: len(new) - s}
}

// Changed returns the entries of old that are not in new (removed) and of new that
// are not in old (added), as multisets when both are in the same order: entries that
// only moved appear on both sides.
func Changed[T comparable](old, new []T) (removed, added []T) {
	w := Of(old, new)
	return old[w.Start:w.OldEnd], new[w.Start:w.NewEnd]
}

// Sorted compares two lists sorted by cmp in one walk: the elements only old has
// (removed) and those only new has (added). Elements cmp ties are the same element.
func Sorted[T any](old, new []T, cmp func(a, b T) int) (removed, added []T) {
	i, j := 0, 0
	for i < len(old) || j < len(new) {
		c := 0
		switch {
		case j == len(new):
			c = -1
		case i == len(old):
			c = 1
		default:
			c = cmp(old[i], new[j])
		}
		switch {
		case c < 0:
			removed = append(removed, old[i])
			i++
		case c > 0:
			added = append(added, new[j])
			j++
		default:
			i, j = i+1, j+1
		}
	}
	return removed, added
}

// Follow turns old into a copy of new by rewriting only the window w of the two: a
// change to one entry among 10,000 copies one entry, not 10,000.
func Follow[T any](old, new []T, w Window) []T {
	return slices.Replace(old, w.Start, w.OldEnd, new[w.Start:w.NewEnd]...)
}

// block is how many entries commonPrefix and commonSuffix compare at once, as raw
// memory: one call comparing kilobytes instead of one per entry.
const block = 64

// commonPrefix is the length of the longest common beginning of a and b.
func commonPrefix[T comparable](a, b []T) int {
	n := min(len(a), len(b))
	p := 0
	for p+block <= n && sameMemory(a[p:p+block], b[p:p+block]) {
		p += block
	}
	for p < n && a[p] == b[p] {
		p++
	}
	return p
}

// commonSuffix is the length of the longest common end of a and b.
func commonSuffix[T comparable](a, b []T) int {
	n := min(len(a), len(b))
	s := 0
	for s+block <= n && sameMemory(a[len(a)-s-block:len(a)-s], b[len(b)-s-block:len(b)-s]) {
		s += block
	}
	for s < n && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	return s
}

// sameMemory reports whether a and b, of the same length, hold the same bytes. For
// entries of addresses, pointers, strings and integers (no floating point) the same
// bytes are equal entries. Different bytes need not be different entries (padding, an
// equal string stored elsewhere): the callers then compare entry by entry with ==.
func sameMemory[T any](a, b []T) bool {
	size := len(a) * int(unsafe.Sizeof(*new(T)))
	return bytes.Equal(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(a))), size),
		unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(b))), size))
}
