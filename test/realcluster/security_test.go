package realcluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/status"
	"github.com/loutres/juneau/test/cluster"
)

// stolen is one write made with a component's own token, as a thief holding it would
// make it, and the policy message that must refuse it ("" when the write is the
// component's own and must be allowed). Every write is a dry run: the API server
// authorizes and admits it (ValidatingAdmissionPolicies included) and stores nothing.
type stolen struct {
	what    string
	do      func(ctx context.Context) error
	refusal string
}

// testStolenTokens: with the token the kubelet projects into the controller's Pod, the
// API server refuses changing a Pod's image (another namespace's and juneau's own), and
// with the webhook's, repointing or switching off its ValidatingWebhookConfiguration and
// creating another Secret; each component's own writes stay allowed. A Pod like the
// node agent's (host network, NET_ADMIN) is refused in juneau-system, which enforces
// Pod Security "restricted", and admitted only in juneau-node. Then a namespace's
// ResourceQuota on ElasticIPs holds for automatic ones: the Pod beyond it is told so on
// its condition and gets no ElasticIP.
func testStolenTokens(t *testing.T, c *cluster.Cluster) {
	ns := namespace(t, c, "stolen")
	kubectl(t, c, boxPodYAML("victim", ""), "-n", ns, "apply", "-f", "-")
	controller := componentPod(t, c, "controller")
	webhook := componentPod(t, c, "webhook")
	asController, asWebhook := podClient(t, c, controller), podClient(t, c, webhook)
	dry := metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}

	podPatch := func(namespace, name, body string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := asController.CoreV1().Pods(namespace).Patch(ctx, name, types.StrategicMergePatchType, []byte(body), dry)
			return err
		}
	}
	image := func(container string) string {
		return `{"spec":{"containers":[{"name":"` + container + `","image":"registry.example/evil:1"}]}}`
	}
	hookPatch := func(body string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := asWebhook.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(ctx, "juneau-webhook", types.JSONPatchType, []byte(body), dry)
			return err
		}
	}
	secret := func(ctx context.Context) error {
		_, err := asWebhook.CoreV1().Secrets(cluster.SystemNamespace).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "stolen", Namespace: cluster.SystemNamespace}, Type: corev1.SecretTypeOpaque,
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	const notSpec = "not its spec, labels, finalizers or owner references"
	const hookFields = "its other fields (clientConfig, rules, failurePolicy, selectors, timeouts) stay as installed"
	attempts := []stolen{
		{what: "the controller's token changing the image of Pod " + ns + "/victim", do: podPatch(ns, "victim", image("web")), refusal: notSpec},
		{what: "the controller's token changing the image of the webhook's Pod", do: podPatch(webhook.Namespace, webhook.Name, image(webhook.Spec.Containers[0].Name)), refusal: notSpec},
		{what: "the controller's token setting a juneau annotation", do: podPatch(ns, "victim", `{"metadata":{"annotations":{"`+v1alpha1.AnnotationAllocatedEIPName+`":"x"}}}`)},
		{what: "the webhook's token switching its failure policy to Ignore", do: hookPatch(`[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"}]`), refusal: hookFields},
		{what: "the webhook's token repointing its service", do: hookPatch(`[{"op":"replace","path":"/webhooks/0/clientConfig/service/name","value":"evil"}]`), refusal: hookFields},
		{what: "the webhook's token creating another Secret", do: secret, refusal: `not in Secret "` + cluster.SystemNamespace + `/stolen"`},
		{what: "the webhook's token setting its caBundle", do: hookPatch(`[{"op":"add","path":"/webhooks/0/clientConfig/caBundle","value":"Y2E="}]`)},
	}
	for _, a := range attempts {
		err := a.do(testContext(t, 30*time.Second))
		switch {
		case a.refusal == "" && err != nil:
			t.Errorf("%s: %v, want it allowed", a.what, err)
		case a.refusal != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), a.refusal)):
			t.Errorf("%s: %v, want it refused saying %q", a.what, err, a.refusal)
		default:
			t.Logf("%s: %v", a.what, errOrAllowed(err))
		}
	}

	hostPod := func(namespace string) error {
		_, err := c.Kube.CoreV1().Pods(namespace).Create(testContext(t, 30*time.Second), &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "host-root"},
			Spec: corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "c", Image: "registry.example/evil:1",
				SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}}}},
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	if err := hostPod(cluster.SystemNamespace); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `violates PodSecurity "restricted`) {
		t.Errorf("a host-network Pod with NET_ADMIN in %s: %v, want Pod Security's refusal", cluster.SystemNamespace, err)
	} else {
		t.Logf("a host-network Pod with NET_ADMIN in %s: %v", cluster.SystemNamespace, err)
	}
	if err := hostPod(cluster.NodeNamespace); err != nil {
		t.Errorf("a host-network Pod with NET_ADMIN in %s (the agents' namespace): %v, want it admitted", cluster.NodeNamespace, err)
	}

	quota := namespace(t, c, "quota")
	kubectl(t, c, `apiVersion: v1
kind: ResourceQuota
metadata: {name: eips}
spec:
  hard: {count/elasticips.juneau.loutres.me: "1"}
`, "-n", quota, "apply", "-f", "-")
	// The quota controller of kube-controller-manager counts what exists before the API
	// server admits against it.
	if err := wait.PollUntilContextTimeout(testContext(t, time.Minute), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		q, err := c.Kube.CoreV1().ResourceQuotas(quota).Get(ctx, "eips", metav1.GetOptions{})
		return err == nil && q.Status.Used != nil, nil
	}); err != nil {
		t.Fatalf("kube-controller-manager never counted the quota's usage: %v", err)
	}
	auto := `{juneau.loutres.me/pod-with-eip: "true"}`
	kubectl(t, c, boxPodYAML("first", auto), "-n", quota, "apply", "-f", "-")
	waitPods(t, c, quota, "first")
	kubectl(t, c, boxPodYAML("second", auto), "-n", quota, "apply", "-f", "-")
	var last string
	if err := wait.PollUntilContextTimeout(testContext(t, 2*time.Minute), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := c.Kube.CoreV1().Pods(quota).Get(ctx, "second", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		cond := status.PodCondition(p, v1alpha1.PodConditionElasticIPAssigned)
		if cond == nil {
			last = "no condition " + v1alpha1.PodConditionElasticIPAssigned
			return false, nil
		}
		last = fmt.Sprintf("%s %s: %s", cond.Status, cond.Reason, cond.Message)
		return cond.Status == corev1.ConditionFalse && cond.Reason == v1alpha1.ReasonWriteRefused && strings.Contains(cond.Message, "exceeded quota: eips"), nil
	}); err != nil {
		t.Fatalf("Pod second, beyond the quota of one ElasticIP: condition %s, want False %s quoting the quota", last, v1alpha1.ReasonWriteRefused)
	}
	t.Logf("Pod second, beyond the quota: %s", last)
	list, err := c.Juneau.JuneauV1alpha1().ElasticIPs(quota).List(testContext(t, time.Minute), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Errorf("namespace %s holds %d ElasticIPs under a quota of 1", quota, len(list.Items))
	}
}

// componentPod is a running Pod of juneau's component (controller, webhook).
func componentPod(t *testing.T, c *cluster.Cluster, component string) *corev1.Pod {
	t.Helper()
	return componentPods(t, c, component)[0]
}

// componentPods are the running Pods of juneau's component, in the API server's
// order; none is fatal.
func componentPods(t *testing.T, c *cluster.Cluster, component string) []*corev1.Pod {
	t.Helper()
	list, err := c.Kube.CoreV1().Pods(cluster.SystemNamespace).List(testContext(t, time.Minute),
		metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=" + component})
	if err != nil {
		t.Fatal(err)
	}
	var pods []*corev1.Pod
	for i, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			pods = append(pods, &list.Items[i])
		}
	}
	if len(pods) == 0 {
		t.Fatalf("no running %s Pod in %s", component, cluster.SystemNamespace)
	}
	return pods
}

func errOrAllowed(err error) string {
	if err == nil {
		return "allowed"
	}
	return err.Error()
}

// The tenancy scenario's own pool and network, admitting only the namespaces labelled
// juneau-test/tenant=a; its addresses are on the segment, outside every other pool.
const tenantNetYAML = `apiVersion: juneau.loutres.me/v1alpha1
kind: AddressPool
metadata: {name: tenant-pool}
spec:
  advertiseMode: arp
  addresses: ["10.225.51.160-10.225.51.161"]
---
apiVersion: juneau.loutres.me/v1alpha1
kind: ExternalNetwork
metadata: {name: tenant-net}
spec:
  type: arp
  addressPools: [tenant-pool]
  namespaceSelector: {matchLabels: {juneau-test/tenant: a}}
`

// testTenancy: a network admitting one tenant's namespaces refuses, in another
// namespace, an ElasticIP naming it and a Pod asking for an automatic ElasticIP from it,
// naming the field, the network and the namespace; in the tenant's namespace the
// ElasticIP gets an address of the network.
func testTenancy(t *testing.T, c *cluster.Cluster) {
	kubectl(t, c, tenantNetYAML, "apply", "-f", "-")
	var tenant string
	t.Cleanup(func() {
		if tenant != "" {
			_, _ = c.KubectlRun(context.Background(), "", "-n", tenant, "delete", "elasticips", "--all", "--wait=true")
		}
		_, _ = c.KubectlRun(context.Background(), "", "delete", "externalnetwork/tenant-net", "addresspool/tenant-pool", "--ignore-not-found", "--wait=true")
	})
	other := namespace(t, c, "other")
	tenant = namespace(t, c, "tenant")
	kubectl(t, c, "", "label", "namespace", tenant, "juneau-test/tenant=a")
	eip := strings.Replace(eipYAML("web-eip"), "externalNetwork: ext-net", "externalNetwork: tenant-net", 1)
	want := fmt.Sprintf(`ExternalNetwork "tenant-net" does not admit namespace %q`, other)
	if out, err := c.KubectlRun(testContext(t, time.Minute), eip, "-n", other, "apply", "-f", "-"); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("an ElasticIP on tenant-net in namespace %s: %v %s, want refused saying %s", other, err, out, want)
	}
	pod := boxPodYAML("web", `{juneau.loutres.me/pod-with-eip: "true", juneau.loutres.me/eip-external-network: tenant-net}`)
	if out, err := c.KubectlRun(testContext(t, time.Minute), pod, "-n", other, "apply", "-f", "-"); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a Pod asking for an automatic ElasticIP of tenant-net in namespace %s: %v %s, want refused saying %s", other, err, out, want)
	}
	kubectl(t, c, eip, "-n", tenant, "apply", "-f", "-")
	var addr string
	if err := wait.PollUntilContextTimeout(testContext(t, 2*time.Minute), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		e, err := c.Juneau.JuneauV1alpha1().ElasticIPs(tenant).Get(ctx, "web-eip", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		addr = e.Status.Address
		return strings.HasPrefix(addr, "10.225.51.16"), nil
	}); err != nil {
		t.Errorf("the ElasticIP on tenant-net in the tenant's namespace %s has address %q, want one of tenant-pool: %v", tenant, addr, err)
	}
}
