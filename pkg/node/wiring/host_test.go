package wiring

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
)

// TestExternalInterface: --external-interface wins; otherwise it is the interface
// holding the Node's InternalIP (here the loopback, holding 127.0.0.1), and an error
// naming the flag when none holds it.
func TestExternalInterface(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	o := Options{NodeName: nodeName, ExternalInterface: "ext0"}
	if got, err := o.externalInterface(ctx, kubefake.NewClientset()); got != "ext0" || err != nil {
		t.Errorf("with the flag: %q, %v; want ext0", got, err)
	}
	o.ExternalInterface = ""
	if got, err := o.externalInterface(ctx, kubefake.NewClientset(node("2001:db8:ffff::99", "127.0.0.1"))); got != "lo" || err != nil {
		t.Errorf("InternalIP 127.0.0.1: %q, %v; want lo", got, err)
	}
	_, err := o.externalInterface(ctx, kubefake.NewClientset(node("192.0.2.253")))
	if err == nil || !strings.Contains(err.Error(), "set --external-interface") {
		t.Errorf("an InternalIP no interface holds: %v, want an error naming --external-interface", err)
	}
	if _, err := o.externalInterface(ctx, kubefake.NewClientset()); err == nil || !strings.Contains(err.Error(), `reading Node "node-a"`) {
		t.Errorf("no Node: %v", err)
	}
}

// TestInterfaceAddresses reads the loopback's addresses: its IPv4 subnet, no global
// IPv6 address, and no BGP next hop but the flag.
func TestInterfaceAddresses(t *testing.T) {
	if got := subnetsOf("lo"); !slices.Contains(got, netip.MustParsePrefix("127.0.0.1/8")) {
		t.Errorf("subnets of lo: %v, want 127.0.0.1/8 among them", got)
	}
	if subnetsOf("no-such-interface") == nil {
		t.Error("subnets of a missing interface: nil, want an empty list")
	}
	if hasGlobalIPv6("lo") {
		t.Error("lo has a global IPv6 address")
	}
	if hop, err := (Options{}).bgpNextHop6("lo"); err != nil || hop.IsValid() {
		t.Errorf("IPv6 next hop of lo: %v, %v; want none", hop, err)
	}
	if hop, err := (Options{IPv6NextHop: "2001:db8::10"}).bgpNextHop6("lo"); err != nil || hop != netip.MustParseAddr("2001:db8::10") {
		t.Errorf("IPv6 next hop from the flag: %v, %v", hop, err)
	}
	if _, err := (Options{}).bgpNextHop6("no-such-interface"); err == nil {
		t.Error("IPv6 next hop of a missing interface: no error")
	}
	if addrOrNone(netip.Addr{}) != "none" || addrOrNone(netip.MustParseAddr("2001:db8::1")) != "2001:db8::1" {
		t.Error("addrOrNone")
	}
}
