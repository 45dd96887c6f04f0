package directnic

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func TestRouteTableIPv6(t *testing.T) {
	a := netip.MustParseAddr("2001:db8::5")
	t1, t2 := RouteTable(a), RouteTable(a)
	if t1 != t2 || t1 < 1<<31 || t1 > 1<<32-1 {
		t.Errorf("RouteTable(%s) = %d, %d: not stable or outside 2^31..2^32-1", a, t1, t2)
	}
	if RouteTable(netip.MustParseAddr("2001:db8::6")) == t1 {
		t.Error("neighbouring addresses share a table")
	}
}

// TestRouteTables: colliding IPv6 tables within a Pod are settled by address order,
// whatever the order given; IPv4 tables stay the address.
func TestRouteTables(t *testing.T) {
	// Two addresses whose hashes collide, found by a birthday search.
	x, y := netip.MustParseAddr("2001:db8::204f:3a3b:2fa1:ef1a"), netip.MustParseAddr("2001:db8::7e87:4809:3b50:6474")
	if RouteTable(x) != RouteTable(y) {
		t.Fatalf("%s and %s no longer collide", x, y)
	}
	v4 := netip.MustParseAddr("10.225.51.6")
	want := map[netip.Addr]int64{x: RouteTable(x), y: RouteTable(x) + 1, v4: 0x0ae13306} // x < y
	for _, order := range [][]netip.Addr{{x, y, v4}, {v4, y, x}} {
		if got := RouteTables(order); !reflect.DeepEqual(got, want) {
			t.Errorf("RouteTables(%v) = %v, want %v", order, got, want)
		}
	}
}

func TestDirectRoutingIPv6(t *testing.T) {
	a := netip.MustParseAddr("2001:db8::5")
	routes, rules := Routing(true, a, 0)
	if want := []v1alpha1.Route{{Destination: "::/0", Gateway: "fe80::1"}}; !reflect.DeepEqual(routes, want) || rules != nil {
		t.Errorf("eth0: %v %v", routes, rules)
	}
	routes, rules = Routing(false, a, 77)
	if want := []v1alpha1.Route{{Destination: "::/0", Gateway: "fe80::1", Table: 77}}; !reflect.DeepEqual(routes, want) {
		t.Errorf("extra NIC routes %v", routes)
	}
	if want := []v1alpha1.RoutingRule{{From: "2001:db8::5/128", Table: 77, Priority: 100}}; !reflect.DeepEqual(rules, want) {
		t.Errorf("extra NIC rules %v", rules)
	}
}

func TestRoutingIPv4(t *testing.T) {
	addr := netip.MustParseAddr("10.225.51.6")
	const table = 0x0ae13306
	cases := []struct {
		name      string
		primary   bool
		wantRoute v1alpha1.Route
		wantRules []v1alpha1.RoutingRule
	}{
		{"eth0", true, v1alpha1.Route{Destination: "0.0.0.0/0", Gateway: "169.254.0.1", OnLink: true}, nil},
		{"extra", false, v1alpha1.Route{Destination: "0.0.0.0/0", Gateway: "169.254.0.1", OnLink: true, Table: table},
			[]v1alpha1.RoutingRule{{From: "10.225.51.6/32", Table: table, Priority: 100}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			routes, rules := Routing(tc.primary, addr, RouteTable(addr))
			if len(routes) != 1 || routes[0] != tc.wantRoute {
				t.Errorf("routes = %+v, want [%+v]", routes, tc.wantRoute)
			}
			if !reflect.DeepEqual(rules, tc.wantRules) {
				t.Errorf("rules = %+v, want %+v", rules, tc.wantRules)
			}
		})
	}
}

func TestRouteTable(t *testing.T) {
	cases := map[string]int64{
		"10.225.51.6":     0x0ae13306,
		"0.0.0.1":         1,
		"255.255.255.255": 0xffffffff,
		"192.168.0.1":     0xc0a80001,
	}
	for a, want := range cases {
		if got := RouteTable(netip.MustParseAddr(a)); got != want {
			t.Errorf("RouteTable(%s) = %#x, want %#x", a, got, want)
		}
	}
}
