package iprange

import (
	"math"
	"testing"
)

// FuzzParse checks that parsing never panics and that every accepted entry is
// a consistent range whose canonical rendering parses back to the same range.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"10.225.51.0/24", "10.225.51.1/24", "0.0.0.0/0", "10.225.51.7/32", "10.225.51.5-10.225.51.20",
		"10.225.51.20-10.225.51.5", "10.225.51.7", "10.225.051.7", "fd00::/64", "::ffff:10.0.0.1",
		"10.0.0.0/08", "1.2.3.4-", "-", "/", "1.2.3.4/24-1.2.3.5", "fd00::5-fd00::20", "fd00::1-10.0.0.1",
		"2001:db8::/64", "FD00::1", "fe80::1%eth0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s)
		if err != nil {
			return
		}
		if r.First.Is4() != r.Last.Is4() || r.First.Is4In6() || r.First.Zone() != "" || r.Last.Less(r.First) || r.Size() == 0 {
			t.Fatalf("Parse(%q) = %+v: not a proper range of one family", s, r)
		}
		if !r.Contains(r.First) || !r.Contains(r.Last) || !r.Overlaps(r) {
			t.Fatalf("Parse(%q) = %+v does not contain its own bounds", s, r)
		}
		back, err := Parse(r.String())
		if err != nil || back.First != r.First || back.Last != r.Last {
			t.Fatalf("Parse(%q).String() = %q parses to %+v, %v", s, r.String(), back, err)
		}
		if r.IsCIDR() && (r.Prefix.Masked() != r.Prefix || r.String() != s) {
			t.Fatalf("accepted non-canonical CIDR %q", s)
		}
		if a, ok := r.Auto(); !ok || a.Size() > r.Size() || !r.Contains(a.First) || !r.Contains(a.Last) {
			t.Fatalf("Auto of %q = %+v, %v leaves the range", s, a, ok)
		}
		if r.Size() == math.MaxUint64 {
			return // saturated: the range holds 2^64 addresses or more
		}
		if d, ok := Distance(r.First, r.Last); !ok || d+1 != r.Size() {
			t.Fatalf("Distance over %q = %d, %v; size %d", s, d, ok, r.Size())
		}
		if last, ok := Add(r.First, r.Size()-1); !ok || last != r.Last {
			t.Fatalf("Add over %q = %v, %v; want %v", s, last, ok, r.Last)
		}
	})
}
