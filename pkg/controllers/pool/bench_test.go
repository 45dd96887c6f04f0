package pool

import (
	"fmt"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// bigPool is one pool of 2^18 addresses holding n claims, and 1,000 Nodes whose
// addresses lie outside it (the status checks the pool against every Node address).
func bigPool(b *testing.B, n int) (*v1alpha1.AddressPool, []*v1alpha1.AllocationClaim, []*corev1.Node) {
	b.Helper()
	pool := &v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: "big"},
		Spec: v1alpha1.AddressPoolSpec{Addresses: []string{"10.128.0.0/14"}}}
	first := netip.MustParseAddr("10.128.0.1")
	claims := make([]*v1alpha1.AllocationClaim, n+1)
	for i := range claims {
		addr, ok := iprange.Add(first, uint64(i))
		if !ok {
			b.Fatalf("no address %d after %s", i, first)
		}
		claims[i] = &v1alpha1.AllocationClaim{ObjectMeta: metav1.ObjectMeta{Name: iprange.ClaimName(addr)},
			Spec: v1alpha1.AllocationClaimSpec{AddressPool: pool.Name, Address: addr.String()}}
	}
	nodes := make([]*corev1.Node, 1000)
	for i := range nodes {
		nodes[i] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i)},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP,
				Address: fmt.Sprintf("10.225.%d.%d", i/250, i%250+1)}}}}
	}
	return pool, claims, nodes
}

// BenchmarkPoolStatus: what one more claim costs its pool's status, with 1,000,
// 10,000 and 100,000 claims in the pool (docs/performance.md#scale): the claim counted
// from its event, the pool's tally read and its status computed against 1,000 Nodes,
// then the claim uncounted. It does not grow with the claims.
func BenchmarkPoolStatus(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("claims=%d", n), func(b *testing.B) {
			pool, claims, nodes := bigPool(b, n)
			c := newCounts()
			c.setPool(pool, func() []*v1alpha1.AllocationClaim { return claims[:n] })
			extra := claims[n]
			var st v1alpha1.AddressPoolStatus
			for b.Loop() {
				c.addClaim(extra)
				st = poolStatus(pool, c.count(pool, nil), nodes)
				c.removeClaim(extra)
			}
			if st.Allocated != int64(n+1) || st.Total != 1<<18-2 {
				b.Fatalf("status of the pool: %d allocated of %d, want %d of %d", st.Allocated, st.Total, n+1, 1<<18-2)
			}
		})
	}
}

// BenchmarkPoolRecount: counting a pool afresh from every claim, as when its addresses
// change; linear in the claims.
func BenchmarkPoolRecount(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("claims=%d", n), func(b *testing.B) {
			pool, claims, _ := bigPool(b, n)
			var pc *poolCount
			for b.Loop() {
				pc = recount(pool, claims[:n])
			}
			if got := pc.tally().allocated; got != int64(n) {
				b.Fatalf("recount found %d claims, want %d", got, n)
			}
		})
	}
}
