package pool

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/controllers/ipam"
)

func testPool(name string, addrs ...string) *v1alpha1.AddressPool {
	return &v1alpha1.AddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: "pool-uid-" + "x", Generation: 4},
		Spec:       v1alpha1.AddressPoolSpec{AdvertiseMode: v1alpha1.AdvertiseARP, Addresses: addrs},
	}
}

func testClaim(addr, pool string) *v1alpha1.AllocationClaim {
	return &v1alpha1.AllocationClaim{
		ObjectMeta: metav1.ObjectMeta{Name: addr},
		Spec: v1alpha1.AllocationClaimSpec{
			AddressPool: pool, Address: addr,
			Consumer: v1alpha1.ConsumerReference{Kind: v1alpha1.ConsumerKindElasticIP, Namespace: "default", Name: "e-" + addr, UID: "uid-" + addr},
		},
	}
}

func testNode(name string, addrs ...corev1.NodeAddress) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: addrs}}
}

func internal(ip string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip}
}

func TestPoolStatus(t *testing.T) {
	tests := []struct {
		name                        string
		pool                        *v1alpha1.AddressPool
		claims                      []*v1alpha1.AllocationClaim
		nodes                       []*corev1.Node
		total, allocated, available int64
		ready                       metav1.ConditionStatus
		reason                      string
		msgHas                      []string
	}{
		{
			name:  "fresh /24 leaves out network and broadcast",
			pool:  testPool("p", "10.225.51.0/24"),
			total: 254, available: 254,
			ready: metav1.ConditionTrue, reason: v1alpha1.ReasonReady,
		},
		{
			name:  "range, single address, /31 and /32 count whole",
			pool:  testPool("p", "10.225.51.5-10.225.51.20", "10.225.52.7", "10.225.53.0/31", "10.225.54.9/32"),
			total: 16 + 1 + 2 + 1, available: 20,
			ready: metav1.ConditionTrue, reason: v1alpha1.ReasonReady,
		},
		{
			name:   "claims of this pool",
			pool:   testPool("p", "10.225.51.0/29"),
			claims: []*v1alpha1.AllocationClaim{testClaim("10.225.51.1", "p"), testClaim("10.225.51.2", "p")},
			total:  6, allocated: 2, available: 4,
			ready: metav1.ConditionTrue, reason: v1alpha1.ReasonReady,
		},
		{
			name:   "pinned network and broadcast addresses count in total and allocated",
			pool:   testPool("p", "10.225.51.0/29"),
			claims: []*v1alpha1.AllocationClaim{testClaim("10.225.51.0", "p"), testClaim("10.225.51.7", "p"), testClaim("10.225.51.3", "p")},
			total:  8, allocated: 3, available: 5,
			ready: metav1.ConditionTrue, reason: v1alpha1.ReasonReady,
		},
		{
			name:   "full pool",
			pool:   testPool("p", "10.225.51.9"),
			claims: []*v1alpha1.AllocationClaim{testClaim("10.225.51.9", "p")},
			total:  1, allocated: 1, available: 0,
			ready: metav1.ConditionTrue, reason: v1alpha1.ReasonReady,
		},
		{
			// tiny-pool had .5 and .6, was deleted and made again with .5 only: the claim
			// on .6 (naming tiny-pool) is not counted (it showed TOTAL 1, ALLOCATED 2).
			name:   "a claim of an earlier pool of the same name, outside the pool now",
			pool:   testPool("tiny-pool", "10.225.51.5"),
			claims: []*v1alpha1.AllocationClaim{testClaim("10.225.51.5", "tiny-pool"), testClaim("10.225.51.6", "tiny-pool")},
			total:  1, allocated: 1, available: 0,
			ready: metav1.ConditionTrue, reason: v1alpha1.ReasonReady,
		},
		{
			name:   "claims on the pool's addresses count whatever pool they name; others do not",
			pool:   testPool("p", "10.225.51.0/29"),
			claims: []*v1alpha1.AllocationClaim{testClaim("10.225.51.1", "gone-pool"), testClaim("10.225.52.1", "other")},
			total:  6, allocated: 1, available: 5,
			ready: metav1.ConditionTrue, reason: v1alpha1.ReasonReady,
		},
		{
			name: "node address inside the pool",
			pool: testPool("p", "10.225.51.0/24"),
			nodes: []*corev1.Node{
				testNode("node-b", internal("10.225.51.3"), corev1.NodeAddress{Type: corev1.NodeHostName, Address: "node-b"}),
				testNode("node-a", internal("10.225.50.2"), corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "10.225.51.2"}),
				testNode("node-c", internal("192.168.0.1")),
			},
			total: 254, available: 254,
			ready: metav1.ConditionFalse, reason: v1alpha1.ReasonNodeAddressInPool,
			msgHas: []string{`10.225.51.2 of Node "node-a", 10.225.51.3 of Node "node-b"`},
		},
		{
			name: "many node addresses are summarised",
			pool: testPool("p", "10.225.51.0/24"),
			nodes: []*corev1.Node{
				testNode("n1", internal("10.225.51.1")), testNode("n2", internal("10.225.51.2")),
				testNode("n3", internal("10.225.51.3")), testNode("n4", internal("10.225.51.4")),
				testNode("n5", internal("10.225.51.5")), testNode("n6", internal("10.225.51.6")),
				testNode("n7", internal("10.225.51.7")),
			},
			total: 254, available: 254,
			ready: metav1.ConditionFalse, reason: v1alpha1.ReasonNodeAddressInPool,
			msgHas: []string{`10.225.51.5 of Node "n5", and 2 more`},
		},
		{
			name:   "unparsable pool",
			pool:   testPool("p", "10.225.51.1/24"),
			claims: []*v1alpha1.AllocationClaim{testClaim("10.225.51.1", "p")},
			total:  0, allocated: 1, available: 0,
			ready: metav1.ConditionFalse, reason: v1alpha1.ReasonInvalidAddressPool,
			msgHas: []string{"spec.addresses[0]", "10.225.51.0/24"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := poolStatus(tt.pool, recount(tt.pool, tt.claims).tally(), tt.nodes)
			if st.Total != tt.total || st.Allocated != tt.allocated || st.Available != tt.available {
				t.Errorf("total/allocated/available = %d/%d/%d, want %d/%d/%d",
					st.Total, st.Allocated, st.Available, tt.total, tt.allocated, tt.available)
			}
			if len(st.Conditions) != 1 {
				t.Fatalf("conditions %+v, want one", st.Conditions)
			}
			c := st.Conditions[0]
			if c.Type != v1alpha1.ConditionReady || c.Status != tt.ready || c.Reason != tt.reason || c.ObservedGeneration != 4 {
				t.Errorf("condition %+v, want Ready=%s reason %s generation 4", c, tt.ready, tt.reason)
			}
			for _, s := range tt.msgHas {
				if !strings.Contains(c.Message, s) {
					t.Errorf("message %q does not contain %q", c.Message, s)
				}
			}
		})
	}
}

// The status counts and the allocator read pools through one address model: what the
// status calls available is exactly what the allocator still hands out, pinned network
// and broadcast addresses included.
func TestAvailableMatchesTheAllocator(t *testing.T) {
	entries := []string{"10.225.51.0/24", "10.225.52.7", "10.225.52.10-10.225.52.12", "10.225.53.0/31", "10.225.54.0/30"}
	pool := testPool("p", entries...)
	claims := []*v1alpha1.AllocationClaim{
		testClaim("10.225.51.0", "p"), testClaim("10.225.51.255", "p"), // pinned ends, like .54.3 below
		testClaim("10.225.51.5", "p"), testClaim("10.225.52.11", "p"), testClaim("10.225.53.1", "p"), testClaim("10.225.54.3", "p"),
	}
	st := poolStatus(pool, recount(pool, claims).tally(), nil)
	if st.Total != 254+1+3+2+2+3 || st.Allocated != 6 {
		t.Fatalf("status %d total, %d allocated; want 265, 6", st.Total, st.Allocated)
	}
	idx := ipam.NewIndex()
	for _, c := range claims {
		idx.Mark(netip.MustParseAddr(c.Spec.Address))
	}
	p, err := ipam.NewPool("p", entries)
	if err != nil {
		t.Fatal(err)
	}
	var handed int64
	for {
		if _, ok := idx.Take([]ipam.Pool{p}); !ok {
			break
		}
		handed++
	}
	if handed != st.Available {
		t.Errorf("the allocator hands out %d addresses, the status says %d are available", handed, st.Available)
	}
}
