package e2e

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/e2e/harness"
)

// TestReleaseStrategies: with a duration the ElasticIP stays that long after its Pod
// is gone, then goes; with Never it stays; a StatefulSet Pod re-created under the same
// name gets the same address back.
func TestReleaseStrategies(t *testing.T) {
	c, ns := setup(t)
	annotateDefault(t, c)
	ctx := testContext(t)
	claims := c.CP.Juneau.JuneauV1alpha1().AllocationClaims()
	start := func(name, node string, ann map[string]string, owners []metav1.OwnerReference) (*harness.Pod, string) {
		t.Helper()
		ann[v1alpha1.AnnotationPodWithEIP] = "true"
		p := c.RunPod(harness.PodSpec{Namespace: ns, Name: name, Node: node, Annotations: ann, OwnerReferences: owners})
		var addr string
		c.WaitGone(name+"'s address written back", func(ctx context.Context) bool {
			pod, err := c.CP.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			addr = pod.Annotations[v1alpha1.AnnotationAllocatedEIPAddr]
			return err == nil && addr != ""
		})
		return p, addr
	}
	held := func(addr string) bool {
		_, err := claims.Get(ctx, addr, metav1.GetOptions{})
		return err == nil
	}

	delayed, delayedAddr := start("delayed", "node-a", map[string]string{v1alpha1.AnnotationReleaseStrategy: "4s"}, nil)
	never, neverAddr := start("kept", "node-a", map[string]string{v1alpha1.AnnotationReleaseStrategy: v1alpha1.ReleaseNever}, nil)
	sts := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: types.UID("db-uid"), Controller: ptr.To(true)}}
	db, dbAddr := start("db-0", "node-b", map[string]string{}, sts)

	gone := time.Now()
	delayed.Gone()
	never.Gone()
	db.Gone()
	if !held(delayedAddr) {
		t.Errorf("the 4s ElasticIP %s was released at once", delayedAddr)
	}
	c.WaitGone("the 4s ElasticIP released", func(context.Context) bool { return !held(delayedAddr) })
	if since := time.Since(gone); since < 3*time.Second {
		t.Errorf("the 4s ElasticIP went after %s", since)
	}
	if !held(neverAddr) {
		t.Errorf("the Never ElasticIP %s was released", neverAddr)
	}

	again, againAddr := start("db-0", "node-a", map[string]string{}, sts)
	if againAddr != dbAddr {
		t.Errorf("the re-created StatefulSet Pod got %s, want its address %s back", againAddr, dbAddr)
	}
	c.ServeTCP(again.NS, "db-0", 80)
	c.EventuallyDial(c.Client, againAddr, 80, "db-0")
}
