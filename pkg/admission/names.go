package admission

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/validation"
)

// nsName renders "<namespace>/<name>", or the name of a cluster-scoped object.
func nsName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// nodeAddressesIn returns the Node's addresses (validation.NodeAddresses) that contains
// reports true for.
func nodeAddressesIn(node *corev1.Node, contains func(netip.Addr) bool) []string {
	var out []string
	for _, a := range validation.NodeAddressesIn(node, contains) {
		out = append(out, a.String())
	}
	return out
}
