package iprange

import (
	"fmt"
	"net/netip"
	"strings"
)

// ClaimName is the name of the AllocationClaim that reserves a (docs/resources.md#allocationclaim):
// the address in its canonical text form, which for IPv4 is the name itself
// ("10.225.51.5"). Object names cannot hold ':', so an IPv6 address is written in the
// canonical form of RFC 5952 with every ':' replaced by '-' ("2001:db8::5" is
// "2001-db8--5"); a name cannot start or end with '-', so a leading "::" gets a "0"
// before it and a trailing "::" a "0" after it ("::1" is "0--1", "2001:db8::" is
// "2001-db8--0"). The canonical form never starts with "0::" or ends with "::0", so the
// mapping stays one to one, and AddrOfClaimName reverses it.
func ClaimName(a netip.Addr) string {
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	n := strings.ReplaceAll(a.WithZone("").String(), ":", "-")
	if strings.HasPrefix(n, "-") {
		n = "0" + n
	}
	if strings.HasSuffix(n, "-") {
		n += "0"
	}
	return n
}

// AddrOfClaimName is the address an AllocationClaim's name stands for: the inverse of
// ClaimName. A name that ClaimName would not write (another spelling of an address) is
// refused, so every address has exactly one claim name.
func AddrOfClaimName(name string) (netip.Addr, error) {
	text := name
	if strings.Contains(name, "-") {
		text = strings.ReplaceAll(name, "-", ":")
	}
	a, err := netip.ParseAddr(text)
	if err != nil || a.Zone() != "" || a.Is4In6() {
		return netip.Addr{}, &ParseError{What: "AllocationClaim name", Value: name,
			Reason: "must be an IPv4 address (10.225.51.5) or an IPv6 address with '-' for ':' (2001-db8--5 for 2001:db8::5)"}
	}
	if want := ClaimName(a); want != name {
		return netip.Addr{}, &ParseError{What: "AllocationClaim name", Value: name,
			Reason: fmt.Sprintf("must be written %q, the one name of %s", want, a)}
	}
	return a, nil
}
