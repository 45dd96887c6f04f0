package validation

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// NodeAddresses are the addresses a Node is reached at, in both families: its
// InternalIP and ExternalIP addresses (not Hostname nor DNS names), canonical, without
// duplicates, sorted. An ElasticIP is never one of them (docs/reference.md#addresspool):
// the webhook, the AddressPool controller and the node agent all ask this.
func NodeAddresses(n *corev1.Node) []netip.Addr {
	var out []netip.Addr
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Zone() == "" {
			out = append(out, ip.Unmap())
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// NodeAddressesIn are the NodeAddresses that contains reports true for.
func NodeAddressesIn(n *corev1.Node, contains func(netip.Addr) bool) []netip.Addr {
	return slices.DeleteFunc(NodeAddresses(n), func(a netip.Addr) bool { return !contains(a) })
}
