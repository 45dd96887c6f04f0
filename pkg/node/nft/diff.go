package nft

import "github.com/loutres/juneau/pkg/listdiff"

// changed returns the entries of old that are not in new (removed) and of
// new that are not in old (added), as multisets, in time proportional to the
// length of the lists plus the size of the change when both are in the same
// order (the agent sorts them): package listdiff.
func changed[T comparable](old, new []T) (removed, added []T) {
	return listdiff.Changed(old, new)
}
