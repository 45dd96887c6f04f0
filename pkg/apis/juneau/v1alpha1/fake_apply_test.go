package v1alpha1_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metaapply "k8s.io/client-go/applyconfigurations/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	applyv1alpha1 "github.com/loutres/juneau/pkg/generated/applyconfiguration/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned/fake"
)

// TestFakeClientsetServerSideApply proves the generated fake clientset applies our kinds
// with field ownership, which controller unit tests rely on: two field managers each own
// their condition types in one conditions list (listType=map keyed by type).
func TestFakeClientsetServerSideApply(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	adverts := client.JuneauV1alpha1().ARPAdvertisements()

	spec := applyv1alpha1.ARPAdvertisement("eip-default-nginx-eip").
		WithSpec(applyv1alpha1.ARPAdvertisementSpec().
			WithExternalNetwork("ext-net").WithAddress("10.225.51.5").WithNodeName("node-a"))
	if _, err := adverts.Apply(ctx, spec, metav1.ApplyOptions{FieldManager: v1alpha1.FieldManagerController}); err != nil {
		t.Fatalf("apply spec: %v", err)
	}

	status := applyv1alpha1.ARPAdvertisement("eip-default-nginx-eip").
		WithStatus(applyv1alpha1.ARPAdvertisementStatus().WithConditions(
			metaapply.Condition().WithType(v1alpha1.ConditionAnswering).WithStatus(metav1.ConditionTrue).
				WithReason(v1alpha1.ReasonAnswering).WithMessage("on eth1").WithLastTransitionTime(metav1.Now())))
	if _, err := adverts.ApplyStatus(ctx, status, metav1.ApplyOptions{FieldManager: v1alpha1.FieldManagerNode}); err != nil {
		t.Fatalf("apply status: %v", err)
	}

	// The controller moves the advertisement: its apply changes nodeName only.
	moved := applyv1alpha1.ARPAdvertisement("eip-default-nginx-eip").
		WithSpec(applyv1alpha1.ARPAdvertisementSpec().
			WithExternalNetwork("ext-net").WithAddress("10.225.51.5").WithNodeName("node-b"))
	got, err := adverts.Apply(ctx, moved, metav1.ApplyOptions{FieldManager: v1alpha1.FieldManagerController})
	if err != nil {
		t.Fatalf("apply move: %v", err)
	}
	if got.Spec.NodeName != "node-b" {
		t.Errorf("nodeName = %q, want node-b", got.Spec.NodeName)
	}
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != v1alpha1.ConditionAnswering {
		t.Errorf("the node agent's condition was lost: %+v", got.Status.Conditions)
	}
	managers := map[string]bool{}
	for _, mf := range got.ManagedFields {
		managers[mf.Manager] = true
	}
	if !managers[v1alpha1.FieldManagerController] || !managers[v1alpha1.FieldManagerNode] {
		t.Errorf("managed fields %v, want both %s and %s", managers, v1alpha1.FieldManagerController, v1alpha1.FieldManagerNode)
	}

	// A conflicting apply by another manager on an owned field is refused, as on a real server.
	other := applyv1alpha1.ARPAdvertisement("eip-default-nginx-eip").
		WithSpec(applyv1alpha1.ARPAdvertisementSpec().WithNodeName("node-c"))
	if _, err := adverts.Apply(ctx, other, metav1.ApplyOptions{FieldManager: "someone-else"}); err == nil {
		t.Error("conflicting apply by another field manager succeeded; want a conflict")
	}
}
