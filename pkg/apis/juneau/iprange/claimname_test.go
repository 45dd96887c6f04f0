package iprange

import (
	"net/netip"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestClaimName(t *testing.T) {
	for _, tc := range []struct{ addr, name string }{
		{"10.225.51.5", "10.225.51.5"},
		{"2001:db8::5", "2001-db8--5"},
		{"fd00:225:51::", "fd00-225-51--0"},
		{"::1", "0--1"},
		{"::", "0--0"},
		{"2001:db8:0:1:1:1:1:1", "2001-db8-0-1-1-1-1-1"},
		{"2001:db8::1:0:0:1", "2001-db8--1-0-0-1"},
		{"fe80::1", "fe80--1"},
		{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "ffff-ffff-ffff-ffff-ffff-ffff-ffff-ffff"},
	} {
		a := netip.MustParseAddr(tc.addr)
		got := ClaimName(a)
		if got != tc.name {
			t.Errorf("ClaimName(%s) = %q, want %q", tc.addr, got, tc.name)
		}
		if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
			t.Errorf("ClaimName(%s) = %q is no object name: %v", tc.addr, got, errs)
		}
		back, err := AddrOfClaimName(got)
		if err != nil || back != a {
			t.Errorf("AddrOfClaimName(%q) = %v, %v; want %s", got, back, err, a)
		}
	}
}

func TestAddrOfClaimNameRefusesOtherSpellings(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"2001-0db8--5", `"2001-db8--5"`},
		{"2001-DB8--5", ""}, // upper case is no object name, nor the canonical form
		{"--1", `"0--1"`},
		{"0-0-0-0-0-0-0-1", `"0--1"`},
		{"010.225.51.5", ""},
		{"ffff-10.0.0.1", ""},
		{"nginx", "must be an IPv4 address"},
	} {
		_, err := AddrOfClaimName(tc.name)
		if err == nil {
			t.Errorf("AddrOfClaimName(%q) accepted", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("AddrOfClaimName(%q) = %v, want it to mention %s", tc.name, err, tc.want)
		}
	}
}

// FuzzClaimName checks that every address has one claim name, a valid object name,
// that maps back to it.
func FuzzClaimName(f *testing.F) {
	f.Add([]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5})
	f.Add([]byte{10, 225, 51, 5})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, ok := netip.AddrFromSlice(b)
		if !ok {
			return
		}
		a = a.Unmap()
		n := ClaimName(a)
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			t.Fatalf("ClaimName(%s) = %q: %v", a, n, errs)
		}
		back, err := AddrOfClaimName(n)
		if err != nil || back != a {
			t.Fatalf("AddrOfClaimName(ClaimName(%s)=%q) = %v, %v", a, n, back, err)
		}
	})
}
