package validation

import (
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func pool(name string, mode v1alpha1.AdvertiseMode, addrs ...string) *v1alpha1.AddressPool {
	return &v1alpha1.AddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.AddressPoolSpec{AdvertiseMode: mode, Addresses: addrs},
	}
}

func TestValidateAddressPool(t *testing.T) {
	tests := []struct {
		name   string
		mode   v1alpha1.AdvertiseMode
		addrs  []string
		want   []wantErr
		detail []string // fragments the first error must mention
	}{
		{name: "all three forms", mode: "arp", addrs: []string{"10.225.51.0/25", "10.225.51.200-10.225.51.210", "10.225.51.250"}},
		{name: "bgp mode", mode: "bgp", addrs: []string{"10.225.51.0/24"}},
		{name: "adjacent ranges", mode: "arp", addrs: []string{"10.225.51.0-10.225.51.9", "10.225.51.10-10.225.51.20"}},
		{name: "mode missing", mode: "", addrs: []string{"10.225.51.0/24"},
			want: []wantErr{required("spec.advertiseMode")}},
		{name: "mode unknown", mode: "ARP", addrs: []string{"10.225.51.0/24"},
			want: []wantErr{notSupported("spec.advertiseMode")}, detail: []string{`"arp"`, `"bgp"`}},
		{name: "no addresses", mode: "arp",
			want: []wantErr{required("spec.addresses")}},
		{name: "host bits set", mode: "arp", addrs: []string{"10.225.52.0/24", "10.225.51.1/24"},
			want: []wantErr{invalid("spec.addresses[1]")}, detail: []string{`"10.225.51.1/24"`, `did you mean "10.225.51.0/24"`}},
		{name: "garbage entry", mode: "arp", addrs: []string{"ten.dot.something"},
			want: []wantErr{invalid("spec.addresses[0]")}},
		{name: "reversed range", mode: "arp", addrs: []string{"10.225.51.9-10.225.51.1"},
			want: []wantErr{invalid("spec.addresses[0]")}},
		{name: "IPv6 all three forms", mode: "arp", addrs: []string{"fd00:225:51::/64", "fd00:225:52::5-fd00:225:52::20", "fd00:225:53::7"}},
		{name: "IPv6 bgp", mode: "bgp", addrs: []string{"2001:db8::/48", "2001:db9::5"}},
		{name: "mixed families", mode: "arp", addrs: []string{"fd00:225:51::/64", "10.225.51.0/24"},
			want:   []wantErr{invalid("spec.addresses[1]")},
			detail: []string{`"10.225.51.0/24"`, `is IPv4 but spec.addresses[0] "fd00:225:51::/64" is IPv6`, "a pool holds addresses of one family"}},
		{name: "mixed families after a bad entry", mode: "arp", addrs: []string{"bad", "10.225.51.0/24", "fd00::5"},
			want: []wantErr{invalid("spec.addresses[0]"), invalid("spec.addresses[2]")}},
		{name: "IPv6 overlap", mode: "arp", addrs: []string{"fd00:225:51::/64", "fd00:225:51::5"},
			want: []wantErr{invalid("spec.addresses[1]")}, detail: []string{`overlaps spec.addresses[0] "fd00:225:51::/64"`}},
		{name: "IPv6 link-local", mode: "arp", addrs: []string{"fe80::/64"},
			want: []wantErr{invalid("spec.addresses[0]")}, detail: []string{"link-local"}},
		{name: "IPv6 multicast", mode: "arp", addrs: []string{"ff02::1"},
			want: []wantErr{invalid("spec.addresses[0]")}, detail: []string{"multicast"}},
		{name: "IPv6 loopback", mode: "arp", addrs: []string{"::1"},
			want: []wantErr{invalid("spec.addresses[0]")}, detail: []string{"loopback"}},
		{name: "IPv6 everything", mode: "arp", addrs: []string{"::/0"},
			want: []wantErr{invalid("spec.addresses[0]")}},
		{name: "IPv4-mapped", mode: "arp", addrs: []string{"::ffff:10.225.51.0/120"},
			want: []wantErr{invalid("spec.addresses[0]")}},
		{name: "exact duplicate", mode: "arp", addrs: []string{"10.225.51.7", "10.225.51.8", "10.225.51.7"},
			want: []wantErr{duplicated("spec.addresses[2]")}, detail: []string{"spec.addresses[0]"}},
		{name: "range inside CIDR", mode: "arp", addrs: []string{"10.225.51.0/24", "10.225.51.5-10.225.51.20"},
			want: []wantErr{invalid("spec.addresses[1]")}, detail: []string{`overlaps spec.addresses[0] "10.225.51.0/24"`}},
		{name: "CIDR after the address it covers", mode: "arp", addrs: []string{"10.225.51.5", "10.225.51.0/24"},
			want: []wantErr{invalid("spec.addresses[1]")}, detail: []string{`spec.addresses[0] "10.225.51.5"`}},
		{name: "ranges sharing one address", mode: "arp", addrs: []string{"10.225.51.0-10.225.51.10", "10.225.51.10-10.225.51.20"},
			want: []wantErr{invalid("spec.addresses[1]")}},
		{name: "one error per entry", mode: "arp", addrs: []string{"10.225.0.0/24", "10.225.1.0/24", "10.225.0.0/16"},
			want: []wantErr{invalid("spec.addresses[2]")}},
		{name: "big entry first overlaps two later ones", mode: "arp", addrs: []string{"10.225.0.0/16", "10.225.1.0/24", "10.225.2.7"},
			want: []wantErr{invalid("spec.addresses[1]"), invalid("spec.addresses[2]")}},
		{name: "loopback", mode: "arp", addrs: []string{"127.0.0.1"},
			want: []wantErr{invalid("spec.addresses[0]")}, detail: []string{"loopback"}},
		{name: "multicast", mode: "arp", addrs: []string{"239.0.0.0-239.0.0.9"},
			want: []wantErr{invalid("spec.addresses[0]")}, detail: []string{"multicast"}},
		{name: "link-local", mode: "arp", addrs: []string{"169.254.0.0/24"},
			want: []wantErr{invalid("spec.addresses[0]")}},
		{name: "everything", mode: "arp", addrs: []string{"0.0.0.0/0"},
			want: []wantErr{invalid("spec.addresses[0]")}},
		{name: "limited broadcast", mode: "arp", addrs: []string{"255.255.255.255"},
			want: []wantErr{invalid("spec.addresses[0]")}},
		{name: "errors in list order", mode: "arp", addrs: []string{"10.225.51.0/24", "10.225.51.5", "bad"},
			want: []wantErr{invalid("spec.addresses[1]"), invalid("spec.addresses[2]")}},
		{name: "several problems at once", mode: "", addrs: []string{"10.225.51.0/24", "bad", "10.225.51.0/24", "10.225.51.9"},
			want: []wantErr{required("spec.advertiseMode"), invalid("spec.addresses[1]"), duplicated("spec.addresses[2]"), invalid("spec.addresses[3]")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := ValidateAddressPool(pool("p", tt.mode, tt.addrs...))
			expectErrs(t, errs, tt.want...)
			if len(tt.detail) > 0 {
				expectDetail(t, errs, tt.want[0].Path, tt.detail...)
			}
		})
	}
}

func TestValidatePoolCommunities(t *testing.T) {
	withCommunities := func(mode v1alpha1.AdvertiseMode, c ...string) *v1alpha1.AddressPool {
		p := pool("p", mode, "10.225.53.0/24")
		p.Spec.BGPCommunities = c
		return p
	}
	expectErrs(t, ValidateAddressPool(withCommunities("bgp", "65000:100", "65000:1:2", "0:0", "65535:65535", "4294967295:0:4294967295")))
	expectErrs(t, ValidateAddressPool(withCommunities("bgp")))
	errs := ValidateAddressPool(withCommunities("arp", "65000:100"))
	expectErrs(t, errs, invalid("spec.bgpCommunities"))
	expectDetail(t, errs, "spec.bgpCommunities", "advertiseMode bgp only", `"arp"`)
	errs = ValidateAddressPool(withCommunities("bgp", "65000:65536", "65000:100", "065000:1", "4294967296:1:1", "65000", "no-export", "65000:100"))
	expectErrs(t, errs, invalid("spec.bgpCommunities[0]"), invalid("spec.bgpCommunities[2]"), invalid("spec.bgpCommunities[3]"),
		invalid("spec.bgpCommunities[4]"), invalid("spec.bgpCommunities[5]"), duplicated("spec.bgpCommunities[6]"))
	expectDetail(t, errs, "spec.bgpCommunities[0]", "65000:100", "65000:1:2", "0 to 65535", "0 to 4294967295")
	many := make([]string, MaxCommunities+1)
	for i := range many {
		many[i] = "65000:" + strconv.Itoa(i)
	}
	expectErrs(t, ValidateAddressPool(withCommunities("bgp", many...)), tooMany("spec.bgpCommunities"))
	// Communities may change at any time.
	expectErrs(t, ValidateAddressPoolUpdate(withCommunities("bgp", "65000:1:2"), withCommunities("bgp", "65000:100")))
}

func TestValidateAddressPoolUpdate(t *testing.T) {
	old := pool("p", "arp", "10.225.51.0/28", "10.225.51.100")
	tests := []struct {
		name string
		new  *v1alpha1.AddressPool
		want []wantErr
	}{
		{name: "unchanged", new: pool("p", "arp", "10.225.51.0/28", "10.225.51.100")},
		{name: "append", new: pool("p", "arp", "10.225.51.0/28", "10.225.51.100", "10.225.51.200-10.225.51.210")},
		{name: "mode changed", new: pool("p", "bgp", "10.225.51.0/28", "10.225.51.100"),
			want: []wantErr{invalid("spec.advertiseMode")}},
		{name: "last entry removed", new: pool("p", "arp", "10.225.51.0/28"),
			want: []wantErr{forbidden("spec.addresses")}},
		{name: "first entry removed", new: pool("p", "arp", "10.225.51.100"),
			want: []wantErr{invalid("spec.addresses[0]"), forbidden("spec.addresses")}},
		{name: "reordered", new: pool("p", "arp", "10.225.51.100", "10.225.51.0/28"),
			want: []wantErr{invalid("spec.addresses[0]")}},
		{name: "entry changed", new: pool("p", "arp", "10.225.51.0/28", "10.225.51.101"),
			want: []wantErr{invalid("spec.addresses[1]")}},
		{name: "inserted before the end", new: pool("p", "arp", "10.225.51.0/28", "10.225.51.50", "10.225.51.100"),
			want: []wantErr{invalid("spec.addresses[1]")}},
		{name: "appended entry overlaps", new: pool("p", "arp", "10.225.51.0/28", "10.225.51.100", "10.225.51.3"),
			want: []wantErr{invalid("spec.addresses[2]")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expectErrs(t, ValidateAddressPoolUpdate(tt.new, old), tt.want...)
		})
	}
	errs := ValidateAddressPoolUpdate(pool("p", "arp", "10.225.51.100"), old)
	expectDetail(t, errs, "spec.addresses", `missing: "10.225.51.0/28"`)
	expectDetail(t, errs, "spec.addresses[0]", `this position held "10.225.51.0/28"`)
	expectDetail(t, ValidateAddressPoolUpdate(pool("p", "bgp", "10.225.51.0/28", "10.225.51.100"), old),
		"spec.advertiseMode", `"bgp"`, `it was "arp"`)
}

func TestValidatePoolsDisjoint(t *testing.T) {
	p := pool("a", "arp", "10.225.51.0/28", "10.225.51.100", "bad", "10.225.51.200")
	others := []*v1alpha1.AddressPool{
		pool("a", "arp", "10.225.51.0/28"), // p itself, as listed from a cache
		pool("z", "arp", "10.225.51.200-10.225.51.210"),
		pool("c", "arp", "10.225.51.8/29", "nonsense"),
		pool("b", "arp", "10.225.51.0/30"),
		pool("d", "arp", "10.225.52.0/24"),
	}
	errs := ValidatePoolsDisjoint(p, others)
	expectErrs(t, errs, invalid("spec.addresses[0]"), invalid("spec.addresses[3]"))
	// Pools are compared in name order, so "b" is named before "c".
	expectDetail(t, errs, "spec.addresses[0]", `"10.225.51.0/30" of AddressPool "b"`)
	expectDetail(t, errs, "spec.addresses[3]", `AddressPool "z"`)
	expectErrs(t, ValidatePoolsDisjoint(pool("e", "arp", "10.225.53.0/24"), others))
}
