package realcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/cluster"
)

// testNodeScope: with the credentials the kubelet gives the node agent's Pod (a token of
// its ServiceAccount bound to that Pod, which names the Pod's Node), the agent may set
// the readiness condition of a Pod on its own Node, and the API server refuses it for a
// Pod on the other Node with the node-scope policy's message. The writes are dry runs.
func testNodeScope(t *testing.T, c *cluster.Cluster) {
	ctx := testContext(t, time.Minute)
	list, err := c.Kube.CoreV1().Pods(cluster.NodeNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=node"})
	if err != nil {
		t.Fatal(err)
	}
	agentOn := map[string]*corev1.Pod{}
	for i, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			agentOn[p.Spec.NodeName] = &list.Items[i]
		}
	}
	if agentOn["node-a"] == nil || agentOn["node-b"] == nil {
		t.Fatalf("no running agent on each Node: %v", agentOn)
	}
	for node, other := range map[string]string{"node-a": "node-b", "node-b": "node-a"} {
		kube := podClient(t, c, agentOn[node])
		if err := dryRunGate(ctx, kube, agentOn[node]); err != nil {
			t.Errorf("the agent of %s setting a condition of a Pod on its own Node: %v", node, err)
		}
		target := agentOn[other]
		want := fmt.Sprintf("ValidatingAdmissionPolicy 'juneau-node-scope' with binding 'juneau-node-scope' denied request: "+
			"Pod %q is on Node %q: the node agent of Node %q writes only the objects of its own Node", cluster.NodeNamespace+"/"+target.Name, other, node)
		if err := dryRunGate(ctx, kube, target); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("the agent of %s setting a condition of a Pod on %s: err = %v, want %q", node, other, err, want)
		}
	}
}

// podClient acts with the token the kubelet projects into the Pod (a token of its
// ServiceAccount bound to the Pod), as a process of the Pod, or a thief of its token, would.
func podClient(t *testing.T, c *cluster.Cluster, pod *corev1.Pod) kubernetes.Interface {
	t.Helper()
	tr, err := c.Kube.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(context.Background(), pod.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600)),
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(c.Config)
	cfg.BearerToken = tr.Status.Token
	return kubernetes.NewForConfigOrDie(cfg)
}

// dryRunGate writes juneau's readiness condition on pod as the agent does, in a dry run.
func dryRunGate(ctx context.Context, kube kubernetes.Interface, pod *corev1.Pod) error {
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{{
		Type: v1alpha1.PodConditionElasticIP, Status: corev1.ConditionFalse, Reason: v1alpha1.ReasonNotProgrammed,
		LastTransitionTime: metav1.Now(),
	}}}})
	_, err := kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{FieldManager: v1alpha1.FieldManagerNode, DryRun: []string{metav1.DryRunAll}}, "status")
	return err
}
