package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/framework"
)

// TestIPv6Allocation: on a network with an IPv4 and an IPv6 pool, IPv6 ElasticIPs take
// the lowest free IPv6 addresses (the /64's Subnet-Router anycast address left out) under
// claims named with '-' for ':', IPv4 ones keep to the IPv4 pool, a requested IPv6
// address is honoured, and an IPv6 ElasticIP on an IPv4-only network waits, saying why.
func TestIPv6Allocation(t *testing.T) {
	cp := framework.Shared(t)
	startController(t, cp, "controller")
	ns := cp.NewNamespace(t, "ipv6")
	ctx := context.Background()
	j := cp.Juneau.JuneauV1alpha1()
	network(t, cp, "dual-net", v1alpha1.AdvertiseARP, "10.225.73.0/24")
	if _, err := j.AddressPools().Create(ctx, &v1alpha1.AddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: "dual-net-pool6"},
		Spec:       v1alpha1.AddressPoolSpec{AdvertiseMode: v1alpha1.AdvertiseARP, Addresses: []string{"fd00:225:73::/64"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	net, err := j.ExternalNetworks().Get(ctx, "dual-net", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	net.Spec.AddressPools = append(net.Spec.AddressPools, "dual-net-pool6")
	if _, err := j.ExternalNetworks().Update(ctx, net, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	network(t, cp, "v4-net", v1alpha1.AdvertiseARP, "10.225.74.0/24")

	create := func(name, network, requested string, family v1alpha1.IPFamily) {
		t.Helper()
		if _, err := j.ElasticIPs(ns).Create(ctx, &v1alpha1.ElasticIP{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       v1alpha1.ElasticIPSpec{ExternalNetwork: network, RequestedIP: requested, IPFamily: family},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	allocated := phaseReason(v1alpha1.ElasticIPAvailable, v1alpha1.ConditionAllocated, v1alpha1.ReasonAllocated)
	create("six-a", "dual-net", "", v1alpha1.IPv6)
	if got := waitEIP(t, cp, ns, "six-a", "Available", allocated); got.Status.Address != "fd00:225:73::1" {
		t.Errorf("six-a got %q, want fd00:225:73::1", got.Status.Address)
	}
	create("six-b", "dual-net", "", v1alpha1.IPv6)
	if got := waitEIP(t, cp, ns, "six-b", "Available", allocated); got.Status.Address != "fd00:225:73::2" {
		t.Errorf("six-b got %q, want fd00:225:73::2", got.Status.Address)
	}
	create("four", "dual-net", "", "")
	if got := waitEIP(t, cp, ns, "four", "Available", allocated); got.Status.Address != "10.225.73.1" {
		t.Errorf("four got %q, want 10.225.73.1", got.Status.Address)
	}
	create("pinned", "dual-net", "fd00:225:73:0:ffff::5", v1alpha1.IPv6)
	if got := waitEIP(t, cp, ns, "pinned", "Available", allocated); got.Status.Address != "fd00:225:73:0:ffff::5" {
		t.Errorf("pinned got %q", got.Status.Address)
	}
	claims := claimsOf(t, cp, ns)
	for name, addr := range map[string]string{"fd00-225-73--1": "fd00:225:73::1", "fd00-225-73--2": "fd00:225:73::2",
		"fd00-225-73-0-ffff--5": "fd00:225:73:0:ffff::5", "10.225.73.1": "10.225.73.1"} {
		if c, ok := claims[name]; !ok || c.Spec.Address != addr {
			t.Errorf("claim %s = %+v, want one for %s", name, c.Spec, addr)
		}
	}
	if len(claims) != 4 {
		t.Errorf("claims %v, want 4", sortedKeys(claims))
	}

	create("lost", "v4-net", "", v1alpha1.IPv6)
	lost := waitEIP(t, cp, ns, "lost", "Pending/NoAddressAvailable", phaseReason(v1alpha1.ElasticIPPending, v1alpha1.ConditionAllocated, v1alpha1.ReasonNoAddressAvailable))
	if msg := condition(lost, v1alpha1.ConditionAllocated).Message; !strings.Contains(msg, `ExternalNetwork "v4-net" has no IPv6 AddressPool`) {
		t.Errorf("message %q does not say the network has no IPv6 pool", msg)
	}

	// The pool status counts a /64 without overflowing.
	framework.Eventually(t, "dual-net-pool6 status", func(ctx context.Context) (bool, string) {
		p, err := j.AddressPools().Get(ctx, "dual-net-pool6", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Allocated == 3 && p.Status.Total == 1<<63-1 && p.Status.Available == 1<<63-1-3,
			fmt.Sprintf("total %d allocated %d available %d", p.Status.Total, p.Status.Allocated, p.Status.Available)
	})
}
