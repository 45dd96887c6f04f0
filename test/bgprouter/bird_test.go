package bgprouter

import "testing"

func TestSameSince(t *testing.T) {
	r := func(s string) Route { return Route{Since: s} }
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"2026-11-30 19:15:41.527", "2026-11-30 19:15:41.527", true},
		{"2026-11-30 19:15:41.527", "2026-11-30 19:15:41.526", true}, // one stamp printed twice
		{"2026-11-30 19:15:41.527", "2026-11-30 19:15:41.627", false},
		{"2026-11-30 19:15:39.900", "2026-11-30 19:15:41.526", false},
		{"19:15:41.527", "19:15:41.526", false}, // unparsable: exact comparison
	} {
		if got := SameSince(r(c.a), r(c.b)); got != c.want {
			t.Errorf("SameSince(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
