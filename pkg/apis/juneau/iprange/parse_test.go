package iprange

import (
	"errors"
	"math"
	"net/netip"
	"strings"
	"testing"
)

func TestParseAddr(t *testing.T) {
	tests := []struct {
		in      string
		wantErr string // substring of the reason; "" = valid
	}{
		{in: "10.225.51.5"},
		{in: "0.0.0.0"},
		{in: "255.255.255.255"},
		{in: "", wantErr: "dotted-decimal"},
		{in: "10.225.051.5", wantErr: "leading zero"},
		{in: "10.225.51", wantErr: "dotted-decimal"},
		{in: " 10.225.51.5", wantErr: "dotted-decimal"},
		{in: "10.225.51.5/32", wantErr: "dotted-decimal"},
		{in: "fd00::1"},
		{in: "2001:db8::5"},
		{in: "::"},
		{in: "2001:DB8::5", wantErr: `canonical form "2001:db8::5"`},
		{in: "2001:db8:0:0:0:0:0:5", wantErr: `canonical form "2001:db8::5"`},
		{in: "2001:0db8::5", wantErr: `canonical form "2001:db8::5"`},
		{in: "2001:db8:0:0:1:0:0:1", wantErr: `canonical form "2001:db8::1:0:0:1"`},
		{in: "fe80::1%eth0", wantErr: `zone: use "fe80::1"`},
		{in: "::ffff:10.225.51.5", wantErr: `use "10.225.51.5"`},
		{in: "256.1.1.1", wantErr: "dotted-decimal"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			a, err := ParseAddr(tt.in)
			if tt.wantErr == "" {
				if err != nil || a.String() != tt.in {
					t.Fatalf("ParseAddr(%q) = %v, %v; want the address", tt.in, a, err)
				}
				return
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("ParseAddr(%q) error = %v, want a *ParseError", tt.in, err)
			}
			if !strings.Contains(pe.Reason, tt.wantErr) || pe.Value != tt.in {
				t.Errorf("ParseAddr(%q) = %+v, want reason containing %q", tt.in, pe, tt.wantErr)
			}
		})
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		in          string
		first, last string
		cidr        bool
		size        uint64
		str         string // String() when it differs from in
		wantErr     string
	}{
		{in: "10.225.51.0/24", first: "10.225.51.0", last: "10.225.51.255", cidr: true, size: 256},
		{in: "10.225.51.8/29", first: "10.225.51.8", last: "10.225.51.15", cidr: true, size: 8},
		{in: "10.225.51.7/32", first: "10.225.51.7", last: "10.225.51.7", cidr: true, size: 1},
		{in: "0.0.0.0/0", first: "0.0.0.0", last: "255.255.255.255", cidr: true, size: 1 << 32},
		{in: "10.225.51.5-10.225.51.20", first: "10.225.51.5", last: "10.225.51.20", size: 16},
		{in: "10.225.51.5-10.225.51.5", first: "10.225.51.5", last: "10.225.51.5", size: 1, str: "10.225.51.5"},
		{in: "10.225.51.250-10.225.52.3", first: "10.225.51.250", last: "10.225.52.3", size: 10},
		{in: "10.225.51.7", first: "10.225.51.7", last: "10.225.51.7", size: 1},
		{in: "10.225.51.1/24", wantErr: `did you mean "10.225.51.0/24"`},
		{in: "10.225.51.0/33", wantErr: "from 0 to 32"},
		{in: "10.225.51.0/08", wantErr: "leading zeros"},
		{in: "10.225.51.0/", wantErr: "from 0 to 32"},
		{in: "10.225.051.0/24", wantErr: "leading zero"},
		{in: "fd00::/64", first: "fd00::", last: "fd00::ffff:ffff:ffff:ffff", cidr: true, size: math.MaxUint64},
		{in: "fd00:225:51::/120", first: "fd00:225:51::", last: "fd00:225:51::ff", cidr: true, size: 256},
		{in: "fd00:225:51::5-fd00:225:51::20", first: "fd00:225:51::5", last: "fd00:225:51::20", size: 28},
		{in: "fd00:225:51::7", first: "fd00:225:51::7", last: "fd00:225:51::7", size: 1},
		{in: "fd00:225:51::1/64", wantErr: `did you mean "fd00:225:51::/64"`},
		{in: "fd00::/129", wantErr: "from 0 to 128"},
		{in: "FD00::/64", wantErr: "canonical form"},
		{in: "fd00::20-fd00::5", wantErr: "write the range as fd00::5-fd00::20"},
		{in: "fd00::1-10.225.51.5", wantErr: "a range holds one family"},
		{in: "10.225.51.20-10.225.51.5", wantErr: "write the range as 10.225.51.5-10.225.51.20"},
		{in: "10.225.51.5-", wantErr: "last address of the range"},
		{in: "-10.225.51.5", wantErr: "first address of the range"},
		{in: "10.225.51.5 - 10.225.51.9", wantErr: "first address of the range"},
		{in: "10.225.51.5-fd00::1", wantErr: "is IPv4 and the last address fd00::1 is IPv6"},
		{in: "pool", wantErr: "a CIDR (10.225.51.0/24, 2001:db8::/64), an inclusive range"},
		{in: "", wantErr: "a CIDR"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r, err := Parse(tt.in)
			if tt.wantErr != "" {
				var pe *ParseError
				if !errors.As(err, &pe) || !strings.Contains(pe.Reason, tt.wantErr) {
					t.Fatalf("Parse(%q) error = %v, want a reason containing %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if r.First.String() != tt.first || r.Last.String() != tt.last || r.IsCIDR() != tt.cidr || r.Size() != tt.size {
				t.Errorf("Parse(%q) = %v..%v cidr=%v size=%d; want %s..%s cidr=%v size=%d",
					tt.in, r.First, r.Last, r.IsCIDR(), r.Size(), tt.first, tt.last, tt.cidr, tt.size)
			}
			want := tt.in
			if tt.str != "" {
				want = tt.str
			}
			if r.String() != want {
				t.Errorf("String() = %q, want %q", r.String(), want)
			}
		})
	}
}

func mustRange(t *testing.T, s string) Range {
	t.Helper()
	r, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestContainsAndOverlaps(t *testing.T) {
	r := mustRange(t, "10.225.51.5-10.225.51.20")
	for addr, want := range map[string]bool{
		"10.225.51.4": false, "10.225.51.5": true, "10.225.51.12": true,
		"10.225.51.20": true, "10.225.51.21": false, "::ffff:10.225.51.6": false,
	} {
		if got := r.Contains(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Contains(%s) = %v, want %v", addr, got, want)
		}
	}
	tests := []struct {
		a, b string
		want bool
	}{
		{"10.225.51.0/24", "10.225.51.7", true},
		{"10.225.51.0/24", "10.225.52.0/24", false},
		{"10.225.51.0-10.225.51.9", "10.225.51.10-10.225.51.20", false},
		{"10.225.51.0-10.225.51.10", "10.225.51.10-10.225.51.20", true},
		{"10.225.51.0/24", "10.225.51.255-10.225.52.3", true},
		{"10.225.0.0/16", "10.225.51.0/24", true},
		{"10.225.51.7", "10.225.51.8", false},
	}
	for _, tt := range tests {
		a, b := mustRange(t, tt.a), mustRange(t, tt.b)
		if a.Overlaps(b) != tt.want || b.Overlaps(a) != tt.want {
			t.Errorf("Overlaps(%s, %s) = %v/%v, want %v both ways", tt.a, tt.b, a.Overlaps(b), b.Overlaps(a), tt.want)
		}
	}
}

func TestAuto(t *testing.T) {
	tests := map[string]string{
		"10.225.51.0/24":            "10.225.51.1-10.225.51.254",
		"10.225.51.0/30":            "10.225.51.1-10.225.51.2",
		"10.225.51.0/31":            "10.225.51.0/31",
		"10.225.51.7/32":            "10.225.51.7/32",
		"10.225.51.0-10.225.51.255": "10.225.51.0-10.225.51.255",
		"10.225.51.0":               "10.225.51.0",
		"fd00::/64":                 "fd00::1-fd00::ffff:ffff:ffff:ffff",
		"fd00::/126":                "fd00::1-fd00::3",
		"fd00::/127":                "fd00::/127",
		"fd00::5/128":               "fd00::5/128",
		"fd00::-fd00::3":            "fd00::-fd00::3",
	}
	for in, want := range tests {
		if got, ok := mustRange(t, in).Auto(); !ok || got.String() != want {
			t.Errorf("Auto(%s) = %s, %v; want %s", in, got, ok, want)
		}
	}
}

func TestParsePool(t *testing.T) {
	rs, err := ParsePool([]string{"10.225.51.0/28", "10.225.51.100-10.225.51.109", "10.225.51.200"})
	if err != nil {
		t.Fatal(err)
	}
	var total uint64
	for _, r := range rs {
		total += r.Size()
	}
	if len(rs) != 3 || total != 16+10+1 {
		t.Fatalf("ParsePool = %v (total %d), want 3 ranges of 27 addresses", rs, total)
	}
	if !Contain(rs, netip.MustParseAddr("10.225.51.105")) || Contain(rs, netip.MustParseAddr("10.225.51.150")) {
		t.Errorf("Contain gives wrong answers for %v", rs)
	}

	_, err = ParsePool([]string{"10.225.51.0/28", "10.225.51.1/28"})
	var pe *ParseError
	if err == nil || !strings.HasPrefix(err.Error(), "spec.addresses[1]: ") || !errors.As(err, &pe) {
		t.Errorf("ParsePool error = %v, want one naming spec.addresses[1] and wrapping a *ParseError", err)
	}

	rs, err = ParsePool([]string{"fd00:225:51::/64", "fd00:225:52::5"})
	if f, ok := PoolFamily(rs); err != nil || !ok || f != IPv6 {
		t.Errorf("ParsePool of IPv6 entries = %v, %v (family %v)", rs, err, f)
	}
	_, err = ParsePool([]string{"fd00:225:51::/64", "10.225.51.0/24"})
	if err == nil || !strings.HasPrefix(err.Error(), "spec.addresses[1]: ") ||
		!strings.Contains(err.Error(), "is IPv4 but spec.addresses[0] is IPv6: a pool holds addresses of one family") {
		t.Errorf("ParsePool of mixed families error = %v", err)
	}
}

// Entries as the allocator reads them: the ends automatic allocation skips.
func TestAutoEnds(t *testing.T) {
	for in, want := range map[string]string{
		"0.0.0.0/0":                "0.0.0.1-255.255.255.254",
		"10.225.51.4/31":           "10.225.51.4/31",
		"10.225.51.5-10.225.51.20": "10.225.51.5-10.225.51.20",
	} {
		if got, ok := mustRange(t, in).Auto(); !ok || got.String() != want {
			t.Errorf("Auto(%s) = %s, %v; want %s", in, got, ok, want)
		}
	}
	if _, ok := (Range{}).Auto(); ok {
		t.Error("the zero Range has automatic addresses")
	}
}

func TestSize(t *testing.T) {
	v6 := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	for _, tt := range []struct {
		r    Range
		want uint64
	}{
		{mustRange(t, "0.0.0.0/0"), 1 << 32},
		{mustRange(t, "10.225.51.7"), 1},
		{Range{}, 0},
		{Range{First: v6("10.0.0.2"), Last: v6("10.0.0.1")}, 0},
		{FromPrefix(netip.MustParsePrefix("2001:db8::/120")), 256},
		{FromPrefix(netip.MustParsePrefix("2001:db8::/64")), math.MaxUint64},
		{FromPrefix(netip.MustParsePrefix("2001:db8::/65")), 1 << 63},
		{FromPrefix(netip.MustParsePrefix("::/0")), math.MaxUint64},
	} {
		if got := tt.r.Size(); got != tt.want {
			t.Errorf("Size(%v) = %d, want %d", tt.r, got, tt.want)
		}
	}
}

func TestDistanceAndAdd(t *testing.T) {
	a := netip.MustParseAddr
	tests := []struct {
		from, to string
		d        uint64
		ok       bool
	}{
		{"10.225.51.0", "10.225.51.255", 255, true},
		{"0.0.0.0", "255.255.255.255", math.MaxUint32, true},
		{"10.0.0.2", "10.0.0.1", 0, false},
		{"10.0.0.1", "::ffff:10.0.0.2", 0, false},
		{"2001:db8::", "2001:db8::1:0", 1 << 16, true},
		{"2001:db8::", "2001:db8:0:1::", 0, false}, // 2^64: too far
		{"2001:db8::ffff:ffff:ffff:ffff", "2001:db8:0:1::", 1, true},
	}
	for _, tt := range tests {
		d, ok := Distance(a(tt.from), a(tt.to))
		if d != tt.d || ok != tt.ok {
			t.Errorf("Distance(%s, %s) = %d, %v; want %d, %v", tt.from, tt.to, d, ok, tt.d, tt.ok)
		}
		if ok {
			if back, ok := Add(a(tt.from), d); !ok || back != a(tt.to) {
				t.Errorf("Add(%s, %d) = %v, %v; want %s", tt.from, d, back, ok, tt.to)
			}
		}
	}
	if _, ok := Add(a("255.255.255.255"), 1); ok {
		t.Error("Add left the IPv4 space")
	}
	if _, ok := Add(a("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), 1); ok {
		t.Error("Add left the IPv6 space")
	}
	if got, ok := Add(a("10.0.0.255"), 1); !ok || got != a("10.0.1.0") {
		t.Errorf("Add carries wrong: %v", got)
	}
	if FamilyOf(a("10.0.0.1")) != IPv4 || FamilyOf(a("::ffff:10.0.0.1")) != IPv6 || mustRange(t, "10.0.0.0/8").Family() != IPv4 {
		t.Error("FamilyOf")
	}
}
