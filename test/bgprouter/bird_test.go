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

func TestParseBIRDBFD(t *testing.T) {
	out := `BIRD 2.0.12 ready.
bfd1:
IP address                Interface  State      Since         Interval  Timeout
10.225.51.11              eth0       Up         23:14:57.123    0.300    0.900
fd00:225:51::12           eth0       Down       23:14:58.001    1.000    0.000
`
	got := parseBIRDBFD(out)
	if len(got) != 2 || got["10.225.51.11"].State != "Up" || got["fd00:225:51::12"].State != "Down" {
		t.Errorf("parseBIRDBFD = %+v", got)
	}
}
