package cni

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/loutres/juneau/pkg/apis/juneau/directnic"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/node/cniserver"
)

func TestHostVethName(t *testing.T) {
	a := HostVethName("c1", "ext0")
	if len(a) > maxIfNameLen || !strings.HasPrefix(a, "jn") {
		t.Errorf("HostVethName = %q: want a jn-prefixed name of at most %d characters", a, maxIfNameLen)
	}
	if a != HostVethName("c1", "ext0") {
		t.Error("HostVethName is not stable")
	}
	for _, other := range []string{HostVethName("c2", "ext0"), HostVethName("c1", "ext1"), HostVethName("c1e", "xt0")} {
		if other == a {
			t.Errorf("HostVethName collides: %q", other)
		}
	}
}

func TestBuildPlan(t *testing.T) {
	eip := netip.MustParsePrefix("10.225.51.6/32")
	gw := netip.MustParseAddr("169.254.0.1")
	const table = 0x0ae13307
	nics := []cniserver.Interface{
		{Interface: "ext0", ElasticIP: "gw-eip", Holds: true, Address: "10.225.51.7/32"},
		{Interface: "eth0", ElasticIP: "web-eip", Holds: true, Address: "10.225.51.6"},
	}
	got, err := buildPlan("c1", "eth0", nics)
	if err != nil {
		t.Fatalf("buildPlan: %v", err)
	}
	want := []nicPlan{{
		Interface: "eth0", ElasticIP: "web-eip", Address: eip, Primary: true,
		Routes: []route{{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gw: gw, OnLink: true}},
	}, {
		Interface: "ext0", ElasticIP: "gw-eip", Address: netip.MustParsePrefix("10.225.51.7/32"),
		HostInterface: HostVethName("c1", "ext0"),
		Routes:        []route{{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gw: gw, OnLink: true, Table: table}},
		Rules:         []rule{{From: netip.MustParsePrefix("10.225.51.7/32"), Table: table, Priority: 100}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("buildPlan =\n%+v\nwant\n%+v", got, want)
	}
}

func TestBuildPlanUsesAgentRouting(t *testing.T) {
	nics := []cniserver.Interface{{
		Interface: "ext0", ElasticIP: "gw-eip", Holds: true, Address: "10.225.51.7/32",
		Routes: []v1alpha1.Route{{Destination: "0.0.0.0/0", Gateway: "169.254.0.1", OnLink: true, Table: 1000},
			{Destination: "10.225.51.0/24", Table: 1000}},
		Rules: []v1alpha1.RoutingRule{{From: "10.225.51.7/32", Table: 1000, Priority: 100}},
	}}
	got, err := buildPlan("c1", "eth0", nics)
	if err != nil {
		t.Fatalf("buildPlan: %v", err)
	}
	wantRoutes := []route{
		{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gw: netip.MustParseAddr("169.254.0.1"), OnLink: true, Table: 1000},
		{Dst: netip.MustParsePrefix("10.225.51.0/24"), Table: 1000},
	}
	if !reflect.DeepEqual(got[0].Routes, wantRoutes) {
		t.Errorf("routes = %+v, want %+v", got[0].Routes, wantRoutes)
	}
	if len(got[0].Rules) != 1 || got[0].Rules[0].Table != 1000 {
		t.Errorf("rules = %+v", got[0].Rules)
	}
	// The main table given as 254 is kept as the main table.
	if tbl := (route{Table: 0}).kernelTable(); tbl != unix.RT_TABLE_MAIN {
		t.Errorf("kernelTable(0) = %d, want %d", tbl, unix.RT_TABLE_MAIN)
	}
}

func TestBuildPlanErrors(t *testing.T) {
	ok := cniserver.Interface{Interface: "ext0", ElasticIP: "e", Holds: true, Address: "10.225.51.7/32"}
	cases := map[string]struct {
		mutate func(*cniserver.Interface)
		want   string
	}{
		"not holding": {func(n *cniserver.Interface) { n.Holds = false }, "does not hold"},
		"no address":  {func(n *cniserver.Interface) { n.Address = "" }, "address"},
		"not a /32":   {func(n *cniserver.Interface) { n.Address = "10.225.51.0/24" }, "not an IPv4 /32 or an IPv6 /128"},
		"not a /128":  {func(n *cniserver.Interface) { n.Address = "fd00::1/64" }, "not an IPv4 /32 or an IPv6 /128"},
		"mapped IPv4": {func(n *cniserver.Interface) { n.Address = "::ffff:10.225.51.7/128" }, "not an IPv4 /32"},
		"mixed families": {func(n *cniserver.Interface) {
			n.Address = "fd00::1/128"
			n.Routes = []v1alpha1.Route{{Destination: "0.0.0.0/0"}}
		}, "not of the family"},
		"long name":       {func(n *cniserver.Interface) { n.Interface = "abcdefghijklmnop" }, "invalid interface name"},
		"slash in name":   {func(n *cniserver.Interface) { n.Interface = "a/b" }, "invalid interface name"},
		"bad route":       {func(n *cniserver.Interface) { n.Routes = []v1alpha1.Route{{Destination: "x"}} }, "route destination"},
		"bad gateway":     {func(n *cniserver.Interface) { n.Routes = []v1alpha1.Route{{Destination: "0.0.0.0/0", Gateway: "::1"}} }, "route gateway"},
		"local table":     {func(n *cniserver.Interface) { n.Routes = []v1alpha1.Route{{Destination: "0.0.0.0/0", Table: 255}} }, "reserved"},
		"table too large": {func(n *cniserver.Interface) { n.Routes = []v1alpha1.Route{{Destination: "0.0.0.0/0", Table: 1 << 32}} }, "out of range"},
		"rule in main":    {func(n *cniserver.Interface) { n.Rules = []v1alpha1.RoutingRule{{From: "10.0.0.1/32"}} }, "needs a table"},
	}
	for name, tc := range cases {
		n := ok
		tc.mutate(&n)
		_, err := buildPlan("c1", "eth0", []cniserver.Interface{n})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
	if _, err := buildPlan("c1", "eth0", []cniserver.Interface{ok, ok}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("duplicate interface: err = %v", err)
	}
}

// TestBuildPlanIPv6: an IPv6 direct NIC gets a /128, `default via fe80::1` (eth0) or
// that route in a table of its own and a rule from the address (an extra NIC); two
// extra NICs whose tables would collide get distinct ones.
func TestBuildPlanIPv6(t *testing.T) {
	x, y := "2001:db8::204f:3a3b:2fa1:ef1a", "2001:db8::7e87:4809:3b50:6474" // same hash
	nics := []cniserver.Interface{
		{Interface: "eth0", ElasticIP: "e0", Holds: true, Address: "2001:db8::5/128"},
		{Interface: "ext1", ElasticIP: "e1", Holds: true, Address: y + "/128"},
		{Interface: "ext0", ElasticIP: "e2", Holds: true, Address: x + "/128"},
	}
	plans, err := buildPlan("c1", "eth0", nics)
	if err != nil {
		t.Fatal(err)
	}
	gw := netip.MustParseAddr("fe80::1")
	if p := plans[0]; !p.Primary || p.Address != netip.MustParsePrefix("2001:db8::5/128") ||
		len(p.Routes) != 1 || p.Routes[0] != (route{Dst: netip.MustParsePrefix("::/0"), Gw: gw}) || len(p.Rules) != 0 {
		t.Errorf("eth0 plan = %+v", p)
	}
	tx, ty := plans[2].Rules[0].Table, plans[1].Rules[0].Table
	if tx == ty || int64(ty) != directnic.RouteTable(netip.MustParseAddr(x))+1 || plans[2].Routes[0].Table != tx {
		t.Errorf("tables: %s → %d, %s → %d", x, tx, y, ty)
	}
	if r := plans[1].Rules[0]; r.From != netip.MustParsePrefix(y+"/128") || r.Priority != 100 {
		t.Errorf("rule = %+v", r)
	}
}
