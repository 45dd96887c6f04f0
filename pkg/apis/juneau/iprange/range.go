// Package iprange is juneau's one model of address ranges: how an AddressPool entry is
// written and parsed (Parse, ParseAddr), what a range holds (Contains, Overlaps, Size),
// which of its addresses automatic allocation hands out (Auto), and the arithmetic the
// allocator lays its bitmaps out with (Distance, Add). Validation, the allocator
// (pkg/controllers/ipam) and the AddressPool status all use it, so they cannot disagree
// on what a pool contains (docs/reference.md#addresspool).
//
// Both families parse. Addresses are net/netip values and counts are uint64 that
// saturate (an IPv6 range can exceed 2^64 addresses); positions inside a range are
// computed over 128-bit values (Distance, Add, U128).
//
// The package imports no client-go and nothing else of juneau but the API types.
package iprange

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"net/netip"
)

// Family is an address family.
type Family int

// Families.
const (
	IPv4 Family = 4
	IPv6 Family = 6
)

// String is the family as the API spells it (spec.ipFamily): "IPv4" or "IPv6".
func (f Family) String() string {
	switch f {
	case IPv4:
		return "IPv4"
	case IPv6:
		return "IPv6"
	}
	return fmt.Sprintf("Family(%d)", int(f))
}

// FamilyOf is the family of an address; an IPv4-mapped IPv6 address is IPv6.
func FamilyOf(a netip.Addr) Family {
	if a.Is4() {
		return IPv4
	}
	return IPv6
}

// Range is an inclusive interval First..Last of addresses of one family. Prefix is
// valid only when the range was written as a CIDR.
type Range struct {
	First, Last netip.Addr
	Prefix      netip.Prefix
}

// Family of the range's addresses.
func (r Range) Family() Family { return FamilyOf(r.First) }

// IsCIDR reports whether the range was written as a CIDR.
func (r Range) IsCIDR() bool { return r.Prefix.IsValid() }

// Valid reports whether the range holds at least one address of one family.
func (r Range) Valid() bool {
	return r.First.IsValid() && r.Last.IsValid() && r.First.Is4() == r.Last.Is4() && !r.Last.Less(r.First)
}

// Contains reports whether a lies in the range. An address of another family (an
// IPv4-mapped IPv6 address for an IPv4 range, too) never does.
func (r Range) Contains(a netip.Addr) bool {
	return r.Valid() && a.Is4() == r.First.Is4() && r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0
}

// Overlaps reports whether the two ranges share at least one address.
func (r Range) Overlaps(o Range) bool {
	return r.Valid() && o.Valid() && r.First.Is4() == o.First.Is4() &&
		r.First.Compare(o.Last) <= 0 && o.First.Compare(r.Last) <= 0
}

// Size is the number of addresses in the range, saturating at math.MaxUint64 (2^32 for
// 0.0.0.0/0 fits).
func (r Range) Size() uint64 {
	if !r.Valid() {
		return 0
	}
	d, ok := Distance(r.First, r.Last)
	if !ok || d == math.MaxUint64 {
		return math.MaxUint64
	}
	return d + 1
}

// HostPrefix is the prefix of the address alone: a.b.c.d/32 for IPv4, /128 for IPv6.
// Routes and announcements of an ElasticIP are always its host prefix.
func HostPrefix(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen())
}

// Auto is the part of the range automatic allocation hands out, and false when that part
// is empty. For an IPv4 CIDR shorter than /31 the network and broadcast addresses are
// left out; for an IPv6 CIDR shorter than /127 the Subnet-Router anycast address (the
// first one, RFC 4291 section 2.6.1) is left out; /31, /32, /127 and /128 CIDRs, ranges
// and single addresses are used whole. A requested address may still pin any address of
// the full range.
func (r Range) Auto() (Range, bool) {
	if !r.Valid() {
		return Range{}, false
	}
	switch {
	case !r.IsCIDR():
		return r, true
	case r.Family() == IPv4 && r.Prefix.Bits() < 31:
		return Range{First: r.First.Next(), Last: r.Last.Prev()}, true
	case r.Family() == IPv6 && r.Prefix.Bits() < 127:
		return Range{First: r.First.Next(), Last: r.Last}, true
	}
	return r, true
}

// String renders the range the way it is written in spec.addresses.
func (r Range) String() string {
	switch {
	case r.IsCIDR():
		return r.Prefix.String()
	case r.First == r.Last:
		return r.First.String()
	default:
		return r.First.String() + "-" + r.Last.String()
	}
}

// Contain reports whether any of the ranges contains a.
func Contain(rs []Range, a netip.Addr) bool {
	for _, r := range rs {
		if r.Contains(a) {
			return true
		}
	}
	return false
}

// Distance is b-a for addresses a <= b of one family; false when they are of different
// families, b is below a, or the difference does not fit in a uint64.
func Distance(a, b netip.Addr) (uint64, bool) {
	if !a.IsValid() || !b.IsValid() || a.Is4() != b.Is4() || b.Less(a) {
		return 0, false
	}
	ah, al := split(a)
	bh, bl := split(b)
	lo, borrow := bits.Sub64(bl, al, 0)
	hi, _ := bits.Sub64(bh, ah, borrow)
	return lo, hi == 0
}

// Add is a+n, false when it leaves the address space of a's family.
func Add(a netip.Addr, n uint64) (netip.Addr, bool) {
	if !a.IsValid() {
		return netip.Addr{}, false
	}
	if a.Is4() {
		b := a.As4()
		v := uint64(binary.BigEndian.Uint32(b[:])) + n
		if v > math.MaxUint32 || v < n {
			return netip.Addr{}, false
		}
		binary.BigEndian.PutUint32(b[:], uint32(v))
		return netip.AddrFrom4(b), true
	}
	h, l := split(a)
	lo, carry := bits.Add64(l, n, 0)
	hi, over := bits.Add64(h, 0, carry)
	if over != 0 {
		return netip.Addr{}, false
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], hi)
	binary.BigEndian.PutUint64(b[8:], lo)
	return netip.AddrFrom16(b).WithZone(a.Zone()), true
}

// split is an address as a 128-bit number (an IPv4 address in its mapped form, which
// keeps differences between IPv4 addresses exact).
func split(a netip.Addr) (hi, lo uint64) {
	b := a.As16()
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
}
