package rbac

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	metaapply "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	applyv1alpha1 "github.com/loutres/juneau/pkg/generated/applyconfiguration/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	"github.com/loutres/juneau/test/framework"
)

// nodeScopePolicy is the ValidatingAdmissionPolicy of manifests/10-rbac-node-scope.yaml.
const nodeScopePolicy = "ValidatingAdmissionPolicy 'juneau-node-scope'"

// ensureNodes creates the Node objects tokens are bound to (kept until the control plane
// stops: deleting one would invalidate the tokens of other tests).
func ensureNodes(t *testing.T, cp *framework.ControlPlane, names ...string) {
	t.Helper()
	for _, name := range names {
		_, err := cp.Kube.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating Node %s: %v", name, err)
		}
	}
}

// agentOf is what the node agent of one Node writes with.
type agentOf struct {
	node string
	kube kubernetes.Interface
	jn   versioned.Interface
}

func newAgent(node string, cfg *rest.Config) agentOf {
	return agentOf{node: node, kube: kubernetes.NewForConfigOrDie(cfg), jn: versioned.NewForConfigOrDie(cfg)}
}

// scopeFixtures are, for one Node, the objects its agent writes: an ARPAdvertisement, a
// BGPAdvertisement, a Pod with the readiness gate and its eth0 NetworkInterface, created
// by the administrator.
type scopeFixtures struct {
	arp, bgp, pod, nic string
}

func newScopeFixtures(t *testing.T, cp *framework.ControlPlane, ns, node string, octet int) scopeFixtures {
	t.Helper()
	ctx := context.Background()
	admin := cp.Juneau.JuneauV1alpha1()
	f := scopeFixtures{arp: advertisement.PreferredName(ns, node), bgp: ns + "-" + node, pod: "web-" + node}
	f.nic = v1alpha1.NetworkInterfaceName(f.pod, v1alpha1.DefaultInterface)
	if _, err := admin.ARPAdvertisements().Create(ctx, &v1alpha1.ARPAdvertisement{
		ObjectMeta: metav1.ObjectMeta{Name: f.arp},
		Spec:       v1alpha1.ARPAdvertisementSpec{ExternalNetwork: "ext-net", Address: fmt.Sprintf("10.225.51.%d", octet), NodeName: node},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.BGPAdvertisements().Create(ctx, &v1alpha1.BGPAdvertisement{
		ObjectMeta: metav1.ObjectMeta{Name: f.bgp},
		Spec:       v1alpha1.BGPAdvertisementSpec{ExternalNetwork: "bgp-net", Address: fmt.Sprintf("10.225.53.%d", octet), NodeName: node},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.ARPAdvertisements().Delete(context.Background(), f.arp, metav1.DeleteOptions{})
		_ = admin.BGPAdvertisements().Delete(context.Background(), f.bgp, metav1.DeleteOptions{})
	})
	pod, err := cp.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: f.pod},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/pause:1"}},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: v1alpha1.PodConditionElasticIP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.NetworkInterfaces(ns).Create(ctx, &v1alpha1.NetworkInterface{
		ObjectMeta: metav1.ObjectMeta{Name: f.nic},
		Spec: v1alpha1.NetworkInterfaceSpec{NodeName: node,
			PodRef: v1alpha1.PodReference{Name: f.pod, UID: string(pod.UID), Interface: v1alpha1.DefaultInterface}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return f
}

// The four writes of the node agent, each as the agent makes it.

func (a agentOf) answering(ctx context.Context, name string) error {
	cond := metaapply.Condition().WithType(v1alpha1.ConditionAnswering).WithStatus(metav1.ConditionTrue).
		WithReason(v1alpha1.ReasonAnswering).WithMessage("answering on ext0 of " + a.node).WithLastTransitionTime(metav1.Now())
	_, err := a.jn.JuneauV1alpha1().ARPAdvertisements().ApplyStatus(ctx,
		applyv1alpha1.ARPAdvertisement(name).WithStatus(applyv1alpha1.ARPAdvertisementStatus().WithConditions(cond)),
		metav1.ApplyOptions{FieldManager: v1alpha1.FieldManagerNode, Force: true})
	return err
}

func (a agentOf) announced(ctx context.Context, name string) error {
	cond := metaapply.Condition().WithType(v1alpha1.ConditionAnnounced).WithStatus(metav1.ConditionTrue).
		WithReason(v1alpha1.ReasonAnnounced).WithMessage("announced by " + a.node).WithLastTransitionTime(metav1.Now())
	_, err := a.jn.JuneauV1alpha1().BGPAdvertisements().ApplyStatus(ctx,
		applyv1alpha1.BGPAdvertisement(name).WithStatus(applyv1alpha1.BGPAdvertisementStatus().WithConditions(cond)),
		metav1.ApplyOptions{FieldManager: v1alpha1.FieldManagerNode, Force: true})
	return err
}

func (a agentOf) sessions(ctx context.Context, node string) error {
	_, err := a.jn.JuneauV1alpha1().BGPNodeStatuses().Apply(ctx,
		applyv1alpha1.BGPNodeStatus(node).WithStatus(applyv1alpha1.BGPNodeState().WithPeersConfigured(1).WithPeersEstablished(0)),
		metav1.ApplyOptions{FieldManager: v1alpha1.FieldManagerNode, Force: true})
	return err
}

func (a agentOf) gate(ctx context.Context, ns, pod string) error {
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{{
		Type: v1alpha1.PodConditionElasticIP, Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonProgrammed,
		Message: "programmed on " + a.node, LastTransitionTime: metav1.Now(),
	}}}})
	_, err := a.kube.CoreV1().Pods(ns).Patch(ctx, pod, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{FieldManager: v1alpha1.FieldManagerNode}, "status")
	return err
}

// sandboxAddress is the address the agent of node writes as a Pod's sandbox address.
func sandboxAddress(node string) string { return fmt.Sprintf("10.244.0.%d", node[len(node)-1]) }

// sandbox writes a Pod's sandbox addresses into its NetworkInterface, as the agent does.
func (a agentOf) sandbox(ctx context.Context, ns, nic string) error {
	_, err := a.jn.JuneauV1alpha1().NetworkInterfaces(ns).ApplyStatus(ctx,
		applyv1alpha1.NetworkInterface(nic, ns).WithStatus(applyv1alpha1.NetworkInterfaceStatus().WithSandboxAddresses(sandboxAddress(a.node))),
		metav1.ApplyOptions{FieldManager: v1alpha1.FieldManagerNode, Force: true})
	return err
}

// heartbeat creates or renews the heartbeat Lease of node, as the agent renews its own.
func (a agentOf) heartbeat(ctx context.Context, node string) error {
	leases := a.kube.CoordinationV1().Leases(framework.NodeNamespace)
	name := v1alpha1.NodeLeasePrefix + node
	now := metav1.NewMicroTime(time.Now())
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &a.node, RenewTime: &now}}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	l.Spec.HolderIdentity, l.Spec.RenewTime = &a.node, &now
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}

// write is one of the agent's writes aimed at one Node's object.
type write struct {
	what string
	do   func(ctx context.Context, a agentOf) error
	// refusal is what the policy's message must say when the writer is not of node.
	refusal string
}

func writesFor(ns, node string, f scopeFixtures) []write {
	return []write{
		{"the Answering condition of ARPAdvertisement " + f.arp,
			func(ctx context.Context, a agentOf) error { return a.answering(ctx, f.arp) },
			onNode("ARPAdvertisement", f.arp, node)},
		{"the Announced condition of BGPAdvertisement " + f.bgp,
			func(ctx context.Context, a agentOf) error { return a.announced(ctx, f.bgp) },
			onNode("BGPAdvertisement", f.bgp, node)},
		{"BGPNodeStatus " + node,
			func(ctx context.Context, a agentOf) error { return a.sessions(ctx, node) },
			onNode("BGPNodeStatus", node, node)},
		{"the readiness gate of Pod " + ns + "/" + f.pod,
			func(ctx context.Context, a agentOf) error { return a.gate(ctx, ns, f.pod) },
			onNode("Pod", ns+"/"+f.pod, node)},
		{"the sandbox addresses of NetworkInterface " + ns + "/" + f.nic,
			func(ctx context.Context, a agentOf) error { return a.sandbox(ctx, ns, f.nic) },
			onNode("NetworkInterface", ns+"/"+f.nic, node)},
		{"the heartbeat Lease of " + node,
			func(ctx context.Context, a agentOf) error { return a.heartbeat(ctx, node) },
			onNode("Lease", framework.NodeNamespace+"/"+v1alpha1.NodeLeasePrefix+node, node)},
	}
}

// onNode is how the policy's refusal names an object and its Node.
func onNode(kind, name, node string) string {
	return fmt.Sprintf("%s %q is on Node %q", kind, name, node)
}

// byAgentOf ends the policy's refusal, naming the writer's Node.
func byAgentOf(node string) string {
	return fmt.Sprintf(": the node agent of Node %q writes only the objects of its own Node", node)
}

// refusedByPolicy reports whether err is the node-scope policy's refusal saying want.
func refusedByPolicy(err error, want string) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), nodeScopePolicy) && strings.Contains(err.Error(), want)
}

// waitForPolicy waits until the API server enforces the policy (it loads policies
// asynchronously after they are created): a write by node-a to node-b's
// ARPAdvertisement is refused.
func waitForPolicy(t *testing.T, a agentOf, w write) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = w.do(ctx, a)
		return refusedByPolicy(last, w.refusal), nil
	})
	if err != nil {
		t.Fatalf("the API server never enforced %s: the agent of %s writing %s got %v", nodeScopePolicy, a.node, w.what, last)
	}
}

// TestNodeScope: the node agent of node-a may write its own Node's objects, and the API
// server refuses, with the policy's message, its writes to node-b's objects.
func TestNodeScope(t *testing.T) {
	cp := framework.Shared(t)
	cp.ApplyRBAC(t)
	ensureNodes(t, cp, "node-a", "node-b")
	ns := cp.NewNamespace(t, "scope")
	fixtures := map[string]scopeFixtures{"node-a": newScopeFixtures(t, cp, ns, "node-a", 81), "node-b": newScopeFixtures(t, cp, ns, "node-b", 82)}
	t.Cleanup(func() {
		for _, n := range []string{"node-a", "node-b"} {
			_ = cp.Juneau.JuneauV1alpha1().BGPNodeStatuses().Delete(context.Background(), n, metav1.DeleteOptions{})
			_ = cp.Kube.CoordinationV1().Leases(framework.NodeNamespace).Delete(context.Background(), v1alpha1.NodeLeasePrefix+n, metav1.DeleteOptions{})
		}
	})
	agents := map[string]agentOf{}
	for _, n := range []string{"node-a", "node-b"} {
		agents[n] = newAgent(n, cp.NodeBoundConfig(t, framework.NodeNamespace, framework.NodeServiceAccount, n))
	}
	waitForPolicy(t, agents["node-a"], writesFor(ns, "node-b", fixtures["node-b"])[0])
	ctx := testContext(t, 2*time.Minute)

	for writer, a := range agents {
		for owner, f := range fixtures {
			for _, w := range writesFor(ns, owner, f) {
				err := w.do(ctx, a)
				switch {
				case writer == owner && err != nil:
					t.Errorf("the agent of %s cannot write %s: %v", writer, w.what, err)
				case writer != owner && !refusedByPolicy(err, w.refusal+byAgentOf(writer)):
					t.Errorf("the agent of %s writing %s (of %s): err = %v, want the policy's refusal naming both Nodes", writer, w.what, owner, err)
				}
			}
		}
	}

	// Each object carries its own agent's write and nothing of the other's.
	admin := cp.Juneau.JuneauV1alpha1()
	for owner, f := range fixtures {
		ad, err := admin.ARPAdvertisements().Get(ctx, f.arp, metav1.GetOptions{})
		if c := meta.FindStatusCondition(ad.Status.Conditions, v1alpha1.ConditionAnswering); err != nil || c == nil || !strings.HasSuffix(c.Message, owner) {
			t.Errorf("ARPAdvertisement %s: Answering %+v (%v), want the one written by the agent of %s", f.arp, c, err, owner)
		}
		bgp, err := admin.BGPAdvertisements().Get(ctx, f.bgp, metav1.GetOptions{})
		if c := meta.FindStatusCondition(bgp.Status.Conditions, v1alpha1.ConditionAnnounced); err != nil || c == nil || !strings.HasSuffix(c.Message, owner) {
			t.Errorf("BGPAdvertisement %s: Announced %+v (%v), want the one written by the agent of %s", f.bgp, c, err, owner)
		}
		s, err := admin.BGPNodeStatuses().Get(ctx, owner, metav1.GetOptions{})
		if err != nil || len(s.ManagedFields) == 0 || s.ManagedFields[0].Manager != v1alpha1.FieldManagerNode {
			t.Errorf("BGPNodeStatus %s: %v, want it written by its agent", owner, err)
		}
		pod, err := cp.Kube.CoreV1().Pods(ns).Get(ctx, f.pod, metav1.GetOptions{})
		if c := podCondition(pod, v1alpha1.PodConditionElasticIP); err != nil || c == nil || !strings.HasSuffix(c.Message, owner) {
			t.Errorf("Pod %s: gate %+v (%v), want the one written by the agent of %s", f.pod, c, err, owner)
		}
		nic, err := admin.NetworkInterfaces(ns).Get(ctx, f.nic, metav1.GetOptions{})
		if err != nil || !slices.Equal(nic.Status.SandboxAddresses, []string{sandboxAddress(owner)}) {
			t.Errorf("NetworkInterface %s: sandboxAddresses %v (%v), want the one written by the agent of %s", f.nic, nic.Status.SandboxAddresses, err, owner)
		}
	}

	// The status of ElasticIPAttachments names Nodes too, but only the controller writes
	// it: RBAC refuses it to every agent before the policy is asked.
	_, err := agents["node-a"].jn.JuneauV1alpha1().ElasticIPAttachments(ns).Patch(ctx, "web", types.MergePatchType,
		[]byte(`{"status":{"nodeName":"node-a"}}`), metav1.PatchOptions{}, "status")
	if !apierrors.IsForbidden(err) || strings.Contains(err.Error(), nodeScopePolicy) {
		t.Errorf("the agent of node-a writing an attachment's status: err = %v, want RBAC's refusal", err)
	}

	// Leases of juneau-node other than the agents' heartbeats are on no Node: one named
	// as the controller's leader-election Lease, say.
	leases := agents["node-a"].kube.CoordinationV1().Leases(framework.NodeNamespace)
	if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "juneau-controller"}}, metav1.CreateOptions{}); !refusedByPolicy(err,
		`Lease "`+framework.NodeNamespace+`/juneau-controller" is on no Node`+byAgentOf("node-a")) {
		t.Errorf("the agent of node-a creating a Lease that is not a heartbeat: err = %v, want the policy's refusal", err)
	}

	// A Pod not yet scheduled is on no Node: no agent may write it.
	if _, err := cp.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pending"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/pause:1"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := agents["node-a"].gate(ctx, ns, "pending"); !refusedByPolicy(err, `Pod "`+ns+`/pending" is on no Node`+byAgentOf("node-a")) {
		t.Errorf("the agent of node-a writing the gate of an unscheduled Pod: err = %v, want the policy's refusal", err)
	}
}

// TestNodeScopeNeedsABoundToken: a token of the node agent's ServiceAccount that names
// no Node may write nothing, not even for a Node; a token bound to a Pod of the
// DaemonSet (what the agent runs with in a cluster) names the Pod's Node.
func TestNodeScopeNeedsABoundToken(t *testing.T) {
	cp := framework.Shared(t)
	cp.ApplyRBAC(t)
	ensureNodes(t, cp, "node-a", "node-b")
	ns := cp.NewNamespace(t, "scope-unbound")
	f := newScopeFixtures(t, cp, ns, "node-a", 83)
	t.Cleanup(func() {
		_ = cp.Juneau.JuneauV1alpha1().BGPNodeStatuses().Delete(context.Background(), "node-a", metav1.DeleteOptions{})
		_ = cp.Kube.CoordinationV1().Leases(framework.NodeNamespace).Delete(context.Background(), v1alpha1.NodeLeasePrefix+"node-a", metav1.DeleteOptions{})
	})
	unbound := newAgent("node-a", cp.ServiceAccountConfig(t, framework.NodeNamespace, framework.NodeServiceAccount))
	writes := writesFor(ns, "node-a", f)
	waitForPolicy(t, unbound, write{what: writes[0].what, do: writes[0].do, refusal: "bound to no Node"})
	ctx := testContext(t, time.Minute)
	for _, w := range writes {
		want := strings.SplitN(w.refusal, " is on", 2)[0] + " with a token bound to no Node"
		if err := w.do(ctx, unbound); !refusedByPolicy(err, want) {
			t.Errorf("a token bound to no Node writing %s: err = %v, want the policy's refusal %q", w.what, err, want)
		}
	}

	// The DaemonSet Pod's projected token: bound to the Pod, naming its Node.
	agentPod, err := cp.Kube.CoreV1().Pods(framework.NodeNamespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "juneau-node-"},
		Spec: corev1.PodSpec{NodeName: "node-a", ServiceAccountName: framework.NodeServiceAccount,
			Containers: []corev1.Container{{Name: "agent", Image: "registry.invalid/juneau:1"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Kube.CoreV1().Pods(framework.NodeNamespace).Delete(context.Background(), agentPod.Name, metav1.DeleteOptions{})
	})
	tr, err := cp.Kube.CoreV1().ServiceAccounts(framework.NodeNamespace).CreateToken(ctx, framework.NodeServiceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600)),
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: agentPod.Name, UID: agentPod.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(cp.Config)
	cfg.BearerToken = tr.Status.Token
	podAgent := newAgent("node-a", cfg)
	for _, w := range writes {
		if err := w.do(ctx, podAgent); err != nil {
			t.Errorf("the agent with its Pod's token writing %s of its own Node: %v", w.what, err)
		}
	}
	other := newScopeFixtures(t, cp, ns, "node-b", 84)
	for _, w := range writesFor(ns, "node-b", other) {
		if err := w.do(ctx, podAgent); !refusedByPolicy(err, w.refusal+byAgentOf("node-a")) {
			t.Errorf("the agent with its Pod's token writing %s of node-b: err = %v, want the policy's refusal", w.what, err)
		}
	}
}

// TestNodeScopeLeavesOthersAlone: the policy judges the node agent's ServiceAccount only.
// The administrator, and another ServiceAccount granted the agent's ClusterRole, write
// any Node's objects with tokens that name no Node.
func TestNodeScopeLeavesOthersAlone(t *testing.T) {
	cp := framework.Shared(t)
	cp.ApplyRBAC(t)
	ensureNodes(t, cp, "node-a", "node-b")
	ns := cp.NewNamespace(t, "scope-others")
	f := newScopeFixtures(t, cp, ns, "node-b", 85)
	t.Cleanup(func() {
		_ = cp.Juneau.JuneauV1alpha1().BGPNodeStatuses().Delete(context.Background(), "node-b", metav1.DeleteOptions{})
	})
	ctx := testContext(t, time.Minute)
	// The policy is in force: the node agent of node-a is refused.
	nodeA := newAgent("node-a", cp.NodeBoundConfig(t, framework.NodeNamespace, framework.NodeServiceAccount, "node-a"))
	waitForPolicy(t, nodeA, writesFor(ns, "node-b", f)[0])

	const other = "rbac-scope-other"
	if _, err := cp.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: other},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "juneau-node"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: framework.NodeNamespace, Name: other}},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// And to its Role in juneau-node (the heartbeat Lease).
	if _, err := cp.Kube.RbacV1().RoleBindings(framework.NodeNamespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: other},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "juneau-node"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: framework.NodeNamespace, Name: other}},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), other, metav1.DeleteOptions{})
		_ = cp.Kube.RbacV1().RoleBindings(framework.NodeNamespace).Delete(context.Background(), other, metav1.DeleteOptions{})
		_ = cp.Kube.CoordinationV1().Leases(framework.NodeNamespace).Delete(context.Background(), v1alpha1.NodeLeasePrefix+"node-b", metav1.DeleteOptions{})
	})
	writers := map[string]agentOf{
		"the administrator": newAgent("admin", cp.Config),
		"ServiceAccount " + framework.NodeNamespace + "/" + other + " bound to the agent's ClusterRole": newAgent(other, cp.ServiceAccountConfig(t, framework.NodeNamespace, other)),
	}
	for who, a := range writers {
		for _, w := range writesFor(ns, "node-b", f) {
			// RBAC of a fresh binding is also loaded asynchronously.
			var err error
			_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				err = w.do(ctx, a)
				return err == nil, nil
			})
			if err != nil {
				t.Errorf("%s writing %s: %v", who, w.what, err)
			}
		}
	}
}

func podCondition(pod *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	if pod == nil {
		return nil
	}
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == typ {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// TestNodeScopeDelete: RBAC lets the agent delete nothing, but should a grant ever add
// it, the policy judges a DELETE by the object as it was: the agent of node-a may
// delete its own BGPNodeStatus and not node-b's.
func TestNodeScopeDelete(t *testing.T) {
	cp := framework.Shared(t)
	cp.ApplyRBAC(t)
	ensureNodes(t, cp, "node-a", "node-b")
	ctx := testContext(t, time.Minute)
	const grant = "rbac-scope-delete"
	if _, err := cp.Kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: grant},
		// By name, so that the access table of the agent (TestNodeAgentAccessTable) is the same
		// with and without this grant.
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupName}, Resources: []string{"bgpnodestatuses"},
			ResourceNames: []string{"node-a", "node-b"}, Verbs: []string{"delete"}}},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := cp.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: grant},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: grant},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: framework.NodeNamespace, Name: framework.NodeServiceAccount}},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), grant, metav1.DeleteOptions{})
		_ = cp.Kube.RbacV1().ClusterRoles().Delete(context.Background(), grant, metav1.DeleteOptions{})
	})
	agents := map[string]agentOf{}
	for _, n := range []string{"node-a", "node-b"} {
		agents[n] = newAgent(n, cp.NodeBoundConfig(t, framework.NodeNamespace, framework.NodeServiceAccount, n))
		if err := agents[n].sessions(ctx, n); err != nil {
			t.Fatalf("the agent of %s writing its BGPNodeStatus: %v", n, err)
		}
	}
	t.Cleanup(func() {
		for _, n := range []string{"node-a", "node-b"} {
			_ = cp.Juneau.JuneauV1alpha1().BGPNodeStatuses().Delete(context.Background(), n, metav1.DeleteOptions{})
			_ = cp.Kube.CoordinationV1().Leases(framework.NodeNamespace).Delete(context.Background(), v1alpha1.NodeLeasePrefix+n, metav1.DeleteOptions{})
		}
	})
	del := func(ctx context.Context, a agentOf) error {
		return a.jn.JuneauV1alpha1().BGPNodeStatuses().Delete(ctx, "node-b", metav1.DeleteOptions{})
	}
	// The grant is loaded asynchronously: wait until the refusal is the policy's, not RBAC's.
	waitForPolicy(t, agents["node-a"], write{what: "deleting BGPNodeStatus node-b", do: del,
		refusal: onNode("BGPNodeStatus", "node-b", "node-b") + byAgentOf("node-a")})
	if err := del(ctx, agents["node-b"]); err != nil {
		t.Errorf("the agent of node-b deleting its own BGPNodeStatus: %v", err)
	}
}
