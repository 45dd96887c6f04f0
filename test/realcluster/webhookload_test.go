package realcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/admission"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/cluster"
	"github.com/loutres/juneau/test/images"
)

const (
	// floodWorkers POST to the webhook at once from one Pod, twice its bound on
	// reviews in flight.
	floodWorkers = 2 * admission.DefaultMaxInFlight
	floodFor     = 40 * time.Second
	// loadReviews real writes go through the webhook while it is flooded.
	loadReviews = 20
	// webhookMemoryLimit is the webhook container's limit (manifests/webhook).
	webhookMemoryLimit = 512 << 20
)

// testWebhookUnderLoad: a Pod of an ordinary namespace sends the webhook, through its
// Service, twice its bound of requests at once for 40 s — every other one a 3 MiB body,
// the others a forged review of an ElasticIP on a network the cache does not hold (each
// asks the API server whether it exists). Meanwhile real ElasticIP writes, reviewed by
// the same webhook, keep succeeding (their latency printed); no replica of the webhook
// is restarted or replaced (the controller must not take a busy replica for a dead
// one), their peak resident memory stays under their limit, and their reads of the API
// server stay within their budget.
func testWebhookUnderLoad(t *testing.T, c *cluster.Cluster) {
	ns := namespace(t, c, "flood")
	hooks := webhookReplicas(t, c)
	svc, err := c.Kube.CoreV1().Services(cluster.SystemNamespace).Get(testContext(t, time.Minute), "juneau-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	forged, err := json.Marshal(map[string]any{
		"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
		"request": map[string]any{
			"uid":       "forged",
			"kind":      map[string]string{"group": v1alpha1.GroupName, "version": "v1alpha1", "kind": "ElasticIP"},
			"resource":  map[string]string{"group": v1alpha1.GroupName, "version": "v1alpha1", "resource": "elasticips"},
			"namespace": ns, "name": "forged", "operation": "CREATE",
			"userInfo": map[string]string{"username": "forged"},
			"object": map[string]any{"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": "ElasticIP",
				"metadata": map[string]string{"name": "forged", "namespace": ns},
				"spec":     map[string]string{"externalNetwork": "forged-net"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The reads are counted from here to the last count below: the budget is for that
	// window, which begins before the flood does (the Pod floods as soon as its container
	// starts, before the Pod is seen Running below).
	readsBefore, counting := liveReads(t, c, hooks), time.Now()
	url := fmt.Sprintf("https://%s:443%s", svc.Spec.ClusterIP, admission.PathJuneau)
	pod := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: flood}
spec:
  restartPolicy: Never
  containers:
  - name: flood
    image: %s
    command: ["/box", "flood", "-c", "%d", "-for", "%s", "-review", %q, %q]
`, images.Box, floodWorkers, floodFor, forged, url)
	kubectl(t, c, pod, "-n", ns, "apply", "-f", "-")
	if err := wait.PollUntilContextTimeout(testContext(t, 2*time.Minute), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := c.Kube.CoreV1().Pods(ns).Get(ctx, "flood", metav1.GetOptions{})
		return err == nil && p.Status.Phase != corev1.PodPending, nil
	}); err != nil {
		t.Fatalf("the flooding Pod never started: %v", err)
	}
	started := time.Now()

	// Real writes while it floods: each ElasticIP create is reviewed by the webhook.
	var took []time.Duration
	for i := range loadReviews {
		ctx := testContext(t, 30*time.Second)
		begin := time.Now()
		_, err := c.Juneau.JuneauV1alpha1().ElasticIPs(ns).Create(ctx, &v1alpha1.ElasticIP{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("real-%d", i)},
			Spec:       v1alpha1.ElasticIPSpec{ExternalNetwork: "ext-net"},
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		took = append(took, time.Since(begin))
		if err != nil {
			t.Errorf("a real ElasticIP write %s into the flood: %v", time.Since(started).Round(time.Millisecond), err)
		}
		if time.Since(started) > floodFor {
			t.Errorf("only %d real writes during the flood", i+1)
			break
		}
	}
	slices.Sort(took)
	t.Logf("real ElasticIP writes during the flood: %d, latency p50 %s, max %s", len(took),
		took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))

	var phase corev1.PodPhase
	if err := wait.PollUntilContextTimeout(testContext(t, 2*time.Minute), time.Second, floodFor+time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := c.Kube.CoreV1().Pods(ns).Get(ctx, "flood", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, nil
	}); err != nil {
		t.Fatalf("the flooding Pod is still %s: %v", phase, err)
	}
	answers := kubectl(t, c, "", "-n", ns, "logs", "flood")
	t.Logf("the flooding Pod (%d at once for %s): %s", floodWorkers, floodFor, strings.TrimSpace(answers))
	if !strings.Contains(answers, " 429=") || !strings.Contains(answers, " 400=") {
		t.Errorf("the flood was not both judged and refused (400 for the padding, 429 beyond the bound): %s", answers)
	}

	after := webhookReplicas(t, c)
	for uid, hook := range hooks {
		now, ok := after[uid]
		switch {
		case !ok:
			t.Fatalf("the webhook replica %s was replaced during the flood (replicas now: %s)", hook.Name, replicaNames(after))
		case restarts(now) != restarts(hook):
			t.Errorf("the webhook replica %s restarted during the flood (%d restarts, %d before)", hook.Name, restarts(now), restarts(hook))
		}
		webhookPeakMemory(t, c, now)
	}
	reads, elapsed := liveReads(t, c, hooks)-readsBefore, time.Since(counting)
	budget := len(hooks) * (int(elapsed.Seconds()*20) + 50)
	t.Logf("the webhook replicas' reads of the API server during the flood: %d (budget %d)", reads, budget)
	if reads > budget {
		t.Errorf("the webhook replicas read the API server %d times in %s, more than their budget of %d", reads, elapsed.Round(time.Second), budget)
	}
}

// webhookPeakMemory checks that one webhook replica never held its memory limit resident.
func webhookPeakMemory(t *testing.T, c *cluster.Cluster, hook *corev1.Pod) {
	t.Helper()
	// The webhook is the container's process 1; VmHWM is the most it ever held resident.
	status, err := c.KubectlRun(testContext(t, time.Minute), "", "-n", hook.Namespace, "exec", hook.Name, "-c", "webhook", "--", "cat", "/proc/1/status")
	if err != nil {
		t.Fatalf("the webhook's memory: %v", err)
	}
	var bytes int64
	for _, line := range strings.Split(status, "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" && f[2] == "kB" {
			kib, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			bytes = kib << 10
		}
	}
	if bytes == 0 {
		t.Fatalf("no VmHWM in the webhook's /proc/1/status:\n%s", status)
	}
	t.Logf("the webhook replica %s's peak resident memory: %d MiB (limit %d MiB)", hook.Name, bytes>>20, webhookMemoryLimit>>20)
	if bytes >= webhookMemoryLimit {
		t.Errorf("the webhook replica %s held %d MiB resident, its limit is %d MiB", hook.Name, bytes>>20, webhookMemoryLimit>>20)
	}
}

// webhookReplicas are the webhook's running Pods by UID; the Deployment is rolled out
// (every replica Ready) first, so the flood meets all of them.
func webhookReplicas(t *testing.T, c *cluster.Cluster) map[types.UID]*corev1.Pod {
	t.Helper()
	if _, err := c.KubectlRun(testContext(t, 2*time.Minute), "", "-n", cluster.SystemNamespace, "rollout", "status", "deployment/juneau-webhook", "--timeout=90s"); err != nil {
		t.Fatalf("the webhook's Deployment: %v", err)
	}
	pods := map[types.UID]*corev1.Pod{}
	for _, p := range componentPods(t, c, "webhook") {
		pods[p.UID] = p
	}
	return pods
}

// replicaNames lists the replicas' names, sorted.
func replicaNames(pods map[types.UID]*corev1.Pod) string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// restarts sums the restarts of the Pod's containers.
func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

// liveReads is the replicas' count of reads of the API server made for reviews
// (juneau_webhook_live_reads_total, outcome "read"), from their metrics endpoints,
// read as Prometheus reads them (docs/operations.md#metrics-and-health).
func liveReads(t *testing.T, c *cluster.Cluster, hooks map[types.UID]*corev1.Pod) int {
	t.Helper()
	n := 0
	for _, hook := range hooks {
		out, err := c.Metrics(testContext(t, time.Minute), net.JoinHostPort(hook.Status.PodIP, "9092"))
		if err != nil {
			t.Fatalf("the webhook replica %s's metrics: %v", hook.Name, err)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "juneau_webhook_live_reads_total{") && strings.Contains(line, `outcome="read"`) {
				f := strings.Fields(line)
				v, _ := strconv.ParseFloat(f[len(f)-1], 64)
				n += int(v)
			}
		}
	}
	return n
}
