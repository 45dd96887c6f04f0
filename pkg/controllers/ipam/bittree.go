package ipam

import "math/bits"

const (
	// A leaf chunk is allocated on the first set bit inside it, so a huge pool that is
	// mostly free costs little memory: one bit per address of the summary levels only.
	chunkShift = 8 // words per chunk = 256 (16384 bits, 2 KiB)
	chunkWords = 1 << chunkShift
	chunkMask  = chunkWords - 1
	fullWord   = ^uint64(0)
)

// bitTree is a bitmap over positions [0, n) that finds the first clear bit at or after a
// position in O(log64 n): above the leaf words sit summary levels where bit i of level k+1
// is set exactly when word i of level k is full. Bits past n are set (padding) so they are
// never found and never keep a word from counting as full.
type bitTree struct {
	n      uint64
	leaves []*[chunkWords]uint64 // nil chunk: all clear
	upper  [][]uint64            // upper[0] summarises leaf words; the last level is one word
}

func newBitTree(n uint64) *bitTree {
	leafWords := (n + 63) / 64
	t := &bitTree{n: n, leaves: make([]*[chunkWords]uint64, (leafWords+chunkWords-1)/chunkWords)}
	for words := leafWords; words > 1; {
		next := (words + 63) / 64
		level := make([]uint64, next)
		if rem := words % 64; rem != 0 {
			level[next-1] = fullWord << rem
		}
		t.upper = append(t.upper, level)
		words = next
	}
	if rem := n % 64; rem != 0 {
		w := leafWords - 1
		t.chunk(w)[w&chunkMask] = fullWord << rem
	}
	return t
}

// chunk returns the chunk holding leaf word w, allocating it.
func (t *bitTree) chunk(w uint64) *[chunkWords]uint64 {
	c := t.leaves[w>>chunkShift]
	if c == nil {
		c = new([chunkWords]uint64)
		t.leaves[w>>chunkShift] = c
	}
	return c
}

func (t *bitTree) leaf(w uint64) uint64 {
	if c := t.leaves[w>>chunkShift]; c != nil {
		return c[w&chunkMask]
	}
	return 0
}

func (t *bitTree) isSet(i uint64) bool {
	return i < t.n && t.leaf(i/64)&(1<<(i%64)) != 0
}

// set sets bit i and marks every summary word that became full.
func (t *bitTree) set(i uint64) {
	if i >= t.n {
		return
	}
	w := i / 64
	c := t.chunk(w)
	c[w&chunkMask] |= 1 << (i % 64)
	if c[w&chunkMask] != fullWord {
		return
	}
	for _, level := range t.upper {
		level[w/64] |= 1 << (w % 64)
		if level[w/64] != fullWord {
			return
		}
		w /= 64
	}
}

// clear clears bit i and unmarks every summary word that stopped being full.
func (t *bitTree) clear(i uint64) {
	if i >= t.n {
		return
	}
	w := i / 64
	c := t.leaves[w>>chunkShift]
	if c == nil {
		return
	}
	wasFull := c[w&chunkMask] == fullWord
	c[w&chunkMask] &^= 1 << (i % 64)
	for _, level := range t.upper {
		if !wasFull {
			return
		}
		wasFull = level[w/64] == fullWord
		level[w/64] &^= 1 << (w % 64)
		w /= 64
	}
}

// word returns word w of level (0: leaves) and whether it exists.
func (t *bitTree) word(level int, w uint64) (uint64, bool) {
	if level == 0 {
		if w >= (t.n+63)/64 {
			return 0, false
		}
		return t.leaf(w), true
	}
	l := t.upper[level-1]
	if w >= uint64(len(l)) {
		return 0, false
	}
	return l[w], true
}

// nextClear returns the first clear position at or after from.
func (t *bitTree) nextClear(from uint64) (uint64, bool) {
	if from >= t.n {
		return 0, false
	}
	// Climb until a word holds a clear bit at or after pos.
	level, pos := 0, from
	for {
		w, ok := t.word(level, pos/64)
		if !ok {
			return 0, false
		}
		if free := ^w & (fullWord << (pos % 64)); free != 0 {
			pos = pos/64*64 + uint64(bits.TrailingZeros64(free))
			break
		}
		if level == len(t.upper) {
			return 0, false
		}
		level, pos = level+1, pos/64+1
	}
	// Descend: a clear summary bit promises a clear bit in the word below.
	for ; level > 0; level-- {
		w, _ := t.word(level-1, pos)
		pos = pos*64 + uint64(bits.TrailingZeros64(^w))
	}
	if pos >= t.n {
		return 0, false
	}
	return pos, true
}
