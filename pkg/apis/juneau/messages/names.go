package messages

import (
	"fmt"
	"slices"
	"strings"
)

// MaxNamed is how many names a list shows before it says "and N more".
const MaxNamed = 5

// Names renders names sorted, without repeats, quoted and comma-separated:
// "a", "b", "c"; a list longer than MaxNamed ends with "and N more".
func Names(names []string) string {
	names = slices.Clone(names)
	slices.Sort(names)
	names = slices.Compact(names)
	shown := names[:min(len(names), MaxNamed)]
	q := make([]string, len(shown))
	for i, n := range shown {
		q[i] = fmt.Sprintf("%q", n)
	}
	out := strings.Join(q, ", ")
	if more := len(names) - len(shown); more > 0 {
		out += fmt.Sprintf(" and %d more", more)
	}
	return out
}

// Kinds renders names after their kind, in the singular for one name: `AddressPool "a"`,
// `AddressPools "a", "b"`.
func Kinds(kind string, names []string) string {
	return Plural(Count(names), kind) + " " + Names(names)
}

// Count is how many distinct names there are.
func Count(names []string) int {
	names = slices.Clone(names)
	slices.Sort(names)
	return len(slices.Compact(names))
}

// Plural is a kind in the singular for n == 1, otherwise with an "s".
func Plural(n int, kind string) string {
	if n == 1 {
		return kind
	}
	return kind + "s"
}

// Verb picks the form of a verb that agrees with n things: one for n == 1, many otherwise.
func Verb(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
