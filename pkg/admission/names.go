package admission

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
)

// nsName renders "<namespace>/<name>", or the name of a cluster-scoped object.
func nsName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// nodeAddressesIn returns the IPv4 addresses of a Node that contains reports true for.
func nodeAddressesIn(node *corev1.Node, contains func(netip.Addr) bool) []string {
	var out []string
	for _, a := range node.Status.Addresses {
		ip, err := iprange.ParseAddr(a.Address)
		if err == nil && contains(ip) && !slices.Contains(out, a.Address) {
			out = append(out, a.Address)
		}
	}
	return out
}
