package rbac

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metaapply "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	applyv1alpha1 "github.com/loutres/juneau/pkg/generated/applyconfiguration/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	"github.com/loutres/juneau/test/framework"
)

// nodeClients are clients acting as the node agent of node-a: its ServiceAccount, with a
// token bound to Node node-a (see node_scope_test.go for what that binding allows).
func nodeClients(t *testing.T, cp *framework.ControlPlane) (kubernetes.Interface, versioned.Interface) {
	t.Helper()
	cp.ApplyRBAC(t)
	ensureNodes(t, cp, "node-a")
	cfg := cp.NodeBoundConfig(t, framework.NodeNamespace, framework.NodeServiceAccount, "node-a")
	return kubernetes.NewForConfigOrDie(cfg), versioned.NewForConfigOrDie(cfg)
}

// TestNodeAgentWrites: with the node agent's token, the two status writes the agent
// makes succeed, and creating or changing what the controller owns is Forbidden.
func TestNodeAgentWrites(t *testing.T) {
	cp := framework.Shared(t)
	kube, jn := nodeClients(t, cp)
	ctx := testContext(t, time.Minute)
	ns := cp.NewNamespace(t, "rbac-node")
	ad, pod := nodeFixtures(t, cp, ns)

	forbidden := map[string]error{}
	_, forbidden["create an ElasticIP"] = jn.JuneauV1alpha1().ElasticIPs(ns).Create(ctx, &v1alpha1.ElasticIP{
		ObjectMeta: metav1.ObjectMeta{Name: "stolen"}, Spec: v1alpha1.ElasticIPSpec{ExternalNetwork: "ext-net"},
	}, metav1.CreateOptions{})
	_, forbidden["create an AllocationClaim"] = jn.JuneauV1alpha1().AllocationClaims().Create(ctx, &v1alpha1.AllocationClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "10.225.51.250"},
		Spec: v1alpha1.AllocationClaimSpec{AddressPool: "pool", Address: "10.225.51.250",
			Consumer: v1alpha1.ConsumerReference{Kind: v1alpha1.ConsumerKindElasticIP, Namespace: ns, Name: "stolen", UID: "1"}},
	}, metav1.CreateOptions{})
	moved := ad.DeepCopy()
	moved.Spec.NodeName = "node-b"
	_, forbidden["update an ARPAdvertisement's spec"] = jn.JuneauV1alpha1().ARPAdvertisements().Update(ctx, moved, metav1.UpdateOptions{})
	_, forbidden["patch an ARPAdvertisement's spec"] = jn.JuneauV1alpha1().ARPAdvertisements().Patch(ctx, ad.Name,
		types.MergePatchType, []byte(`{"spec":{"nodeName":"node-b"}}`), metav1.PatchOptions{})
	forbidden["delete an ARPAdvertisement"] = jn.JuneauV1alpha1().ARPAdvertisements().Delete(ctx, ad.Name, metav1.DeleteOptions{})
	_, forbidden["patch a Pod"] = kube.CoreV1().Pods(ns).Patch(ctx, pod.Name, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
	forbidden["delete a Pod"] = kube.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{})
	_, forbidden["read a Secret"] = kube.CoreV1().Secrets(ns).Get(ctx, "any", metav1.GetOptions{})
	for what, err := range forbidden {
		if !apierrors.IsForbidden(err) {
			t.Errorf("node agent may %s: err = %v, want Forbidden", what, err)
		}
	}

	// The Answering condition, exactly as the agent writes it.
	cond := metaapply.Condition().WithType(v1alpha1.ConditionAnswering).WithStatus(metav1.ConditionTrue).
		WithReason(v1alpha1.ReasonAnswering).WithMessage("eth0").WithObservedGeneration(ad.Generation).WithLastTransitionTime(metav1.Now())
	if _, err := jn.JuneauV1alpha1().ARPAdvertisements().ApplyStatus(ctx,
		applyv1alpha1.ARPAdvertisement(ad.Name).WithStatus(applyv1alpha1.ARPAdvertisementStatus().WithConditions(cond)),
		metav1.ApplyOptions{FieldManager: v1alpha1.FieldManagerNode, Force: true}); err != nil {
		t.Errorf("node agent cannot apply the Answering condition: %v", err)
	}
	got, err := cp.Juneau.JuneauV1alpha1().ARPAdvertisements().Get(ctx, ad.Name, metav1.GetOptions{})
	if err != nil || !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionAnswering) || got.Spec.NodeName != "node-a" {
		t.Errorf("ARPAdvertisement after the agent's writes: %+v %v, want Answering=True and nodeName node-a", got, err)
	}

	// The readiness-gate condition, a strategic merge patch of pods/status.
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{{
		Type: v1alpha1.PodConditionElasticIP, Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonProgrammed,
		LastTransitionTime: metav1.Now(),
	}}}})
	if _, err := kube.CoreV1().Pods(ns).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{FieldManager: v1alpha1.FieldManagerNode}, "status"); err != nil {
		t.Errorf("node agent cannot patch pods/status: %v", err)
	}
	gotPod, err := cp.Kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil || !hasPodCondition(gotPod, v1alpha1.PodConditionElasticIP, corev1.ConditionTrue) {
		t.Errorf("Pod after the agent's patch: %+v %v, want condition %s=True", gotPod.Status.Conditions, err, v1alpha1.PodConditionElasticIP)
	}
}

// nodeFixtures creates, as the administrator, an ARPAdvertisement answered by node-a
// and a Pod bound to node-a.
func nodeFixtures(t *testing.T, cp *framework.ControlPlane, ns string) (*v1alpha1.ARPAdvertisement, *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	ad, err := cp.Juneau.JuneauV1alpha1().ARPAdvertisements().Create(ctx, &v1alpha1.ARPAdvertisement{
		ObjectMeta: metav1.ObjectMeta{Name: advertisement.PreferredName(ns, "web")},
		Spec:       v1alpha1.ARPAdvertisementSpec{ExternalNetwork: "ext-net", Address: "10.225.51.77", NodeName: "node-a"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Juneau.JuneauV1alpha1().ARPAdvertisements().Delete(context.Background(), ad.Name, metav1.DeleteOptions{})
	})
	pod, err := cp.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/pause:1"}},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: v1alpha1.PodConditionElasticIP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ad, pod
}

func hasPodCondition(pod *corev1.Pod, typ corev1.PodConditionType, status corev1.ConditionStatus) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == typ {
			return c.Status == status
		}
	}
	return false
}

// TestNodeAgentAccessTable: what the node agent's ServiceAccount may do, as the
// authorizer answers: reads of what it programs and the two status patches, nothing else.
func TestNodeAgentAccessTable(t *testing.T) {
	cp := framework.Shared(t)
	kube, jn := nodeClients(t, cp)
	// What the agent's informer does: every attachment of the cluster, no selector.
	if _, err := jn.JuneauV1alpha1().ElasticIPAttachments(metav1.NamespaceAll).List(testContext(t, time.Minute), metav1.ListOptions{}); err != nil {
		t.Errorf("node agent cannot list the attachments of every namespace: %v", err)
	}
	var allowed []access
	// In every namespace: the agent lists and watches every Node's attachments, for
	// in-cluster clients, without a field selector.
	for _, r := range []string{"elasticips", "externalnetworks", "elasticipattachments", "networkinterfaces", "arpadvertisements", "bgpadvertisements", "bgppeers"} {
		allowed = append(allowed, every(juneau, r, "list", "watch")...)
	}
	allowed = append(allowed, every(juneau, "bgpnodestatuses", "get", "create", "patch")...)
	for _, verb := range []string{"get", "list", "watch"} {
		allowed = append(allowed, access{verb: verb, resource: "secrets", namespace: framework.SystemNamespace, name: v1alpha1.BGPPasswordSecret})
	}
	allowed = append(allowed, every(core, "nodes", "get", "list", "watch")...)
	allowed = append(allowed, every(core, "pods", "list", "watch")...)
	allowed = append(allowed,
		access{verb: "list", group: "networking.k8s.io", resource: "servicecidrs"},
		access{verb: "watch", group: "networking.k8s.io", resource: "servicecidrs"},
		juneau("patch", "arpadvertisements/status"),
		juneau("patch", "bgpadvertisements/status"),
		core("patch", "pods/status"),
		juneau("patch", "networkinterfaces/status"),
		// At SIGTERM: is its DaemonSet being deleted (an uninstall)?
		access{verb: "get", group: "apps", resource: "daemonsets", namespace: framework.NodeNamespace, name: "juneau-node"},
		// Its heartbeat Lease (the node-scope policy keeps it to its own).
		access{verb: "get", group: "coordination.k8s.io", resource: "leases", namespace: framework.NodeNamespace, name: v1alpha1.NodeLeasePrefix + "node-a"},
		access{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: framework.NodeNamespace},
		access{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: framework.NodeNamespace, name: v1alpha1.NodeLeasePrefix + "node-a"},
	)
	allowed = append(allowed, metricsReviews...)
	checkAccess(t, kube, true, allowed)

	var denied []access
	for _, r := range []string{"elasticips", "allocationclaims", "elasticipattachments", "networkinterfaces", "arpadvertisements", "addresspools", "externalnetworks", "bgpadvertisements", "bgppeers"} {
		denied = append(denied, every(juneau, r, "create", "update", "patch", "delete")...)
	}
	denied = append(denied, every(juneau, "bgpnodestatuses", "update", "delete", "list", "watch")...)
	for _, verb := range []string{"get", "list", "watch", "update"} {
		// Another Secret of the installation's namespace (the webhook's serving key).
		denied = append(denied, access{verb: verb, resource: "secrets", namespace: framework.SystemNamespace, name: "juneau-webhook-tls"})
	}
	denied = append(denied,
		access{verb: "update", resource: "secrets", namespace: framework.SystemNamespace, name: v1alpha1.BGPPasswordSecret},
		access{verb: "list", resource: "secrets", namespace: framework.SystemNamespace},
		juneau("update", "bgpadvertisements/status"),
		access{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: "default"},
		access{verb: "delete", group: "coordination.k8s.io", resource: "leases", namespace: framework.NodeNamespace, name: v1alpha1.NodeLeasePrefix + "node-a"},
		access{verb: "list", group: "coordination.k8s.io", resource: "leases", namespace: framework.NodeNamespace},
		// Nothing in juneau-system but the one Secret: no Lease, no DaemonSet.
		access{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: framework.SystemNamespace},
		access{verb: "get", group: "apps", resource: "daemonsets", namespace: framework.SystemNamespace, name: "juneau-node"})
	for _, r := range []string{"elasticips/status", "allocationclaims/status", "elasticipattachments/status", "addresspools/status", "externalnetworks/status"} {
		denied = append(denied, every(juneau, r, "update", "patch")...)
	}
	denied = append(denied,
		juneau("update", "arpadvertisements/status"),
		juneau("update", "networkinterfaces/status"),
		juneau("list", "allocationclaims"), juneau("list", "addresspools"),
		core("update", "pods/status"), core("patch", "pods"), core("create", "pods"), core("delete", "pods"),
		core("update", "nodes"), core("patch", "nodes/status"), core("delete", "nodes"),
		core("get", "secrets"), core("list", "secrets"), core("create", "events"),
		// RBAC lets the agent update Leases of juneau-node (it cannot name the agents'
		// own); the node-scope policy refuses it every other (TestNodeScope).
		access{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "default", name: "juneau-controller"},
		access{verb: "create", resource: "serviceaccounts", subresource: "token", namespace: framework.NodeNamespace},
		access{verb: "get", group: "apps", resource: "daemonsets", namespace: "default", name: "juneau-node"},
		access{verb: "update", group: "apps", resource: "daemonsets", namespace: framework.NodeNamespace, name: "juneau-node"},
	)
	checkAccess(t, kube, false, denied)
}
