package iprange

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
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

// Reason is the reason of a *ParseError, or the whole message of another error.
func Reason(err error) string {
	var pe *ParseError
	if errors.As(err, &pe) {
		return pe.Reason
	}
	return err.Error()
}

// ParseAddr parses an address of either family in canonical form: an IPv4 address in
// dotted-decimal form ("10.225.51.5") or an IPv6 address in the canonical text form of
// RFC 5952 ("2001:db8::5": lower-case hexadecimal, no leading zeros, the longest run of
// zero groups shortened to "::"). Leading zeros, zones and IPv4-mapped IPv6 forms are
// refused, so that one address has exactly one spelling: AllocationClaims are named
// after the address (ClaimName).
func ParseAddr(s string) (netip.Addr, error) {
	const what = "IP address"
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return netip.Addr{}, &ParseError{What: what, Value: s,
			Reason: "must be an IPv4 address in dotted-decimal form such as 10.225.51.5 or an IPv6 address such as 2001:db8::5 (" + netipDetail(err) + ")"}
	case a.Is4In6():
		return netip.Addr{}, &ParseError{What: what, Value: s,
			Reason: fmt.Sprintf("must be written as a plain IPv4 address: use %q", a.Unmap().String())}
	case a.Zone() != "":
		return netip.Addr{}, &ParseError{What: what, Value: s,
			Reason: fmt.Sprintf("must not carry a zone: use %q", a.WithZone("").String())}
	case a.String() != s:
		return netip.Addr{}, &ParseError{What: what, Value: s,
			Reason: fmt.Sprintf("must be written in canonical form %q", a.String())}
	}
	return a, nil
}

// ParseAddrOf is ParseAddr for one family: an address of the other family is refused
// with a reason that names both.
func ParseAddrOf(s string, f Family) (netip.Addr, error) {
	a, err := ParseAddr(s)
	if err != nil {
		return a, err
	}
	if got := FamilyOf(a); got != f {
		return netip.Addr{}, &ParseError{What: "IP address", Value: s,
			Reason: fmt.Sprintf("is an %s address, %s expected", got, f)}
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

// Parse parses one entry of an AddressPool's spec.addresses, of either family: a
// canonical CIDR whose host bits are zero ("10.225.51.0/24", "2001:db8::/64"), an
// inclusive range "first-last" of one family with first <= last
// ("10.225.51.5-10.225.51.20", "2001:db8::5-2001:db8::20"), or a single address
// ("10.225.51.7", "2001:db8::7").
func Parse(s string) (Range, error) {
	const what = "address pool entry"
	if strings.Contains(s, "/") {
		return parseCIDR(s)
	}
	if first, last, ok := strings.Cut(s, "-"); ok {
		a, err := ParseAddr(first)
		if err != nil {
			return Range{}, &ParseError{What: what, Value: s,
				Reason: fmt.Sprintf("first address of the range %s", Reason(err))}
		}
		b, err := ParseAddr(last)
		if err != nil {
			return Range{}, &ParseError{What: what, Value: s,
				Reason: fmt.Sprintf("last address of the range %s", Reason(err))}
		}
		if FamilyOf(a) != FamilyOf(b) {
			return Range{}, &ParseError{What: what, Value: s,
				Reason: fmt.Sprintf("the first address %s is %s and the last address %s is %s: a range holds one family", a, FamilyOf(a), b, FamilyOf(b))}
		}
		if b.Less(a) {
			return Range{}, &ParseError{What: what, Value: s,
				Reason: fmt.Sprintf("the first address %s is greater than the last address %s; write the range as %s-%s", a, b, b, a)}
		}
		return Range{First: a, Last: b}, nil
	}
	a, err := ParseAddr(s)
	if err != nil {
		if _, isAddr := netip.ParseAddr(s); isAddr == nil {
			// An address of the wrong family: its own reason is the whole story.
			return Range{}, &ParseError{What: what, Value: s, Reason: Reason(err)}
		}
		return Range{}, &ParseError{What: what, Value: s,
			Reason: "must be a CIDR (10.225.51.0/24, 2001:db8::/64), an inclusive range (10.225.51.5-10.225.51.20) or one address: " + Reason(err)}
	}
	return Range{First: a, Last: a}, nil
}

func parseCIDR(s string) (Range, error) {
	const what = "address pool entry"
	addr, bits, _ := strings.Cut(s, "/")
	a, err := ParseAddr(addr)
	if err != nil {
		return Range{}, &ParseError{What: what, Value: s, Reason: "the address of the CIDR " + Reason(err)}
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return Range{}, &ParseError{What: what, Value: s,
			Reason: fmt.Sprintf("prefix length %q must be a number from 0 to %d without leading zeros", bits, a.BitLen())}
	}
	if m := p.Masked(); m != p {
		return Range{}, &ParseError{What: what, Value: s,
			Reason: fmt.Sprintf("host bits must be zero: did you mean %q (the network containing %s)?", m.String(), a)}
	}
	return FromPrefix(p), nil
}

// FromPrefix is the range of a CIDR.
func FromPrefix(p netip.Prefix) Range {
	p = p.Masked()
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	last, _ := netip.AddrFromSlice(b)
	return Range{First: p.Addr(), Last: last, Prefix: p}
}

// ParsePool parses every entry of an AddressPool's spec.addresses, in order. The first
// bad entry ends parsing; its error names the entry's field path. A pool holds one
// family: an entry of another family than the first entry's is refused (MixedFamily).
func ParsePool(entries []string) ([]Range, error) {
	out := make([]Range, 0, len(entries))
	for i, s := range entries {
		r, err := Parse(s)
		if err != nil {
			return nil, fmt.Errorf("spec.addresses[%d]: %w", i, err)
		}
		if len(out) > 0 && r.Family() != out[0].Family() {
			return nil, fmt.Errorf("spec.addresses[%d]: %w", i, MixedFamily(s, r.Family(), out[0].Family()))
		}
		out = append(out, r)
	}
	return out, nil
}

// MixedFamily is the error for a pool entry s of family got in a pool whose first
// entry is of family want.
func MixedFamily(s string, got, want Family) error {
	return &ParseError{What: "address pool entry", Value: s, Reason: fmt.Sprintf(
		"is %s but spec.addresses[0] is %s: a pool holds addresses of one family; put %s addresses in a pool of their own (an ExternalNetwork may list pools of both families)",
		got, want, got)}
}

// PoolFamily is the family of a pool's parsed entries; false for no entries.
func PoolFamily(rs []Range) (Family, bool) {
	if len(rs) == 0 {
		return 0, false
	}
	return rs[0].Family(), true
}
