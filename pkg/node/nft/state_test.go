package nft

import (
	"errors"
	"maps"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func m(eip, pod string) Mapping {
	return Mapping{ElasticIP: netip.MustParseAddr(eip), PodIP: netip.MustParseAddr(pod)}
}

func TestNormalizeConfig(t *testing.T) {
	for _, iface := range []string{"", "a-very-long-name-x"} {
		s, err := normalize(DesiredState{Config: Config{ExternalInterface: iface}})
		if s != nil || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("interface %q: state %v, err %v; want ErrInvalidConfig", iface, s, err)
		}
	}
}

func TestNormalizeMappings(t *testing.T) {
	tests := []struct {
		name    string
		in      []Mapping
		want    map[string]string // ElasticIP -> Pod IP
		invalid bool
	}{
		{
			name: "plain",
			in:   []Mapping{m("10.225.51.5", "10.244.1.5"), m("10.225.51.6", "10.244.1.6")},
			want: map[string]string{"10.225.51.5": "10.244.1.5", "10.225.51.6": "10.244.1.6"},
		},
		{
			name: "exact duplicate collapses",
			in:   []Mapping{m("10.225.51.5", "10.244.1.5"), m("10.225.51.5", "10.244.1.5")},
			want: map[string]string{"10.225.51.5": "10.244.1.5"},
		},
		{
			name: "IPv4-mapped IPv6 is IPv4",
			in:   []Mapping{m("::ffff:10.225.51.5", "::ffff:10.244.1.5")},
			want: map[string]string{"10.225.51.5": "10.244.1.5"},
		},
		{
			name:    "one ElasticIP, two Pods: both dropped",
			in:      []Mapping{m("10.225.51.5", "10.244.1.5"), m("10.225.51.5", "10.244.1.6"), m("10.225.51.7", "10.244.1.7")},
			want:    map[string]string{"10.225.51.7": "10.244.1.7"},
			invalid: true,
		},
		{
			name:    "one Pod, two ElasticIPs: both dropped",
			in:      []Mapping{m("10.225.51.5", "10.244.1.5"), m("10.225.51.6", "10.244.1.5"), m("10.225.51.7", "10.244.1.7")},
			want:    map[string]string{"10.225.51.7": "10.244.1.7"},
			invalid: true,
		},
		{
			name:    "address used on both sides",
			in:      []Mapping{m("10.225.51.5", "10.244.1.5"), m("10.244.1.5", "10.244.1.6")},
			want:    map[string]string{"10.225.51.5": "10.244.1.5"},
			invalid: true,
		},
		{
			name:    "mixed families, link-local, unspecified, multicast, broadcast, identical",
			in:      []Mapping{m("2001:db8::1", "10.244.1.5"), m("fe80::1", "fe80::2"), m("0.0.0.0", "10.244.1.5"), m("224.0.0.1", "10.244.1.5"), m("255.255.255.255", "10.244.1.5"), m("10.244.1.5", "10.244.1.5"), {}},
			want:    map[string]string{},
			invalid: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := normalize(DesiredState{Config: Config{ExternalInterface: "eth0"}, Mappings: tt.in})
			if s == nil {
				t.Fatalf("nil state: %v", err)
			}
			if tt.invalid != errors.Is(err, ErrInvalidMapping) {
				t.Errorf("err = %v, want invalid=%v", err, tt.invalid)
			}
			got := map[string]string{}
			for e, p := range s.eip2vpc {
				got[e.String()] = p.String()
				if s.vpc2eip[p] != e {
					t.Errorf("vpc2eip[%v] = %v, want %v", p, s.vpc2eip[p], e)
				}
			}
			if len(s.vpc2eip) != len(s.eip2vpc) {
				t.Errorf("maps differ in size: %d vs %d", len(s.eip2vpc), len(s.vpc2eip))
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("eip2vpc = %v, want %v", got, tt.want)
			}
		})
	}
}

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func TestMergePrefixes(t *testing.T) {
	tests := []struct {
		in, want []string
	}{
		{in: []string{"10.244.0.0/16", "10.96.0.0/12", "10.225.51.2/32"}, want: []string{"10.96.0.0/12", "10.225.51.2/32", "10.244.0.0/16"}},
		{in: []string{"10.244.3.0/24", "10.244.0.0/16", "10.244.0.7/32"}, want: []string{"10.244.0.0/16"}},
		{in: []string{"10.244.1.9/16", "fd00::1/64"}, want: []string{"10.244.0.0/16", "fd00::/64"}}, // masked, IPv4 first
		{in: []string{"0.0.0.0/0", "10.0.0.0/8"}, want: []string{"0.0.0.0/0"}},
		{in: nil, want: nil},
	}
	for _, tt := range tests {
		got := mergePrefixes(prefixes(tt.in...))
		if !reflect.DeepEqual(got, prefixes(tt.want...)) {
			t.Errorf("mergePrefixes(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestRanges(t *testing.T) {
	a := netip.MustParseAddr
	tests := []struct {
		in   []string
		want []addrRange
	}{
		{in: []string{"10.0.0.0/25", "10.0.0.128/25", "10.0.2.0/24"}, want: []addrRange{
			{a("10.0.0.0"), a("10.0.0.255")}, {a("10.0.2.0"), a("10.0.2.255")},
		}},
		{in: []string{"10.225.51.2/32"}, want: []addrRange{{a("10.225.51.2"), a("10.225.51.2")}}},
		{in: []string{"0.0.0.0/0"}, want: []addrRange{{a("0.0.0.0"), a("255.255.255.255")}}},
	}
	for _, tt := range tests {
		if got := ranges(prefixes(tt.in...)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ranges(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestSameConfigAndMappings(t *testing.T) {
	base := DesiredState{
		Config:   Config{ExternalInterface: "eth0", ClusterCIDRs: prefixes("10.244.0.0/16")},
		Mappings: []Mapping{m("10.225.51.5", "10.244.1.5"), m("10.225.51.6", "10.244.1.6")},
	}
	a, _ := normalize(base)
	reordered := base
	reordered.Mappings = []Mapping{base.Mappings[1], base.Mappings[0]}
	reordered.ClusterCIDRs = prefixes("10.244.0.0/16", "10.244.9.0/24")
	b, _ := normalize(reordered)
	if !a.sameConfig(b) || !maps.Equal(a.eip2vpc, b.eip2vpc) {
		t.Error("order or covered prefixes made states differ")
	}
	other := base
	other.ExternalInterface = "eth1"
	c, _ := normalize(other)
	if a.sameConfig(c) {
		t.Error("interface change not seen")
	}
	if got := a.mappings(); len(got) != 2 || got[0] != base.Mappings[0] {
		t.Errorf("mappings() = %v", got)
	}
}

func dn(iface, a string) DirectNIC {
	return DirectNIC{HostInterface: iface, Address: netip.MustParseAddr(a)}
}

func TestNormalizeDirect(t *testing.T) {
	tests := []struct {
		name    string
		in      []DirectNIC
		ifaces  []string
		allowed []DirectNIC
		invalid bool
	}{
		{
			name:    "one address per NIC",
			in:      []DirectNIC{dn("jnab12cd", "10.225.51.6"), dn("veth1234", "10.225.51.7")},
			ifaces:  []string{"jnab12cd", "veth1234"},
			allowed: []DirectNIC{dn("jnab12cd", "10.225.51.6"), dn("veth1234", "10.225.51.7")},
		},
		{
			name:    "eth0 with Pod IP and ElasticIP, duplicates collapse",
			in:      []DirectNIC{dn("veth1234", "10.244.1.6"), dn("veth1234", "::ffff:10.225.51.6"), dn("veth1234", "10.244.1.6")},
			ifaces:  []string{"veth1234"},
			allowed: []DirectNIC{dn("veth1234", "10.225.51.6"), dn("veth1234", "10.244.1.6")},
		},
		{
			name: "address on two NICs: allowed on neither, both stay filtered",
			in: []DirectNIC{
				dn("veth1", "10.225.51.6"), dn("veth2", "10.225.51.6"), dn("veth2", "10.225.51.8"),
				dn("veth3", "10.225.51.9"),
			},
			ifaces:  []string{"veth1", "veth2", "veth3"},
			allowed: []DirectNIC{dn("veth2", "10.225.51.8"), dn("veth3", "10.225.51.9")},
			invalid: true,
		},
		{
			name:    "bad address: interface filtered with nothing allowed",
			in:      []DirectNIC{{HostInterface: "veth1"}, dn("veth2", "fe80::1"), dn("veth3", "224.0.0.1"), dn("veth4", "10.225.51.9")},
			ifaces:  []string{"veth1", "veth2", "veth3", "veth4"},
			allowed: []DirectNIC{dn("veth4", "10.225.51.9")},
			invalid: true,
		},
		{
			name:    "bad interface name: entry left out",
			in:      []DirectNIC{dn("", "10.225.51.6"), dn("a-very-long-name-x", "10.225.51.7"), dn("veth4", "10.225.51.9")},
			ifaces:  []string{"veth4"},
			allowed: []DirectNIC{dn("veth4", "10.225.51.9")},
			invalid: true,
		},
		{name: "none", ifaces: nil, allowed: []DirectNIC{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := normalize(DesiredState{Config: Config{ExternalInterface: "eth0"}, Direct: tt.in})
			if s == nil {
				t.Fatalf("nil state: %v", err)
			}
			if tt.invalid != errors.Is(err, ErrInvalidMapping) {
				t.Errorf("err = %v, want invalid=%v", err, tt.invalid)
			}
			all, allowed := s.direct()
			ifaces := namesIn(all, fam4)
			if !reflect.DeepEqual(ifaces, tt.ifaces) || !reflect.DeepEqual(allowed, tt.allowed) {
				t.Errorf("direct = %q %v, want %q %v", ifaces, allowed, tt.ifaces, tt.allowed)
			}
		})
	}
}

func TestNormalizeDirectConflictMessage(t *testing.T) {
	_, err := normalize(DesiredState{
		Config: Config{ExternalInterface: "eth0"},
		Direct: []DirectNIC{dn("veth2", "10.225.51.6"), dn("veth1", "10.225.51.6")},
	})
	if want := `address 10.225.51.6 listed for several direct NICs ["veth1" "veth2"]`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want it to contain %s", err, want)
	}
}

func TestSameDirect(t *testing.T) {
	base := DesiredState{
		Config: Config{ExternalInterface: "eth0"},
		Direct: []DirectNIC{dn("veth1", "10.225.51.6"), dn("veth2", "10.225.51.7")},
	}
	a, _ := normalize(base)
	reordered := base
	reordered.Direct = []DirectNIC{base.Direct[1], base.Direct[0]}
	b, _ := normalize(reordered)
	if !maps.Equal(a.directOf, b.directOf) || !maps.Equal(a.directIfaces, b.directIfaces) {
		t.Error("order made states differ")
	}
	moved := base
	moved.Direct = []DirectNIC{dn("veth1", "10.225.51.7"), dn("veth2", "10.225.51.6")}
	c, _ := normalize(moved)
	if maps.Equal(a.directOf, c.directOf) || !a.sameConfig(c) || !maps.Equal(a.eip2vpc, c.eip2vpc) {
		t.Error("swapped addresses not seen as a direct-only change")
	}
}

// namesIn lists the names of the interfaces filtered in one family's table.
func namesIn(ifaces []familyIface, f *family) []string {
	var out []string
	for _, i := range ifaces {
		if i.fam == f {
			out = append(out, i.name)
		}
	}
	return out
}
