package realcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/kubectlplugin"
	"github.com/loutres/juneau/pkg/status"
	"github.com/loutres/juneau/test/chart"
	"github.com/loutres/juneau/test/cluster"
	"github.com/loutres/juneau/test/framework"
	"github.com/loutres/juneau/test/images"
)

// scrapeInterval is the test Prometheus's scrape and rule evaluation interval.
const scrapeInterval = 5 * time.Second

// startPrometheus starts Prometheus with the shipped scrape jobs and rules and waits
// until it scrapes the controller's and webhook's replicas and every agent.
func startPrometheus(t *testing.T, c *cluster.Cluster) *cluster.Prometheus {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t, 3*time.Minute)
	// Prometheus scrapes as a user's would: with the token of a ServiceAccount bound to
	// juneau-metrics-reader (docs/operations.md#metrics-and-health).
	token, err := c.MetricsReaderToken(ctx)
	if err != nil {
		t.Fatalf("a token for Prometheus: %v", err)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := chart.PrometheusConfig(root, scrapeInterval, c.PrometheusKubeconfig(), tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	prom, err := c.StartPrometheus(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prom.Stop)
	want := map[string]int{"juneau-controller": 2, "juneau-webhook": 2, "juneau-node": len(c.Nodes)}
	var got map[string]map[string]int
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err = prom.Targets(ctx)
		if err != nil {
			return false, nil
		}
		for job, n := range want {
			if got[job]["up"] < n {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatalf("Prometheus targets by job and health %v, want up %v: %v\n%s", got, want, err, prom.Log())
	}
	return prom
}

// why runs `kubectl juneau why` in namespace ns and returns its output.
func why(t *testing.T, c *cluster.Cluster, ns, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, framework.PluginBinary(t), "--kubeconfig", c.Kubeconfig, "-n", ns, "why", name).CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 2) {
		t.Fatalf("kubectl juneau why %s: %v\n%s", name, err, out)
	}
	return string(out)
}

// waitWhy waits until `kubectl juneau why` names link as the first broken one, saying
// says (the seeded state takes a moment to settle).
func waitWhy(t *testing.T, c *cluster.Cluster, ns, name, link, says string) {
	t.Helper()
	want := "FAIL " + link + ": "
	var out string
	if err := wait.PollUntilContextTimeout(testContext(t, 3*time.Minute), time.Second, 3*time.Minute, true, func(context.Context) (bool, error) {
		out = why(t, c, ns, name)
		return strings.Contains(out, want) && strings.Contains(out, says), nil
	}); err != nil {
		t.Errorf("kubectl juneau why %s: want the broken link %q saying %q, got:\n%s", name, link, says, out)
		return
	}
	t.Logf("kubectl juneau why %s:\n%s", name, out)
}

// plugin runs the kubectl plugin and returns its output.
func plugin(t *testing.T, c *cluster.Cluster, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, framework.PluginBinary(t), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl juneau %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// testOperations seeds one failure of each kind `kubectl juneau why` names and the
// states every dashboard panel and alert shows, checks the plugin's answers, runs every
// dashboard query and alert expression against Prometheus, and drives two alerts to
// firing: an agent stopped (no agent on node-b) and a pool exhausted.
func testOperations(t *testing.T, c *cluster.Cluster, h *helmRelease, prom *cluster.Prometheus) {
	ns := namespace(t, c, "ops")
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	alerts, err := chart.Alerts(filepath.Join(root, "manifests", "monitoring", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]chart.Alert{}
	for _, a := range alerts {
		byName[a.Name] = a
	}
	// Each of the two alerts is watched from before its seed: its expression must not
	// hold before, and the alert must fire in time after it first holds.
	watch := func(name string) chan struct{} {
		done := make(chan struct{})
		a := byName[name]
		go func() {
			defer close(done)
			alertFires(t, prom, a)
		}()
		return done
	}
	box := func(name, node string, extra ...string) string {
		s := boxPodYAML(name, "") + "  nodeName: " + node + "\n"
		for _, e := range extra {
			s += e
		}
		return s + "---\n"
	}
	attach := func(pod, eip string) string {
		return fmt.Sprintf("apiVersion: juneau.loutres.me/v1alpha1\nkind: ElasticIPAttachment\nmetadata: {name: %s-attach}\nspec:\n  elasticIPRef: {name: %s}\n  targetRef: {networkInterfaceName: %s.eth0}\n---\n", pod, eip, pod)
	}
	eipOn := func(name, network string) string {
		return fmt.Sprintf("apiVersion: juneau.loutres.me/v1alpha1\nkind: ElasticIP\nmetadata: {name: %s}\nspec: {externalNetwork: %s}\n---\n", name, network)
	}

	// A Pod on node-b using an ElasticIP, and the healthy one traced below.
	gated := func(name, node string) string {
		return gatedBoxPod(name, "") + "  nodeName: " + node + "\n---\n"
	}
	kubectl(t, c, gated("on-b", "node-b")+natYAML("on-b")+gated("fine", "node-a")+natYAML("fine"), "-n", ns, "apply", "-f", "-")
	waitPods(t, c, ns, "on-b", "fine")
	fineAddr := eipWorks(t, c, ns, "fine-eip", "fine")
	eipWorks(t, c, ns, "on-b-eip", "on-b")

	// Pool exhausted: a one-address pool, two ElasticIPs on its network.
	poolAlert := watch("JuneauAddressPoolExhausted")
	kubectl(t, c, `apiVersion: juneau.loutres.me/v1alpha1
kind: AddressPool
metadata: {name: tiny}
spec: {advertiseMode: arp, addresses: [10.225.51.241/32]}
---
apiVersion: juneau.loutres.me/v1alpha1
kind: ExternalNetwork
metadata: {name: tiny-net}
spec: {type: arp, addressPools: [tiny]}
`, "apply", "-f", "-")
	kubectl(t, c, eipOn("tiny-1", "tiny-net"), "-n", ns, "apply", "-f", "-")
	if err := wait.PollUntilContextTimeout(testContext(t, time.Minute), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		e, err := c.Juneau.JuneauV1alpha1().ElasticIPs(ns).Get(ctx, "tiny-1", metav1.GetOptions{})
		return err == nil && e.Status.Address != "", nil
	}); err != nil {
		t.Fatalf("tiny-1 got no address: %v", err)
	}
	kubectl(t, c, eipOn("tiny-2", "tiny-net")+box("starved", "node-a")+attach("starved", "tiny-2"), "-n", ns, "apply", "-f", "-")

	// BGP session down: a peer nobody answers for (nothing listens at 10.225.51.201).
	kubectl(t, c, `apiVersion: juneau.loutres.me/v1alpha1
kind: AddressPool
metadata: {name: routed}
spec: {advertiseMode: bgp, addresses: [10.225.60.1-10.225.60.9]}
---
apiVersion: juneau.loutres.me/v1alpha1
kind: ExternalNetwork
metadata: {name: routed-net}
spec: {type: bgp, addressPools: [routed]}
---
apiVersion: juneau.loutres.me/v1alpha1
kind: BGPPeer
metadata: {name: tor-x}
spec:
  peerAddress: 10.225.51.201
  peerASN: 64512
  myASN: 64513
  nodeSelector: {matchLabels: {kubernetes.io/hostname: node-a}}
`, "apply", "-f", "-")
	kubectl(t, c, eipOn("routed-eip", "routed-net")+box("routed", "node-a")+attach("routed", "routed-eip"), "-n", ns, "apply", "-f", "-")

	// Another Pod uses the ElasticIP: two Pods applied together name one ElasticIP (the
	// webhook refuses a Pod naming one already in use, so only a race gets this far); the
	// controller gives it to one, the other waits.
	kubectl(t, c, eipYAML("shared-eip"), "-n", ns, "apply", "-f", "-")
	racer := func(name string) string {
		return boxPodYAML(name, `{juneau.loutres.me/pod-eip-name: shared-eip}`) + "  nodeName: node-a\n---\n"
	}
	kubectl(t, c, racer("racer-1")+racer("racer-2"), "-n", ns, "apply", "-f", "-")
	var loser string
	if err := wait.PollUntilContextTimeout(testContext(t, 2*time.Minute), 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range []string{"racer-1", "racer-2"} {
			p, err := c.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			if cond := status.PodCondition(p, v1alpha1.PodConditionElasticIPAssigned); cond != nil && cond.Reason == v1alpha1.ReasonElasticIPInUse {
				loser = name
			}
		}
		return loser != "", nil
	}); err != nil {
		t.Fatalf("neither Pod naming shared-eip waits for it: %v", err)
	}

	// Pod without IP: a runtime handler containerd does not have, so no sandbox (and no
	// network) is ever made for it.
	kubectl(t, c, "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: juneau-test-broken}\nhandler: broken\n", "apply", "-f", "-")
	t.Cleanup(func() {
		_, _ = c.KubectlRun(context.Background(), "", "delete", "runtimeclass", "juneau-test-broken", "--ignore-not-found")
	})
	kubectl(t, c, eipYAML("no-ip-eip")+box("no-ip", "node-a", "  runtimeClassName: juneau-test-broken\n")+attach("no-ip", "no-ip-eip"), "-n", ns, "apply", "-f", "-")

	// Webhook refused: a Deployment whose Pods carry an invalid annotation.
	kubectl(t, c, fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: refused}
spec:
  replicas: 1
  selector: {matchLabels: {app: refused}}
  template:
    metadata:
      labels: {app: refused}
      annotations: {juneau.loutres.me/pod-with-eip: "maybe"}
    spec:
      containers: [{name: web, image: %s}]
`, images.Box), "-n", ns, "apply", "-f", "-")

	// No agent on node-b: the chart's node.nodeSelector keeps the DaemonSet to Nodes
	// labelled juneau.loutres.me/agent=yes, and only node-a is.
	kubectl(t, c, "", "label", "node", "node-a", "juneau.loutres.me/agent=yes")
	t.Cleanup(func() {
		_, _ = c.KubectlRun(context.Background(), "", "label", "node", "node-a", "juneau.loutres.me/agent-")
	})
	agentAlert := watch("JuneauNodeAgentNotReporting")
	agentStopped := time.Now()
	h.run(t, append([]string{"upgrade", "juneau", h.chart, "--reuse-values", "--set-string", `node.nodeSelector.juneau\.loutres\.me/agent=yes`,
		"--wait", "--timeout", "5m"}, h.image...)...)
	if err := wait.PollUntilContextTimeout(testContext(t, 2*time.Minute), time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Kube.CoreV1().Pods(cluster.NodeNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=node", FieldSelector: "spec.nodeName=node-b"})
		return err == nil && len(pods.Items) == 0, nil
	}); err != nil {
		t.Fatalf("node-b's agent still there after the nodeSelector upgrade: %v", err)
	}
	kubectl(t, c, box("orphan", "node-b")+natYAML("orphan"), "-n", ns, "apply", "-f", "-")

	// Drift: another program adds an element to juneau's table on node-a; the agent
	// repairs it. First Prometheus scrapes node-a's agent as it runs now (the upgrade
	// above may have replaced it): a repair counted before the series' first sample would
	// start it at 1, and increase() over it, which the alert reads, would stay 0.
	var agentA string
	if err := wait.PollUntilContextTimeout(testContext(t, 2*time.Minute), time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Kube.CoreV1().Pods(cluster.NodeNamespace).List(ctx, metav1.ListOptions{
			LabelSelector: "app.kubernetes.io/component=node", FieldSelector: "spec.nodeName=node-a"})
		if err != nil {
			return false, nil
		}
		var running []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				running = append(running, p.Name)
			}
		}
		if len(running) != 1 {
			return false, nil
		}
		agentA = running[0]
		return true, nil
	}); err != nil {
		t.Fatalf("node-a's agent: no one running Pod: %v", err)
	}
	requireSeries(t, prom, "node-a's agent scraped before the drift",
		fmt.Sprintf(`juneau_node_drift_repairs_total{pod=%q,reason="changed"} == 0`, agentA))
	if _, err := c.Node("node-a").Output(context.Background(), "nft", "add", "element", "ip", "juneau", "eip2vpc", "{ 10.225.51.199 : 10.244.1.199 }"); err != nil {
		t.Fatal(err)
	}

	// Every why branch names its broken link.
	waitWhy(t, c, ns, "orphan", kubectlplugin.LinkAgent, "no juneau agent on Node node-b")
	waitWhy(t, c, ns, "refused", kubectlplugin.LinkExists, "the juneau webhook refused it")
	waitWhy(t, c, ns, "tiny-2", kubectlplugin.LinkAllocated, "pool exhausted")
	waitWhy(t, c, ns, "starved", kubectlplugin.LinkAllocated, "pool exhausted")
	waitWhy(t, c, ns, "no-ip", kubectlplugin.LinkPodIP, "the Pod has no IP")
	waitWhy(t, c, ns, "routed-eip", kubectlplugin.LinkAnswered, "BGP session down on Node node-a: peer tor-x (10.225.51.201)")
	waitWhy(t, c, ns, loser, kubectlplugin.LinkAssigned, `another Pod uses the ElasticIP: ElasticIP "shared-eip" is used by Pod "racer-`)
	if out := why(t, c, ns, "fine"); !strings.Contains(out, "every link holds") {
		t.Errorf("kubectl juneau why fine:\n%s", out)
	}

	// status and trace.
	status := plugin(t, c, "status", "-n", ns)
	for _, want := range [][]string{
		{"fine-eip", fineAddr, "ElasticIPAttachment/fine-attach", "node-a", "ARP", "answering", "True", "Attached"},
		{"tiny-2", "-", "-", "-", "-", "False", "NotAllocated"},
		{"routed-eip", "10.225.60.1", "ElasticIPAttachment/routed-attach", "node-a", "BGP", "NoEstablishedPeer", "False", "NotAnnounced"},
	} {
		if !hasRow(status, want) {
			t.Errorf("kubectl juneau status lacks the row %v:\n%s", want, status)
		}
	}
	trace := plugin(t, c, "trace", "-n", ns, "fine-eip")
	for _, want := range []string{"on Node node-a", "nat: " + fineAddr + " <-> ", "arp: this Node's agent answers for " + fineAddr, "counter: juneau_node_arp_replies_total"} {
		if !strings.Contains(trace, want) {
			t.Errorf("kubectl juneau trace fine-eip lacks %q:\n%s", want, trace)
		}
	}
	t.Logf("kubectl juneau status:\n%s\nkubectl juneau trace fine-eip:\n%s", status, trace)

	// Two alerts fire within their `for` window (plus a scrape interval) of their
	// expression first holding.
	<-poolAlert
	<-agentAlert
	t.Logf("node-b's agent removed %s ago", time.Since(agentStopped).Round(time.Second))

	// The webhook down (no replica up) for the webhook alert's expression; back after.
	kubectl(t, c, "", "-n", cluster.SystemNamespace, "scale", "deployment/juneau-webhook", "--replicas=0")
	if err := wait.PollUntilContextTimeout(testContext(t, 2*time.Minute), time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := prom.Query(ctx, byName["JuneauWebhookErrors"].Expr)
		return err == nil && len(s) > 0, nil
	}); err != nil {
		t.Errorf("JuneauWebhookErrors' expression never held with no webhook replica: %v", err)
	}

	// Every dashboard query and every alert expression returns series now.
	queries, err := chart.DashboardQueries(filepath.Join(root, "manifests", "monitoring", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range queries {
		requireSeries(t, prom, "panel "+q.Panel, q.Expr)
	}
	for _, a := range alerts {
		requireSeries(t, prom, "alert "+a.Name, a.Expr)
	}

	// Back to two replicas; one of them may be placed on node-b, which has no agent (no
	// Pod network) until the rollback: the one on node-a answers meanwhile.
	kubectl(t, c, "", "-n", cluster.SystemNamespace, "scale", "deployment/juneau-webhook", "--replicas=2")
	if err := c.WaitWebhook(testContext(t, 3*time.Minute)); err != nil {
		t.Fatal(err)
	}
}

// requireSeries runs expr until it returns a series (the scrape after the seed may not
// have happened yet), failing after two minutes.
func requireSeries(t *testing.T, prom *cluster.Prometheus, what, expr string) {
	t.Helper()
	var last error
	var n int
	if err := wait.PollUntilContextTimeout(testContext(t, 2*time.Minute), time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := prom.Query(ctx, expr)
		last, n = err, len(s)
		return err == nil && n > 0, nil
	}); err != nil {
		t.Errorf("%s: %q returned no series (last error %v)", what, expr, last)
	}
}

// alertFires waits for the alert's expression to hold, then for the alert to fire, and
// requires the second within its `for` window plus one scrape interval (rules are
// evaluated every scrape interval) and a second of polling.
func alertFires(t *testing.T, prom *cluster.Prometheus, a chart.Alert) {
	forWindow, err := a.ForDuration()
	if err != nil {
		t.Errorf("%s: %v", a.Name, err)
		return
	}
	ctx := testContext(t, 10*time.Minute)
	if s, err := prom.Query(ctx, a.Expr); err != nil || len(s) > 0 {
		t.Errorf("%s: its expression holds before its seed (%v): %v", a.Name, err, s)
		return
	}
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 6*time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := prom.Query(ctx, a.Expr)
		return err == nil && len(s) > 0, nil
	}); err != nil {
		t.Errorf("%s: its expression never held: %v", a.Name, err)
		return
	}
	// held is when the expression last started to hold: an alert whose expression stops
	// holding starts over (the agent's scrape target goes with its Pod some time before
	// its heartbeat Lease expires, say).
	held := time.Now()
	deadline := forWindow + scrapeInterval + time.Second
	var state string
	resets := 0
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*deadline+time.Minute, true, func(ctx context.Context) (bool, error) {
		alerts, err := prom.Alerts(ctx)
		if err != nil {
			return false, nil
		}
		if s, err := prom.Query(ctx, a.Expr); err == nil && len(s) == 0 {
			held = time.Time{}
		} else if err == nil && held.IsZero() {
			held, resets = time.Now(), resets+1
		}
		for _, al := range alerts {
			if al.Labels["alertname"] == a.Name {
				state = al.State
				if al.State == "firing" {
					return true, nil
				}
			}
		}
		return false, nil
	})
	took := time.Since(held)
	if resets > 0 {
		t.Logf("%s: its expression stopped holding and held again %d times", a.Name, resets)
	}
	switch {
	case err != nil:
		t.Errorf("%s did not fire (last state %q) within %s of its expression holding", a.Name, state, took.Round(time.Second))
	case took > deadline:
		t.Errorf("%s fired %s after its expression held, want within %s (for %s + scrape interval %s + 1s)", a.Name, took.Round(100*time.Millisecond), deadline, forWindow, scrapeInterval)
	default:
		t.Logf("%s fired %s after its expression held (for: %s)", a.Name, took.Round(100*time.Millisecond), forWindow)
	}
}

// hasRow reports whether a line of a table holds exactly the fields want after its
// first (namespace) column.
func hasRow(table string, want []string) bool {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) == len(want)+1 && strings.Join(f[1:], " ") == strings.Join(want, " ") {
			return true
		}
	}
	return false
}
