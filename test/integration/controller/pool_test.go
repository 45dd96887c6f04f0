package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/framework"
)

// TestPoolMadeAgainSmaller: tiny-pool with two addresses, both reserved, is deleted (no
// webhook runs here to refuse it) and made again with one. The ElasticIP holding the
// dropped address keeps it and stays Available, its Allocated condition True with the
// reason Allocated, its message naming the pool that no longer holds the address, the
// pool counts only its own address (it showed TOTAL 1, ALLOCATED 2, AVAILABLE 0), and
// once released the dropped address is never handed out again.
func TestPoolMadeAgainSmaller(t *testing.T) {
	cp := framework.Shared(t)
	startController(t, cp, "controller")
	ns := cp.NewNamespace(t, "shrink")
	ctx := testContext(t, 2*time.Minute)
	j := cp.Juneau.JuneauV1alpha1()
	pool := ns + "-tiny-pool"
	mkPool := func(addresses ...string) {
		t.Helper()
		if _, err := j.AddressPools().Create(ctx, &v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: pool},
			Spec: v1alpha1.AddressPoolSpec{AdvertiseMode: v1alpha1.AdvertiseARP, Addresses: addresses}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mkPool("10.225.77.5-10.225.77.6")
	if _, err := j.ExternalNetworks().Create(ctx, &v1alpha1.ExternalNetwork{ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseARP, AddressPools: []string{pool}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = j.ExternalNetworks().Delete(context.Background(), ns, metav1.DeleteOptions{})
		_ = j.AddressPools().Delete(context.Background(), pool, metav1.DeleteOptions{})
	})
	createEIP(t, cp, ns, "keep", ns, "10.225.77.5")
	createEIP(t, cp, ns, "dropped", ns, "10.225.77.6")
	for _, name := range []string{"keep", "dropped"} {
		waitEIP(t, cp, ns, name, "Available", phaseReason(v1alpha1.ElasticIPAvailable, v1alpha1.ConditionAllocated, v1alpha1.ReasonAllocated))
	}

	if err := j.AddressPools().Delete(ctx, pool, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the pool gone", func(ctx context.Context) (bool, string) {
		_, err := j.AddressPools().Get(ctx, pool, metav1.GetOptions{})
		return err != nil, ""
	})
	mkPool("10.225.77.5")

	eip := waitEIP(t, cp, ns, "dropped", "Available, Allocated saying its pool no longer holds the address", func(e *v1alpha1.ElasticIP) bool {
		c := condition(e, v1alpha1.ConditionAllocated)
		return e.Status.Phase == v1alpha1.ElasticIPAvailable && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonAllocated &&
			strings.Contains(c.Message, `address "10.225.77.6" reserved from AddressPool "`+pool+`", which no longer holds it`)
	})
	if eip.Status.Address != "10.225.77.6" {
		t.Errorf("ElasticIP dropped: %s", statusString(eip))
	}
	waitEIP(t, cp, ns, "keep", "still Available", phaseReason(v1alpha1.ElasticIPAvailable, v1alpha1.ConditionAllocated, v1alpha1.ReasonAllocated))
	framework.Eventually(t, "kubectl get addresspool counting only its own address", func(ctx context.Context) (bool, string) {
		r := cp.Kubectl(ctx, "", "get", "addresspool", pool, "--no-headers")
		fields := strings.Fields(r.Stdout)
		// NAME MODE TOTAL ALLOCATED AVAILABLE AGE
		return r.Err == nil && len(fields) >= 5 && fields[2] == "1" && fields[3] == "1" && fields[4] == "0", r.Stdout
	})

	// Released, the dropped address is never handed out again.
	if err := j.ElasticIPs(ns).Delete(ctx, "dropped", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the dropped address released", func(ctx context.Context) (bool, string) {
		_, err := j.AllocationClaims().Get(ctx, "10.225.77.6", metav1.GetOptions{})
		return err != nil, ""
	})
	createEIP(t, cp, ns, "later", ns, "")
	got := waitEIP(t, cp, ns, "later", "Pending/NoAddressAvailable",
		phaseReason(v1alpha1.ElasticIPPending, v1alpha1.ConditionAllocated, v1alpha1.ReasonNoAddressAvailable))
	if got.Status.Address != "" {
		t.Errorf("a new ElasticIP got %q", got.Status.Address)
	}
}
