package realcluster

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/test/cluster"
	"github.com/loutres/juneau/test/framework"
	"github.com/loutres/juneau/test/require"
)

// helmRelease runs the built helm against the cluster.
type helmRelease struct {
	bin, kubeconfig, chart string
	image                  []string // --set arguments naming the image loaded into the Nodes
}

func newHelmRelease(t *testing.T, c *cluster.Cluster) *helmRelease {
	t.Helper()
	bin, err := framework.OpsTool("helm")
	if err != nil {
		require.Unmet(t, "%v", err)
	}
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	i := strings.LastIndex(c.JuneauImage, ":")
	return &helmRelease{bin: bin, kubeconfig: c.Kubeconfig, chart: filepath.Join(root, "charts", "juneau"),
		image: []string{"--set", "image.repository=" + c.JuneauImage[:i], "--set", "image.tag=" + c.JuneauImage[i+1:]}}
}

// run runs helm with args (release juneau in juneau-system), failing the test on error.
func (h *helmRelease) run(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.bin, append(args, "--kubeconfig", h.kubeconfig, "--namespace", cluster.SystemNamespace)...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// testHelm: after the kustomize uninstall, juneau installed with the chart as
// docs/operations.md#installing-with-helm says; a Prometheus scraping it with the
// shipped configuration; the examples working through it; `helm upgrade` of a value
// rolling the node DaemonSet under traffic without a lost datagram; the seeded failures
// each named by `kubectl juneau why`, the dashboard's queries and the alert expressions
// answered, two alerts firing in time; `helm rollback`; `helm uninstall` leaving every
// Node as before juneau was first installed.
func testHelm(t *testing.T, c *cluster.Cluster) {
	h := newHelmRelease(t, c)
	for _, ns := range []string{cluster.SystemNamespace, cluster.NodeNamespace} {
		gone(t, "namespace "+ns+" of the kustomize install", 3*time.Minute, func(ctx context.Context) error {
			_, err := c.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return err
		})
	}
	start := time.Now()
	kubectl(t, c, "", "create", "namespace", cluster.SystemNamespace)
	h.run(t, append([]string{"install", "juneau", h.chart, "--take-ownership", "--wait", "--timeout", "5m"}, h.image...)...)
	if err := c.WaitWebhook(testContext(t, 3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	t.Logf("installed with helm in %s", time.Since(start).Round(100*time.Millisecond))
	// The release namespace, taken over, enforces "restricted"; the agents' is "privileged".
	for name, level := range map[string]string{cluster.SystemNamespace: "restricted", cluster.NodeNamespace: "privileged"} {
		ns, err := c.Kube.CoreV1().Namespaces().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || ns.Labels["pod-security.kubernetes.io/enforce"] != level || ns.Labels["app.kubernetes.io/managed-by"] != "Helm" {
			t.Errorf("namespace %s labels %v (%v), want the chart's, Pod Security %q", name, ns.Labels, err, level)
		}
	}

	prom := startPrometheus(t, c)
	examplesThroughChart(t, c)

	// helm upgrade of a value rolls the node DaemonSet; a UDP flow through NAT loses
	// nothing meanwhile.
	rollUnderTraffic(t, c, "helm upgrade of node.logVerbosity", func() {
		h.run(t, append([]string{"upgrade", "juneau", h.chart, "--reuse-values", "--set", "node.logVerbosity=3", "--wait", "--timeout", "5m"}, h.image...)...)
	})
	ds, err := c.Kube.AppsV1().DaemonSets(cluster.NodeNamespace).Get(context.Background(), "juneau-node", metav1.GetOptions{})
	if err != nil || !strings.Contains(strings.Join(ds.Spec.Template.Spec.Containers[0].Args, " "), "-v=3") {
		t.Errorf("after the upgrade the agent's arguments are %v (%v), want -v=3", ds.Spec.Template.Spec.Containers[0].Args, err)
	}

	testOperations(t, c, h, prom)

	// Roll back to the second revision (every Node has its agent again).
	h.run(t, "rollback", "juneau", "2", "--wait", "--timeout", "5m")
	kubectl(t, c, "", "-n", cluster.NodeNamespace, "rollout", "status", "daemonset/juneau-node", "--timeout=5m")
	kubectl(t, c, "", "-n", cluster.SystemNamespace, "rollout", "status", "deployment/juneau-webhook", "--timeout=3m")
	if err := wait.PollUntilContextTimeout(testContext(t, 3*time.Minute), time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes := map[string]bool{}
		pods, err := c.Kube.CoreV1().Pods(cluster.NodeNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=node"})
		if err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if isReady(&p) {
				nodes[p.Spec.NodeName] = true
			}
		}
		return len(nodes) == len(c.Nodes), nil
	}); err != nil {
		t.Errorf("after helm rollback, not every Node has a Ready agent: %v", err)
	}
	if out := h.run(t, "history", "juneau"); !strings.Contains(out, "Rollback to 2") {
		t.Errorf("helm history:\n%s", out)
	}

	helmUninstall(t, c, h)
}

func isReady(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil
		}
	}
	return false
}

// examplesThroughChart applies manifests/examples and checks them as a user does
// (eipWorks): each ElasticIP's Attached condition True, its Pod's readiness gate True,
// the client answered.
func examplesThroughChart(t *testing.T, c *cluster.Cluster) {
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	kubectl(t, c, "", "apply", "-k", filepath.Join(root, "manifests", "examples"))
	waitPods(t, c, "default", "nginx", "web")
	for _, u := range []struct{ eip, pod string }{{"nginx-eip", "nginx"}, {"web-eip", "web"}} {
		eipWorks(t, c, "default", u.eip, u.pod)
	}
	// A Pod with an automatic ElasticIP and its readiness gate: Ready once the gate is True.
	ns := namespace(t, c, "helm-gate")
	kubectl(t, c, gatedBoxPod("gated", `{juneau.loutres.me/pod-with-eip: "true"}`), "-n", ns, "apply", "-f", "-")
	waitPods(t, c, ns, "gated")
	eipWorks(t, c, ns, "gated", "gated")
}

// rollUnderTraffic runs roll (which must replace every agent) while the external client
// sends a datagram every 20 ms to a Pod behind NAT, and requires none lost.
func rollUnderTraffic(t *testing.T, c *cluster.Cluster, what string, roll func()) {
	t.Helper()
	ns := namespace(t, c, "helm-roll")
	kubectl(t, c, boxPodYAML("echo", "")+"    args: [serve, -udp, \":7\"]\n  readinessGates: [{conditionType: juneau.loutres.me/elastic-ip}]\n---\n"+natYAML("echo"), "-n", ns, "apply", "-f", "-")
	waitPods(t, c, ns, "echo")
	addr := eipWorks(t, c, ns, "echo-eip", "echo")
	agents := agentPods(t, c)
	f := startFlow(t, c, addr+":7", 20*time.Millisecond)
	if err := f.waitEchoes(20, time.Minute); err != nil {
		t.Fatalf("before %s: %v", what, err)
	}
	roll()
	kubectl(t, c, "", "-n", cluster.NodeNamespace, "rollout", "status", "daemonset/juneau-node", "--timeout=5m")
	for name := range agentPods(t, c) {
		if agents[name] {
			t.Errorf("%s: agent Pod %s was not replaced", what, name)
		}
	}
	if err := f.waitEchoes(100, time.Minute); err != nil {
		t.Fatalf("after %s: %v", what, err)
	}
	sent, lost := f.stop()
	t.Logf("%s: %d datagrams through the ElasticIP, %d lost", what, sent, len(lost))
	if sent < 100 || len(lost) > 0 {
		t.Fatalf("%s: %d datagrams sent, %d lost (sequence numbers %v)", what, sent, len(lost), lost)
	}
}

// helmUninstall: the uninstall steps' order (users, ElasticIPs, networks), then helm
// uninstall; every Node is then as it was before juneau was first installed.
func helmUninstall(t *testing.T, c *cluster.Cluster, h *helmRelease) {
	ctx := testContext(t, 10*time.Minute)
	// The scenarios' namespaces first, while the controller releases their ElasticIPs.
	nss, err := c.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nss.Items {
		if strings.HasPrefix(n.Name, "kube-") || n.Name == "default" || n.Name == cluster.SystemNamespace || n.Name == cluster.NodeNamespace {
			continue
		}
		kubectl(t, c, "", "delete", "namespace", n.Name, "--wait=true", "--timeout=3m")
	}
	kubectl(t, c, "", "delete", "pods", "--all", "-n", "default", "--wait=true")
	kubectl(t, c, "", "delete", "elasticipattachments,elasticips", "--all", "--all-namespaces", "--wait=true")
	kubectl(t, c, "", "delete", "externalnetworks,addresspools,bgppeers", "--all", "--wait=true")
	out := h.run(t, "uninstall", "juneau", "--wait", "--timeout", "5m")
	t.Logf("%s", strings.TrimSpace(out))
	// The chart keeps the release namespace (helm.sh/resource-policy: keep); what is left
	// in it (the webhook's certificate Secret, the controller's Lease) goes with it. The
	// agents' namespace goes with the release.
	kubectl(t, c, "", "delete", "namespace", cluster.SystemNamespace, "--wait=false")
	for _, ns := range []string{cluster.SystemNamespace, cluster.NodeNamespace} {
		gone(t, "namespace "+ns, 3*time.Minute, func(ctx context.Context) error {
			_, err := c.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return err
		})
	}
	// The CRDs stay (Helm never deletes what crds/ installed); the Nodes are clean.
	waitNodesAsBefore(ctx, t, c, "helm uninstall")
}
