package ipam

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
)

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestNewPool(t *testing.T) {
	p, err := NewPool("a", []string{"10.225.51.100", "10.225.51.0/30"})
	if err != nil {
		t.Fatal(err)
	}
	want := []iprange.Range{
		{First: addr("10.225.51.100"), Last: addr("10.225.51.100")},
		{First: addr("10.225.51.0"), Last: addr("10.225.51.3"), Prefix: netip.MustParsePrefix("10.225.51.0/30")},
	}
	if p.Name != "a" || len(p.Ranges) != 2 || p.Ranges[0] != want[0] || p.Ranges[1] != want[1] {
		t.Fatalf("NewPool = %+v, want ranges %+v in entry order", p, want)
	}

	_, err = NewPool("b", []string{"10.225.51.1", "10.225.51.1/24"})
	var pe *iprange.ParseError
	if err == nil || !strings.Contains(err.Error(), `pool "b": spec.addresses[1]`) || !errors.As(err, &pe) {
		t.Fatalf("NewPool error = %v, want it to name the pool and entry index", err)
	}
	if _, err := NewPool("c", nil); err == nil || !strings.Contains(err.Error(), `pool "c" has no addresses`) {
		t.Fatalf("NewPool without entries: error = %v", err)
	}
}

func TestPoolFor(t *testing.T) {
	a := mustPool(t, "a", "10.225.51.0/28", "10.225.51.40-10.225.51.42")
	b := mustPool(t, "b", "10.225.51.64/31", "10.225.51.99")
	pools := []Pool{a, b}
	tests := []struct {
		addr     string
		pool     string // "" = in no pool
		netBcast bool   // left out of automatic picks
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
		all := append(append([]iprange.Range{}, a.Ranges...), b.Ranges...)
		x := addr(tc.addr).Unmap()
		if left := iprange.Contain(all, x) && !autoInAny(all, x); left != tc.netBcast {
			t.Errorf("%s left out of automatic picks = %v, want %v", tc.addr, left, tc.netBcast)
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
