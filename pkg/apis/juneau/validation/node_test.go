package validation

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// A Node's addresses in both families, InternalIP and ExternalIP only, canonical.
func TestNodeAddresses(t *testing.T) {
	n := &corev1.Node{Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeHostName, Address: "node-a"},
		{Type: corev1.NodeInternalIP, Address: "fd00:225:51:0::2"},
		{Type: corev1.NodeInternalIP, Address: "10.225.51.2"},
		{Type: corev1.NodeExternalIP, Address: "::ffff:10.225.51.9"},
		{Type: corev1.NodeInternalDNS, Address: "10.225.51.7"},
		{Type: corev1.NodeInternalIP, Address: "10.225.51.2"},
	}}}
	want := []netip.Addr{netip.MustParseAddr("10.225.51.2"), netip.MustParseAddr("10.225.51.9"), netip.MustParseAddr("fd00:225:51::2")}
	if got := NodeAddresses(n); !slices.Equal(got, want) {
		t.Errorf("NodeAddresses = %v, want %v", got, want)
	}
	in := NodeAddressesIn(n, func(a netip.Addr) bool { return a.Is6() })
	if !slices.Equal(in, want[2:]) {
		t.Errorf("NodeAddressesIn IPv6 = %v", in)
	}
}
