package controller

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/framework"
)

// TestExhaustedPoolThenFreed: a full pool leaves the next ElasticIP Pending with
// NoAddressAvailable; it is allocated as soon as a claim is freed.
func TestExhaustedPoolThenFreed(t *testing.T) {
	cp := framework.Shared(t)
	startController(t, cp, "controller")
	ns := cp.NewNamespace(t, "exhaust")
	network(t, cp, "exhaust-net", v1alpha1.AdvertiseARP, "10.225.70.10-10.225.70.11")

	createEIP(t, cp, ns, "a", "exhaust-net", "")
	createEIP(t, cp, ns, "b", "exhaust-net", "")
	a := waitEIP(t, cp, ns, "a", "Available", phaseReason(v1alpha1.ElasticIPAvailable, v1alpha1.ConditionAllocated, v1alpha1.ReasonAllocated))
	b := waitEIP(t, cp, ns, "b", "Available", phaseReason(v1alpha1.ElasticIPAvailable, v1alpha1.ConditionAllocated, v1alpha1.ReasonAllocated))
	if got := []string{a.Status.Address, b.Status.Address}; !(got[0] == "10.225.70.10" && got[1] == "10.225.70.11" || got[0] == "10.225.70.11" && got[1] == "10.225.70.10") {
		t.Fatalf("addresses %v, want the two pool addresses", got)
	}
	createEIP(t, cp, ns, "c", "exhaust-net", "")
	c := waitEIP(t, cp, ns, "c", "Pending/NoAddressAvailable", phaseReason(v1alpha1.ElasticIPPending, v1alpha1.ConditionAllocated, v1alpha1.ReasonNoAddressAvailable))
	if msg := condition(c, v1alpha1.ConditionAllocated).Message; !strings.Contains(msg, `"exhaust-net-pool"`) {
		t.Errorf("NoAddressAvailable message %q does not name the pool", msg)
	}

	if err := cp.Juneau.JuneauV1alpha1().ElasticIPs(ns).Delete(context.Background(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c = waitEIP(t, cp, ns, "c", "Available", phaseReason(v1alpha1.ElasticIPAvailable, v1alpha1.ConditionAllocated, v1alpha1.ReasonAllocated))
	if c.Status.Address != a.Status.Address {
		t.Errorf("c got %s, want the freed %s", c.Status.Address, a.Status.Address)
	}
	claims := claimsOf(t, cp, ns)
	if len(claims) != 2 || claims[c.Status.Address].Spec.Consumer.Name != "c" || claims[b.Status.Address].Spec.Consumer.Name != "b" {
		t.Errorf("claims = %v, want one for b and one for c", sortedKeys(claims))
	}
}

// TestRequestedIP: requestedIP is honoured; a second ElasticIP asking for it waits
// Pending/AddressInUse naming the holder; an address outside the pools is an Error.
func TestRequestedIP(t *testing.T) {
	cp := framework.Shared(t)
	startController(t, cp, "controller")
	ns := cp.NewNamespace(t, "requested")
	network(t, cp, "requested-net", v1alpha1.AdvertiseARP, "10.225.71.0/24")

	createEIP(t, cp, ns, "pinned", "requested-net", "10.225.71.0") // network address: pinnable
	pinned := waitEIP(t, cp, ns, "pinned", "Available", phaseReason(v1alpha1.ElasticIPAvailable, v1alpha1.ConditionAllocated, v1alpha1.ReasonAllocated))
	if pinned.Status.Address != "10.225.71.0" {
		t.Errorf("pinned got %q", pinned.Status.Address)
	}
	auto := createEIP(t, cp, ns, "auto", "requested-net", "")
	_ = auto
	if got := waitEIP(t, cp, ns, "auto", "Available", phaseReason(v1alpha1.ElasticIPAvailable, v1alpha1.ConditionAllocated, v1alpha1.ReasonAllocated)); got.Status.Address != "10.225.71.1" {
		t.Errorf("automatic pick = %s, want 10.225.71.1 (network address skipped)", got.Status.Address)
	}

	createEIP(t, cp, ns, "second", "requested-net", "10.225.71.0")
	second := waitEIP(t, cp, ns, "second", "Pending/AddressInUse", phaseReason(v1alpha1.ElasticIPPending, v1alpha1.ConditionAllocated, v1alpha1.ReasonAddressInUse))
	if msg := condition(second, v1alpha1.ConditionAllocated).Message; !strings.Contains(msg, `ElasticIP "`+ns+`/pinned"`) {
		t.Errorf("AddressInUse message %q does not name the holder", msg)
	}

	createEIP(t, cp, ns, "outside", "requested-net", "10.225.72.9")
	outside := waitEIP(t, cp, ns, "outside", "Error/InvalidAddressPool", phaseReason(v1alpha1.ElasticIPError, v1alpha1.ConditionAllocated, v1alpha1.ReasonInvalidAddressPool))
	if msg := condition(outside, v1alpha1.ConditionAllocated).Message; !strings.Contains(msg, `"10.225.72.9"`) || !strings.Contains(msg, `"requested-net"`) {
		t.Errorf("message %q does not name the address and network", msg)
	}

	// Freeing the pinned address hands it to the waiting ElasticIP.
	if err := cp.Juneau.JuneauV1alpha1().ElasticIPs(ns).Delete(context.Background(), "pinned", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := waitEIP(t, cp, ns, "second", "Available", phaseReason(v1alpha1.ElasticIPAvailable, v1alpha1.ConditionAllocated, v1alpha1.ReasonAllocated)); got.Status.Address != "10.225.71.0" {
		t.Errorf("second got %s", got.Status.Address)
	}
}

// TestDependencies: a pool whose mode differs from the network's type is an Error with
// InvalidAddressPool; a missing network is an Error with MissingDependency.
func TestDependencies(t *testing.T) {
	cp := framework.Shared(t)
	startController(t, cp, "controller")
	ns := cp.NewNamespace(t, "deps")
	ctx := context.Background()
	j := cp.Juneau.JuneauV1alpha1()
	if _, err := j.AddressPools().Create(ctx, &v1alpha1.AddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: "deps-bgp-pool"},
		Spec:       v1alpha1.AddressPoolSpec{AdvertiseMode: v1alpha1.AdvertiseBGP, Addresses: []string{"10.225.73.0/28"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.ExternalNetworks().Create(ctx, &v1alpha1.ExternalNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: "deps-arp-net"},
		Spec:       v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseARP, AddressPools: []string{"deps-bgp-pool"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createEIP(t, cp, ns, "mismatch", "deps-arp-net", "")
	got := waitEIP(t, cp, ns, "mismatch", "Error/InvalidAddressPool", phaseReason(v1alpha1.ElasticIPError, v1alpha1.ConditionAllocated, v1alpha1.ReasonInvalidAddressPool))
	if msg := condition(got, v1alpha1.ConditionAllocated).Message; !strings.Contains(msg, `"deps-bgp-pool"`) {
		t.Errorf("message %q does not name the pool", msg)
	}
	createEIP(t, cp, ns, "nonet", "no-such-net", "")
	got = waitEIP(t, cp, ns, "nonet", "Error/MissingDependency", phaseReason(v1alpha1.ElasticIPError, v1alpha1.ConditionAllocated, v1alpha1.ReasonMissingDependency))
	if msg := condition(got, v1alpha1.ConditionAllocated).Message; !strings.Contains(msg, `"no-such-net"`) {
		t.Errorf("message %q does not name the network", msg)
	}
	if len(claimsOf(t, cp, ns)) != 0 {
		t.Error("an ElasticIP with broken dependencies reserved an address")
	}
}
