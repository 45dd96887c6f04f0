// Package community parses the BGP communities of an AddressPool (spec.bgpCommunities,
// docs/bgp.md#communities): standard communities "65000:100" (RFC 1997, two 16-bit
// numbers) and large communities "65000:1:2" (RFC 8092, three 32-bit numbers), written
// in decimal without leading zeros, so that each community has one spelling.
package community

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Community is a standard or a large BGP community.
type Community struct {
	// Large is set for a large community (A:B:C); a standard one is A:B.
	Large bool
	// A, B and C are its numbers: the global administrator and two local data parts of
	// a large community; the AS and the value of a standard one (C is 0).
	A, B, C uint32
}

// Parse reads "A:B" (a standard community, each part 0–65535) or "A:B:C" (a large
// community, each part 0–4294967295).
func Parse(s string) (Community, error) {
	parts := strings.Split(s, ":")
	var limit uint64
	switch len(parts) {
	case 2:
		limit = 1<<16 - 1
	case 3:
		limit = 1<<32 - 1
	default:
		return Community{}, fmt.Errorf("%q is neither a standard community (65000:100) nor a large one (65000:1:2)", s)
	}
	nums := make([]uint32, 3)
	for i, p := range parts {
		n, err := parseNumber(p, limit)
		if err != nil {
			return Community{}, fmt.Errorf("%q: %w", s, err)
		}
		nums[i] = n
	}
	return Community{Large: len(parts) == 3, A: nums[0], B: nums[1], C: nums[2]}, nil
}

var errNotDecimal = errors.New("each part must be a decimal number without leading zeros")

func parseNumber(p string, limit uint64) (uint32, error) {
	if p == "" || (len(p) > 1 && p[0] == '0') || strings.TrimLeft(p, "0123456789") != "" {
		return 0, errNotDecimal
	}
	n, err := strconv.ParseUint(p, 10, 64)
	if err != nil || n > limit {
		return 0, fmt.Errorf("%s is larger than %d", p, limit)
	}
	return uint32(n), nil
}

// String is the canonical text form.
func (c Community) String() string {
	if c.Large {
		return fmt.Sprintf("%d:%d:%d", c.A, c.B, c.C)
	}
	return fmt.Sprintf("%d:%d", c.A, c.B)
}

// Standard is the 32-bit value of a standard community (A in the high half).
func (c Community) Standard() uint32 { return c.A<<16 | c.B&0xffff }

// Compare orders communities: standard ones first, then by their numbers.
func Compare(a, b Community) int {
	if a.Large != b.Large {
		if a.Large {
			return 1
		}
		return -1
	}
	return cmp.Or(cmp.Compare(a.A, b.A), cmp.Compare(a.B, b.B), cmp.Compare(a.C, b.C))
}
