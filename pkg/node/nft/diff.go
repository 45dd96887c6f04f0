package nft

import (
	"bytes"
	"slices"
	"unsafe"
)

// changed returns the entries of old that are not in new (removed) and of
// new that are not in old (added), as multisets, in time proportional to the
// length of the lists plus the size of the change when both are in the same
// order (the agent sorts them): the common prefix and suffix are skipped and
// what lies between is the change. Entries that only moved appear on both
// sides; counting them out and in again changes nothing.
func changed[T comparable](old, new []T) (removed, added []T) {
	w := windowOf(old, new)
	return old[w.start:w.oldEnd], new[w.start:w.newEnd]
}

// window is where two lists differ: old[start:oldEnd] became
// new[start:newEnd], the rest is the same in both.
type window struct{ start, oldEnd, newEnd int }

func windowOf[T comparable](old, new []T) window {
	p := commonPrefix(old, new)
	s := commonSuffix(old[p:], new[p:])
	return window{start: p, oldEnd: len(old) - s, newEnd: len(new) - s}
}

// block is how many entries commonPrefix and commonSuffix compare at once,
// as raw memory: one call comparing kilobytes instead of one per entry.
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

// sameMemory reports whether a and b, of the same length, hold the same
// bytes. For the entries of a DesiredState (addresses, strings, integers; no
// floating point) the same bytes are equal entries. Different bytes need
// not be different entries (padding, an equal string stored elsewhere):
// the callers then compare entry by entry with ==.
func sameMemory[T any](a, b []T) bool {
	size := len(a) * int(unsafe.Sizeof(*new(T)))
	return bytes.Equal(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(a))), size),
		unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(b))), size))
}

// follow turns old into a copy of new by rewriting only the window w of
// the two: a change to one entry among 10,000 copies one entry, not 10,000.
func follow[T any](old, new []T, w window) []T {
	return slices.Replace(old, w.start, w.oldEnd, new[w.start:w.newEnd]...)
}
