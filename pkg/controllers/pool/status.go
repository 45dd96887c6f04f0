package pool

import (
	"cmp"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
	"github.com/loutres/juneau/pkg/apis/juneau/messages"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/apis/juneau/validation"
)

// poolStatus computes an AddressPool's status from its count of claims (counts.go: all
// claims on its addresses count, whatever pool they name) and from the Nodes (for the
// node-address check). The Ready condition carries no lastTransitionTime.
//
// The counts describe what automatic allocation can still hand out:
//   - total is every address automatic allocation may pick (a CIDR shorter than /31
//     loses its network and broadcast addresses, docs/reference.md#addresspool), plus each such address a
//     requestedIP has pinned, since that one is in use;
//   - allocated is the number of claims on addresses of the pool: a claim made from an
//     earlier pool of the same name that no longer holds its address is not the pool's
//     (its ElasticIP reports it, docs/reference.md#allocation);
//   - available is total - allocated: the addresses still free for automatic picks.
//
// So a fresh 10.225.51.0/24 shows 254 total, 254 available. A pool whose entries cannot
// be read counts the claims naming it.
func poolStatus(pool *v1alpha1.AddressPool, t tally, nodes []*corev1.Node) v1alpha1.AddressPoolStatus {
	var st v1alpha1.AddressPoolStatus
	st.Allocated = t.allocated
	ranges, err := iprange.ParsePool(pool.Spec.Addresses)
	if err != nil {
		return withReady(pool, st, metav1.ConditionFalse, v1alpha1.ReasonInvalidAddressPool, err.Error())
	}
	st.Total = toInt64(addSaturating(autoSize(ranges), uint64(max(t.pinned, 0))))
	st.Available = max(st.Total-st.Allocated, 0)
	if inside := nodeAddressesIn(ranges, nodes); len(inside) > 0 {
		return withReady(pool, st, metav1.ConditionFalse, v1alpha1.ReasonNodeAddressInPool, nodeMessage(inside))
	}
	return withReady(pool, st, metav1.ConditionTrue, v1alpha1.ReasonReady, "no Node address lies in this pool")
}

// autoSize is the number of addresses automatic allocation may pick (iprange's
// Range.Auto: the entries of a valid pool never overlap), saturating.
func autoSize(ranges []iprange.Range) uint64 {
	var n uint64
	for _, r := range ranges {
		if a, ok := r.Auto(); ok {
			n = addSaturating(n, a.Size())
		}
	}
	return n
}

func addSaturating(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// toInt64 is n as a status count, saturating at math.MaxInt64.
func toInt64(n uint64) int64 {
	return int64(min(n, math.MaxInt64))
}

// nodeAddress is an address of a Node inside a pool.
type nodeAddress struct {
	node string
	addr netip.Addr
}

// nodeAddressesIn lists the Node addresses (validation.NodeAddresses) that lie in the
// ranges, sorted by Node name and address.
func nodeAddressesIn(ranges []iprange.Range, nodes []*corev1.Node) []nodeAddress {
	var out []nodeAddress
	for _, n := range nodes {
		for _, a := range validation.NodeAddressesIn(n, func(a netip.Addr) bool { return iprange.Contain(ranges, a) }) {
			out = append(out, nodeAddress{node: n.Name, addr: a})
		}
	}
	slices.SortFunc(out, func(a, b nodeAddress) int {
		return cmp.Or(strings.Compare(a.node, b.node), a.addr.Compare(b.addr))
	})
	return out
}

func nodeMessage(inside []nodeAddress) string {
	parts := make([]string, 0, messages.MaxNamed+1)
	for i, na := range inside {
		if i == messages.MaxNamed {
			parts = append(parts, fmt.Sprintf("and %d more", len(inside)-messages.MaxNamed))
			break
		}
		parts = append(parts, fmt.Sprintf("%s of Node %q", na.addr, na.node))
	}
	return fmt.Sprintf("Node addresses lie in this pool, so an ElasticIP could take a Node's address: %s",
		strings.Join(parts, ", "))
}

func withReady(pool *v1alpha1.AddressPool, st v1alpha1.AddressPoolStatus, status metav1.ConditionStatus, reason, message string) v1alpha1.AddressPoolStatus {
	st.Conditions = []metav1.Condition{{
		Type:               v1alpha1.ConditionReady,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: pool.Generation,
	}}
	return st
}
