package listdiff

import "sync/atomic"

// Change tells the readers of a list that its owner edits in place where version To
// of the list differs from version From: a reader holding a copy of version From
// takes the window as it is, where Of would compare the two lists whole (5.6 MB at
// 100,000 NAT mappings). The zero Change tells nothing: the reader compares.
type Change struct {
	From, To uint64
	Window
}

// versions numbers the versions of every tracked list: no two versions of any lists
// share a number, so a reader can never take one list's change for another's.
var versions atomic.Uint64

// Since is the window where new differs from old, a reader's copy of the version seen
// of the list c is a change of: c's window when c starts at seen, else Of(old, new).
func Since[T comparable](c Change, seen uint64, old, new []T) Window {
	if seen != 0 && c.From == seen && c.OldEnd <= len(old) && c.NewEnd <= len(new) && len(old)-c.OldEnd == len(new)-c.NewEnd {
		return c.Window
	}
	return Of(old, new)
}

// Tracker follows the edits of a list by its owner between two versions: where an
// edit happened and how many entries at the end none touched, which bounds the change
// without reading the list. The zero Tracker has seen no version: its first Mark
// tells nothing.
type Tracker struct {
	version uint64
	// n0 is the length of the last version; start the lowest index edited since; tail
	// how many entries at the end no edit since touched (they may have moved).
	n0, start, tail int
	// n is the list's length now.
	n int
}

// Reset starts a new history: the list, of n entries, was replaced whole.
func (t *Tracker) Reset(n int) {
	t.version = 0
	t.n0, t.n, t.start, t.tail = n, n, n, n
}

// Insert notes an entry inserted at i.
func (t *Tracker) Insert(i int) {
	t.start = min(t.start, i)
	t.tail = min(t.tail, t.n-i)
	t.n++
}

// Remove notes the entry at i removed.
func (t *Tracker) Remove(i int) {
	t.start = min(t.start, i)
	t.tail = min(t.tail, t.n-i-1)
	t.n--
}

// Replace notes the entries [i, j) replaced by n entries (any of them may be the
// same as before).
func (t *Tracker) Replace(i, j, n int) {
	t.start = min(t.start, i)
	t.tail = min(t.tail, t.n-j)
	t.n += n - (j - i)
}

// Mark ends a version: the list as it is now is the next one. It returns where it
// differs from the last (the zero Change after a Reset or for a first Mark).
func (t *Tracker) Mark() Change {
	next := versions.Add(1)
	var c Change
	if t.version != 0 {
		s := min(t.start, t.n0, t.n)
		tail := min(t.tail, t.n0-s, t.n-s)
		c = Change{From: t.version, To: next, Window: Window{Start: s, OldEnd: t.n0 - tail, NewEnd: t.n - tail}}
	} else {
		c = Change{To: next}
	}
	t.version, t.n0, t.start, t.tail = next, t.n, t.n, t.n
	return c
}
