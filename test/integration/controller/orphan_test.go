package controller

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/framework"
)

// TestOrphanClaims: a claim whose consumer does not exist is deleted after the grace
// period (2s here); a claim whose consumer exists stays.
func TestOrphanClaims(t *testing.T) {
	cp := framework.Shared(t)
	startController(t, cp, "controller")
	ns := cp.NewNamespace(t, "orphan")
	network(t, cp, "orphan-net", v1alpha1.AdvertiseARP, "10.225.57.0/24")
	live := createEIP(t, cp, ns, "live", "orphan-net", "")
	waitEIP(t, cp, ns, "live", "Available", phaseReason(v1alpha1.ElasticIPAvailable, v1alpha1.ConditionAllocated, v1alpha1.ReasonAllocated))
	claims := cp.Juneau.JuneauV1alpha1().AllocationClaims()
	ctx := context.Background()
	created := time.Now()
	if _, err := claims.Create(ctx, &v1alpha1.AllocationClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "10.225.57.200"},
		Spec: v1alpha1.AllocationClaimSpec{AddressPool: "orphan-net-pool", Address: "10.225.57.200",
			Consumer: v1alpha1.ConsumerReference{Kind: v1alpha1.ConsumerKindElasticIP, Namespace: ns, Name: "gone", UID: "no-such-uid"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := claims.Get(ctx, "10.225.57.200", metav1.GetOptions{})
		return err != nil, nil
	}); err != nil {
		t.Fatal("the orphan claim was never deleted")
	}
	// creationTimestamp has whole seconds, so the grace may end up to 1s early.
	if age := time.Since(created); age < time.Second {
		t.Errorf("the orphan claim went after %s, before the 2s grace period", age)
	}
	eip, err := cp.Juneau.JuneauV1alpha1().ElasticIPs(ns).Get(ctx, "live", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := claims.Get(ctx, eip.Status.Address, metav1.GetOptions{}); err != nil || c.Spec.Consumer.UID != string(live.UID) {
		t.Errorf("the live ElasticIP's claim: %v %v", c, err)
	}
}
