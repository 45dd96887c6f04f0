package validation

import (
	"testing"
)

// FuzzParsePoolEntry checks that parsing never panics and that every accepted entry is
// a consistent range whose canonical rendering parses back to the same range.
func FuzzParsePoolEntry(f *testing.F) {
	for _, s := range []string{
		"10.225.51.0/24", "10.225.51.1/24", "0.0.0.0/0", "10.225.51.7/32", "10.225.51.5-10.225.51.20",
		"10.225.51.20-10.225.51.5", "10.225.51.7", "10.225.051.7", "fd00::/64", "::ffff:10.0.0.1",
		"10.0.0.0/08", "1.2.3.4-", "-", "/", "1.2.3.4/24-1.2.3.5",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParsePoolEntry(s)
		if err != nil {
			return
		}
		if !r.First.Is4() || !r.Last.Is4() || r.Last.Less(r.First) || r.Size() == 0 {
			t.Fatalf("ParsePoolEntry(%q) = %+v: not a proper IPv4 range", s, r)
		}
		if !r.Contains(r.First) || !r.Contains(r.Last) || !r.Overlaps(r) {
			t.Fatalf("ParsePoolEntry(%q) = %+v does not contain its own bounds", s, r)
		}
		back, err := ParsePoolEntry(r.String())
		if err != nil || back.First != r.First || back.Last != r.Last {
			t.Fatalf("ParsePoolEntry(%q).String() = %q parses to %+v, %v", s, r.String(), back, err)
		}
		if r.IsCIDR() && (r.Prefix.Masked() != r.Prefix || r.String() != s) {
			t.Fatalf("accepted non-canonical CIDR %q", s)
		}
		if a := r.AutoRange(); a.Size() > r.Size() || !r.Contains(a.First) || !r.Contains(a.Last) {
			t.Fatalf("AutoRange of %q = %+v leaves the range", s, a)
		}
	})
}
