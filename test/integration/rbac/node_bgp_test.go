package rbac

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	metaapply "k8s.io/client-go/applyconfigurations/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	applyv1alpha1 "github.com/loutres/juneau/pkg/generated/applyconfiguration/juneau/v1alpha1"
	"github.com/loutres/juneau/test/framework"
)

// TestNodeAgentBGPWrites: with the node agent's token, the BGP writes the agent makes
// succeed (the Announced condition, its Node's BGPNodeStatus, reading and watching the
// password Secret), and everything else about BGP objects and Secrets is Forbidden.
func TestNodeAgentBGPWrites(t *testing.T) {
	cp := framework.Shared(t)
	kube, jn := nodeClients(t, cp)
	ctx := testContext(t, time.Minute)
	admin := cp.Juneau.JuneauV1alpha1()

	ad, err := admin.BGPAdvertisements().Create(ctx, &v1alpha1.BGPAdvertisement{
		ObjectMeta: metav1.ObjectMeta{Name: "rbac-node-bgp"},
		Spec:       v1alpha1.BGPAdvertisementSpec{ExternalNetwork: "bgp-net", Address: "10.225.53.7", NodeName: "node-a"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.BGPAdvertisements().Delete(context.Background(), ad.Name, metav1.DeleteOptions{}) })
	secrets := cp.Kube.CoreV1().Secrets(framework.SystemNamespace)
	for _, name := range []string{v1alpha1.BGPPasswordSecret, "rbac-other-secret"} {
		if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
			StringData: map[string]string{"tor-a": "s3cret"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = secrets.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}

	forbidden := map[string]error{}
	_, forbidden["create a BGPPeer"] = jn.JuneauV1alpha1().BGPPeers().Create(ctx, &v1alpha1.BGPPeer{
		ObjectMeta: metav1.ObjectMeta{Name: "rogue"},
		Spec:       v1alpha1.BGPPeerSpec{PeerAddress: "10.225.51.1", PeerASN: 64512, MyASN: 64513},
	}, metav1.CreateOptions{})
	_, forbidden["create a BGPAdvertisement"] = jn.JuneauV1alpha1().BGPAdvertisements().Create(ctx, &v1alpha1.BGPAdvertisement{
		ObjectMeta: metav1.ObjectMeta{Name: "rogue"},
		Spec:       v1alpha1.BGPAdvertisementSpec{ExternalNetwork: "bgp-net", Address: "10.225.53.8", NodeName: "node-a"},
	}, metav1.CreateOptions{})
	_, forbidden["patch a BGPAdvertisement's spec"] = jn.JuneauV1alpha1().BGPAdvertisements().Patch(ctx, ad.Name,
		types.MergePatchType, []byte(`{"spec":{"nodeName":"node-b"}}`), metav1.PatchOptions{})
	forbidden["delete a BGPAdvertisement"] = jn.JuneauV1alpha1().BGPAdvertisements().Delete(ctx, ad.Name, metav1.DeleteOptions{})
	forbidden["delete a BGPNodeStatus"] = jn.JuneauV1alpha1().BGPNodeStatuses().Delete(ctx, "node-b", metav1.DeleteOptions{})
	_, forbidden["read another Secret of juneau-system"] = kube.CoreV1().Secrets(framework.SystemNamespace).Get(ctx, "rbac-other-secret", metav1.GetOptions{})
	_, forbidden["list the Secrets of juneau-system"] = kube.CoreV1().Secrets(framework.SystemNamespace).List(ctx, metav1.ListOptions{})
	for what, err := range forbidden {
		if !apierrors.IsForbidden(err) {
			t.Errorf("node agent may %s: err = %v, want Forbidden", what, err)
		}
	}

	// The Announced condition, as the agent writes it.
	cond := metaapply.Condition().WithType(v1alpha1.ConditionAnnounced).WithStatus(metav1.ConditionTrue).
		WithReason(v1alpha1.ReasonAnnounced).WithMessage("announced to 1 of 1 Established peers").
		WithObservedGeneration(ad.Generation).WithLastTransitionTime(metav1.Now())
	if _, err := jn.JuneauV1alpha1().BGPAdvertisements().ApplyStatus(ctx,
		applyv1alpha1.BGPAdvertisement(ad.Name).WithStatus(applyv1alpha1.BGPAdvertisementStatus().WithConditions(cond)),
		metav1.ApplyOptions{FieldManager: v1alpha1.FieldManagerNode, Force: true}); err != nil {
		t.Errorf("node agent cannot apply the Announced condition: %v", err)
	}
	got, err := admin.BGPAdvertisements().Get(ctx, ad.Name, metav1.GetOptions{})
	if err != nil || !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionAnnounced) || got.Spec.NodeName != "node-a" {
		t.Errorf("BGPAdvertisement after the agent's writes: %+v %v, want Announced=True and nodeName node-a", got, err)
	}

	// Its Node's sessions: created, then updated, by server-side apply.
	for _, established := range []int32{0, 1} {
		status := applyv1alpha1.BGPNodeStatus("node-a").WithStatus(applyv1alpha1.BGPNodeState().
			WithPeersConfigured(1).WithPeersEstablished(established))
		if _, err := jn.JuneauV1alpha1().BGPNodeStatuses().Apply(ctx, status,
			metav1.ApplyOptions{FieldManager: v1alpha1.FieldManagerNode, Force: true}); err != nil {
			t.Fatalf("node agent cannot apply its BGPNodeStatus (established %d): %v", established, err)
		}
	}
	t.Cleanup(func() { _ = admin.BGPNodeStatuses().Delete(context.Background(), "node-a", metav1.DeleteOptions{}) })
	if s, err := admin.BGPNodeStatuses().Get(ctx, "node-a", metav1.GetOptions{}); err != nil || s.Status.PeersEstablished != 1 {
		t.Errorf("BGPNodeStatus node-a: %+v %v, want 1 established", s, err)
	}

	// The password Secret: read, and watched by name.
	if s, err := kube.CoreV1().Secrets(framework.SystemNamespace).Get(ctx, v1alpha1.BGPPasswordSecret, metav1.GetOptions{}); err != nil || string(s.Data["tor-a"]) != "s3cret" {
		t.Errorf("node agent reading Secret %s: %v", v1alpha1.BGPPasswordSecret, err)
	}
	byName := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", v1alpha1.BGPPasswordSecret).String()}
	if l, err := kube.CoreV1().Secrets(framework.SystemNamespace).List(ctx, byName); err != nil || len(l.Items) != 1 {
		t.Errorf("node agent listing Secret %s by name: %v", v1alpha1.BGPPasswordSecret, err)
	}
	w, err := kube.CoreV1().Secrets(framework.SystemNamespace).Watch(ctx, byName)
	if err != nil {
		t.Errorf("node agent watching Secret %s by name: %v", v1alpha1.BGPPasswordSecret, err)
	} else {
		w.Stop()
	}
}
