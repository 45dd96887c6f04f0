package validation

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// ParseError says why a textual address, CIDR or range was refused. Reason is written
// to follow the value, so validation can print it after the field path and value.
type ParseError struct {
	// What names the expected form, e.g. "IPv4 address" or "address pool entry".
	What string
	// Value is the refused text.
	Value string
	// Reason says what is wrong and what is expected.
	Reason string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("invalid %s %q: %s", e.What, e.Value, e.Reason)
}

// AddressRange is one parsed AddressPool entry: the inclusive interval First..Last of
// IPv4 addresses. Prefix is valid only when the entry was written as a CIDR.
type AddressRange struct {
	First, Last netip.Addr
	Prefix      netip.Prefix
}

// ParseIPv4 parses an IPv4 address in canonical dotted-decimal form ("10.225.51.5").
// Leading zeros, IPv6 and IPv4-mapped IPv6 forms are refused, so that one address has
// exactly one spelling: AllocationClaims are named after the address.
func ParseIPv4(s string) (netip.Addr, error) {
	const what = "IPv4 address"
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return netip.Addr{}, &ParseError{What: what, Value: s,
			Reason: "must be an IPv4 address in dotted-decimal form such as 10.225.51.5 (" + netipDetail(err) + ")"}
	case a.Is4In6():
		return netip.Addr{}, &ParseError{What: what, Value: s,
			Reason: fmt.Sprintf("must be written as a plain IPv4 address: use %q", a.Unmap().String())}
	case !a.Is4():
		return netip.Addr{}, &ParseError{What: what, Value: s,
			Reason: "must be an IPv4 address: IPv6 is not supported"}
	case a.String() != s:
		return netip.Addr{}, &ParseError{What: what, Value: s,
			Reason: fmt.Sprintf("must be written in canonical form %q", a.String())}
	}
	return a, nil
}

// netipDetail strips the `ParseAddr("…"): ` prefix netip puts before its reason, since
// callers print the value themselves.
func netipDetail(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "): "); i >= 0 {
		return msg[i+3:]
	}
	return msg
}

// ParsePoolEntry parses one entry of spec.addresses: a canonical IPv4 CIDR whose host
// bits are zero ("10.225.51.0/24"), an inclusive range "first-last" with first <= last
// ("10.225.51.5-10.225.51.20"), or a single address ("10.225.51.7").
func ParsePoolEntry(s string) (AddressRange, error) {
	const what = "address pool entry"
	if strings.Contains(s, "/") {
		return parseCIDREntry(s)
	}
	if first, last, ok := strings.Cut(s, "-"); ok {
		a, err := ParseIPv4(first)
		if err != nil {
			return AddressRange{}, &ParseError{What: what, Value: s,
				Reason: fmt.Sprintf("first address of the range %s", reasonOf(err))}
		}
		b, err := ParseIPv4(last)
		if err != nil {
			return AddressRange{}, &ParseError{What: what, Value: s,
				Reason: fmt.Sprintf("last address of the range %s", reasonOf(err))}
		}
		if b.Less(a) {
			return AddressRange{}, &ParseError{What: what, Value: s,
				Reason: fmt.Sprintf("the first address %s is greater than the last address %s; write the range as %s-%s", a, b, b, a)}
		}
		return AddressRange{First: a, Last: b}, nil
	}
	a, err := ParseIPv4(s)
	if err != nil {
		if _, isAddr := netip.ParseAddr(s); isAddr == nil {
			// An address of the wrong family: its own reason is the whole story.
			return AddressRange{}, &ParseError{What: what, Value: s, Reason: reasonOf(err)}
		}
		return AddressRange{}, &ParseError{What: what, Value: s,
			Reason: "must be an IPv4 CIDR (10.225.51.0/24), an inclusive range (10.225.51.5-10.225.51.20) or one IPv4 address: " + reasonOf(err)}
	}
	return AddressRange{First: a, Last: a}, nil
}

func parseCIDREntry(s string) (AddressRange, error) {
	const what = "address pool entry"
	addr, bits, _ := strings.Cut(s, "/")
	a, err := ParseIPv4(addr)
	if err != nil {
		return AddressRange{}, &ParseError{What: what, Value: s, Reason: "the address of the CIDR " + reasonOf(err)}
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return AddressRange{}, &ParseError{What: what, Value: s,
			Reason: fmt.Sprintf("prefix length %q must be a number from 0 to 32 without leading zeros", bits)}
	}
	if m := p.Masked(); m != p {
		return AddressRange{}, &ParseError{What: what, Value: s,
			Reason: fmt.Sprintf("host bits must be zero: did you mean %q (the network containing %s)?", m.String(), a)}
	}
	return AddressRange{First: p.Addr(), Last: lastOf(p), Prefix: p}, nil
}

// reasonOf returns the reason of a *ParseError, or the whole message of another error.
func reasonOf(err error) string {
	var pe *ParseError
	if errors.As(err, &pe) {
		return pe.Reason
	}
	return err.Error()
}

func lastOf(p netip.Prefix) netip.Addr {
	// For /0 the shift yields 0 (Go defines over-wide shifts), and 0-1 is all ones.
	host := uint32(1)<<(32-p.Bits()) - 1
	return fromUint32(toUint32(p.Addr()) | host)
}

func toUint32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func fromUint32(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// IsCIDR reports whether the entry was written as a CIDR.
func (r AddressRange) IsCIDR() bool { return r.Prefix.IsValid() }

// Contains reports whether a lies in the range.
func (r AddressRange) Contains(a netip.Addr) bool {
	return a.Is4() && r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0
}

// Overlaps reports whether the two ranges share at least one address.
func (r AddressRange) Overlaps(o AddressRange) bool {
	return r.First.Compare(o.Last) <= 0 && o.First.Compare(r.Last) <= 0
}

// Size is the number of addresses in the range (2^32 for 0.0.0.0/0, hence uint64).
func (r AddressRange) Size() uint64 {
	return uint64(toUint32(r.Last)-toUint32(r.First)) + 1
}

// AutoRange is the part of the range automatic allocation hands out: for a CIDR
// shorter than /31 the network and broadcast addresses are left out (SPEC §2.1);
// /31 and /32 CIDRs, ranges and single addresses are used whole. requestedIP may
// still pin any address of the full range.
func (r AddressRange) AutoRange() AddressRange {
	if !r.IsCIDR() || r.Prefix.Bits() >= 31 {
		return r
	}
	return AddressRange{First: r.First.Next(), Last: r.Last.Prev()}
}

// String renders the range the way it would be written in spec.addresses.
func (r AddressRange) String() string {
	switch {
	case r.IsCIDR():
		return r.Prefix.String()
	case r.First == r.Last:
		return r.First.String()
	default:
		return r.First.String() + "-" + r.Last.String()
	}
}

// ParsePool parses every entry of spec.addresses, in order. The first bad entry ends
// parsing; its error names the entry's field path.
func ParsePool(spec v1alpha1.AddressPoolSpec) ([]AddressRange, error) {
	out := make([]AddressRange, 0, len(spec.Addresses))
	for i, s := range spec.Addresses {
		r, err := ParsePoolEntry(s)
		if err != nil {
			return nil, fmt.Errorf("spec.addresses[%d]: %w", i, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// RangesContain reports whether any range contains a.
func RangesContain(rs []AddressRange, a netip.Addr) bool {
	for _, r := range rs {
		if r.Contains(a) {
			return true
		}
	}
	return false
}

// TotalSize sums the sizes of the ranges. The ranges of a valid pool never overlap,
// so this is the pool's address count.
func TotalSize(rs []AddressRange) uint64 {
	var n uint64
	for _, r := range rs {
		n += r.Size()
	}
	return n
}
