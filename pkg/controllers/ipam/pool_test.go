package ipam

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestParseRange(t *testing.T) {
	tests := []struct {
		in      string
		want    Range
		wantErr string // substring; "" means success
	}{
		{in: "10.225.51.0/24", want: Range{First: addr("10.225.51.0"), Last: addr("10.225.51.255"), SkipEnds: true}},
		{in: "10.225.51.0/30", want: Range{First: addr("10.225.51.0"), Last: addr("10.225.51.3"), SkipEnds: true}},
		{in: "10.225.51.4/31", want: Range{First: addr("10.225.51.4"), Last: addr("10.225.51.5")}},
		{in: "10.225.51.7/32", want: Range{First: addr("10.225.51.7"), Last: addr("10.225.51.7")}},
		{in: "0.0.0.0/0", want: Range{First: addr("0.0.0.0"), Last: addr("255.255.255.255"), SkipEnds: true}},
		{in: "10.225.51.5-10.225.51.20", want: Range{First: addr("10.225.51.5"), Last: addr("10.225.51.20")}},
		{in: "10.225.51.5-10.225.51.5", want: Range{First: addr("10.225.51.5"), Last: addr("10.225.51.5")}},
		{in: "10.225.51.9", want: Range{First: addr("10.225.51.9"), Last: addr("10.225.51.9")}},
		{in: "10.225.51.1/24", wantErr: `host bits are set, want "10.225.51.0/24"`},
		{in: "10.225.51.0/33", wantErr: "invalid address pool entry"},
		{in: "2001:db8::/64", wantErr: "not an IPv4 CIDR"},
		{in: "::ffff:10.225.51.1", wantErr: "is not an IPv4 address"},
		{in: "10.225.51.20-10.225.51.5", wantErr: "the first address is above the last"},
		{in: "10.225.51.5-", wantErr: "invalid address pool entry"},
		{in: "10.225.51.5-2001:db8::1", wantErr: "is not an IPv4 address"},
		{in: "010.225.51.5", wantErr: "invalid address pool entry"},
		{in: " 10.225.51.5", wantErr: "invalid address pool entry"},
		{in: "", wantErr: "invalid address pool entry"},
		{in: "pool", wantErr: "invalid address pool entry"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseRange(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrInvalidEntry) {
					t.Fatalf("ParseRange(%q) error = %v, want one containing %q wrapping ErrInvalidEntry", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRange(%q): %v", tc.in, err)
			}
			if got != tc.want {
				t.Fatalf("ParseRange(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestNewPool(t *testing.T) {
	p, err := NewPool("a", []string{"10.225.51.100", "10.225.51.0/30"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Range{
		{First: addr("10.225.51.100"), Last: addr("10.225.51.100")},
		{First: addr("10.225.51.0"), Last: addr("10.225.51.3"), SkipEnds: true},
	}
	if p.Name != "a" || len(p.Ranges) != 2 || p.Ranges[0] != want[0] || p.Ranges[1] != want[1] {
		t.Fatalf("NewPool = %+v, want ranges %+v in entry order", p, want)
	}

	_, err = NewPool("b", []string{"10.225.51.1", "10.225.51.1/24"})
	if err == nil || !strings.Contains(err.Error(), `pool "b": addresses[1]`) || !errors.Is(err, ErrInvalidEntry) {
		t.Fatalf("NewPool error = %v, want it to name the pool and entry index", err)
	}
	if _, err := NewPool("c", nil); !errors.Is(err, ErrInvalidEntry) {
		t.Fatalf("NewPool without entries: error = %v, want ErrInvalidEntry", err)
	}
}

func TestRangeSize(t *testing.T) {
	for in, want := range map[string]uint64{
		"10.225.51.0/24":           256,
		"10.225.51.0/31":           2,
		"10.225.51.7":              1,
		"10.225.51.5-10.225.51.20": 16,
		"0.0.0.0/0":                1 << 32,
	} {
		r, err := ParseRange(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Size(); got != want {
			t.Errorf("Size(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestContainsPoolForNetworkOrBroadcast(t *testing.T) {
	a := mustPool(t, "a", "10.225.51.0/28", "10.225.51.40-10.225.51.42")
	b := mustPool(t, "b", "10.225.51.64/31", "10.225.51.99")
	pools := []Pool{a, b}
	tests := []struct {
		addr     string
		pool     string // "" = in no pool
		netBcast bool
	}{
		{"10.225.51.0", "a", true},
		{"10.225.51.15", "a", true},
		{"10.225.51.1", "a", false},
		{"10.225.51.14", "a", false},
		{"10.225.51.16", "", false},
		{"10.225.51.40", "a", false},
		{"10.225.51.42", "a", false},
		{"10.225.51.43", "", false},
		{"10.225.51.64", "b", false}, // /31: no network or broadcast address
		{"10.225.51.65", "b", false},
		{"10.225.51.99", "b", false},
		{"::ffff:10.225.51.99", "b", false},
		{"2001:db8::1", "", false},
	}
	for _, tc := range tests {
		got, ok := PoolFor(pools, addr(tc.addr))
		if got != tc.pool || ok != (tc.pool != "") {
			t.Errorf("PoolFor(%s) = %q, %v; want %q", tc.addr, got, ok, tc.pool)
		}
		inA := Contains(a, addr(tc.addr))
		if inA != (tc.pool == "a") {
			t.Errorf("Contains(a, %s) = %v", tc.addr, inA)
		}
		nb := IsNetworkOrBroadcast(a, addr(tc.addr)) || IsNetworkOrBroadcast(b, addr(tc.addr))
		if nb != tc.netBcast {
			t.Errorf("IsNetworkOrBroadcast(%s) = %v, want %v", tc.addr, nb, tc.netBcast)
		}
	}
	// Pools are tried in order: an address in both (never allowed by the webhook) goes to the first.
	c := mustPool(t, "c", "10.225.51.0/24")
	if got, _ := PoolFor([]Pool{c, a}, addr("10.225.51.3")); got != "c" {
		t.Errorf("PoolFor with overlapping pools = %q, want the first, %q", got, "c")
	}
}

func mustPool(t testing.TB, name string, entries ...string) Pool {
	t.Helper()
	p, err := NewPool(name, entries)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
