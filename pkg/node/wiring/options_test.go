package wiring

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestValidateNamesTheFlag: each wrong flag is refused with an error naming it.
func TestValidateNamesTheFlag(t *testing.T) {
	good := Options{NodeName: nodeName, RouterID: "192.0.2.10", IPv6NextHop: "2001:db8::10", ClusterCIDRs: []string{"10.244.0.0/16", "fd00:10:244::/56"}}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid options refused: %v", err)
	}
	for _, tc := range []struct {
		flag   string
		change func(o *Options)
	}{
		{"--node-name", func(o *Options) { o.NodeName = "" }},
		{"--bgp-router-id", func(o *Options) { o.RouterID = "2001:db8::1" }},
		{"--bgp-router-id", func(o *Options) { o.RouterID = "router" }},
		{"--bgp-ipv6-next-hop", func(o *Options) { o.IPv6NextHop = "192.0.2.1" }},
		{"--bgp-ipv6-next-hop", func(o *Options) { o.IPv6NextHop = "::ffff:192.0.2.1" }},
		{"--bgp-ipv6-next-hop", func(o *Options) { o.IPv6NextHop = "fe80::1" }},
		{"--bgp-ipv6-next-hop", func(o *Options) { o.IPv6NextHop = "2001:db8::1%eth0" }},
		{"--cluster-cidr", func(o *Options) { o.ClusterCIDRs = append(o.ClusterCIDRs, "10.244.0.0") }},
	} {
		o := good
		o.ClusterCIDRs = slices.Clone(good.ClusterCIDRs)
		tc.change(&o)
		err := o.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tc.flag+" ") {
			t.Errorf("%+v: error %v, want one starting with %s", o, err, tc.flag)
		}
	}
}

// TestClusterCIDRsMasked: --cluster-cidr prefixes of both families are masked.
func TestClusterCIDRsMasked(t *testing.T) {
	got, err := Options{ClusterCIDRs: []string{"10.244.1.7/16", "fd00:10:244::5/56"}}.clusterCIDRs()
	want := []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/56")}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("clusterCIDRs: %v, %v; want %v", got, err, want)
	}
}
