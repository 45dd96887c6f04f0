package admission

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
)

// maxNamed is how many objects a message names before it says "and N more".
const maxNamed = 5

// quoteSorted renders names sorted and quoted ("a", "b"), at most maxNamed of them.
func quoteSorted(names []string) string {
	names = slices.Clone(names)
	slices.Sort(names)
	names = slices.Compact(names)
	shown := names
	if len(names) > maxNamed {
		shown = names[:maxNamed]
	}
	q := make([]string, len(shown))
	for i, n := range shown {
		q[i] = fmt.Sprintf("%q", n)
	}
	out := strings.Join(q, ", ")
	if len(names) > len(shown) {
		out += fmt.Sprintf(" and %d more", len(names)-len(shown))
	}
	return out
}

// plural picks the singular or plural form of a kind for a count.
func plural(n int, kind string) string {
	if n == 1 {
		return kind
	}
	return kind + "s"
}

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
