package realcluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/status"
	"github.com/loutres/juneau/test/cluster"
	"github.com/loutres/juneau/test/images"
)

// testNATAndDirect: one ElasticIP translated to a Pod by NAT, one carried by a Pod's
// eth0; both work as a user sees it (eipWorks), and both Pods' outbound connections
// arrive with their ElasticIP as source.
func testNATAndDirect(t *testing.T, c *cluster.Cluster) {
	ns := namespace(t, c, "spec")
	// The Pods first: the webhook refuses an attachment to a Pod that does not exist.
	kubectl(t, c, eipYAML("dir-eip")+gatedBoxPod("dir", `{juneau.loutres.me/elastic-ip: dir-eip}`)+"---\n"+
		gatedBoxPod("nat", "")+"---\n"+natYAML("nat"), "-n", ns, "apply", "-f", "-")
	waitPods(t, c, ns, "nat", "dir")
	w, err := c.ServeWhoami(9000)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, u := range []struct{ pod, eip string }{{"nat", "nat-eip"}, {"dir", "dir-eip"}} {
		addr := eipWorks(t, c, ns, u.eip, u.pod)
		src, err := c.SourceOf(testContext(t, 2*time.Minute), w.Addr, "", ns, u.pod, "")
		if err != nil || src != addr {
			t.Errorf("%s's connection to the client arrives from %q (%v), want its ElasticIP %s", u.pod, src, err, addr)
		}
	}
}

// podTemplate is a box Pod asking for an ElasticIP of its own, gated on it.
const podTemplate = `metadata:
      labels: {app: %[1]s}
      annotations: {juneau.loutres.me/pod-with-eip: "true"}
    spec:
      terminationGracePeriodSeconds: 5
      readinessGates: [{conditionType: juneau.loutres.me/elastic-ip}]
      containers: [{name: web, image: %[2]s}]`

// testDeployment: each Pod of a Deployment gets an ElasticIP of its own, reachable from
// outside; a Pod replaced by the ReplicaSet gets a new one and the old is released.
func testDeployment(t *testing.T, c *cluster.Cluster) {
	ns := namespace(t, c, "deploy")
	kubectl(t, c, fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    `+podTemplate+`
`, "web", images.Box), "-n", ns, "apply", "-f", "-")
	kubectl(t, c, "", "-n", ns, "rollout", "status", "deployment/web", "--timeout=4m")
	pods := podsOf(t, c, ns, "app=web")
	if len(pods) != 2 {
		t.Fatalf("%d Pods, want 2", len(pods))
	}
	seen := map[string]string{}
	for _, p := range pods {
		addr := eipWorks(t, c, ns, p, p)
		if other, dup := seen[addr]; dup {
			t.Fatalf("%s and %s share %s", p, other, addr)
		}
		seen[addr] = p
	}

	old := pods[0]
	kubectl(t, c, "", "-n", ns, "delete", "pod", old, "--wait=true")
	gone(t, "the ElasticIP of the replaced Pod "+old, 2*time.Minute, func(ctx context.Context) error {
		_, err := c.Juneau.JuneauV1alpha1().ElasticIPs(ns).Get(ctx, old, metav1.GetOptions{})
		return err
	})
	kubectl(t, c, "", "-n", ns, "rollout", "status", "deployment/web", "--timeout=4m")
	for _, p := range podsOf(t, c, ns, "app=web") {
		if p != pods[1] {
			eipWorks(t, c, ns, p, p)
		}
	}
}

func podsOf(t *testing.T, c *cluster.Cluster, ns, selector string) []string {
	t.Helper()
	list, err := c.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	return out
}

// testStatefulSet: a StatefulSet's Pod deleted and re-created by the StatefulSet
// controller comes back under its name with the same ElasticIP, reachable again.
func testStatefulSet(t *testing.T, c *cluster.Cluster) {
	ns := namespace(t, c, "sts")
	kubectl(t, c, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: db}
spec:
  clusterIP: None
  selector: {app: db}
  ports: [{port: 80}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 1
  selector: {matchLabels: {app: db}}
  template:
    `+podTemplate+`
`, "db", images.Box), "-n", ns, "apply", "-f", "-")
	waitForPod(t, c, ns, "db-0")
	waitPods(t, c, ns, "db-0")
	before, err := c.Kube.CoreV1().Pods(ns).Get(context.Background(), "db-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	addr := eipWorks(t, c, ns, "db-0", "db-0")

	kubectl(t, c, "", "-n", ns, "delete", "pod", "db-0", "--wait=true")
	var after *corev1.Pod
	err = wait.PollUntilContextTimeout(testContext(t, 3*time.Minute), 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		after, err = c.Kube.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
		return err == nil && after.UID != before.UID, nil
	})
	if err != nil {
		t.Fatalf("the StatefulSet did not re-create db-0: %v", err)
	}
	waitPods(t, c, ns, "db-0")
	// The client's neighbour cache may still hold the MAC of the Node that answered for
	// the address before (juneau sends no gratuitous ARP by default): eipWorks flushes it.
	if again := eipWorks(t, c, ns, "db-0", "db-0"); again != addr {
		t.Fatalf("re-created db-0 got %s, want its address %s back", again, addr)
	}
	t.Logf("db-0 ran on %s, then on %s, with %s", before.Spec.NodeName, after.Spec.NodeName, addr)
}

// waitForPod waits until a Pod exists (a controller creates it).
func waitForPod(t *testing.T, c *cluster.Cluster, ns, name string) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(testContext(t, 2*time.Minute), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("Pod %s/%s never created: %v", ns, name, err)
	}
}

// testReadinessGate: the kubelet keeps a Pod with juneau's readiness gate NotReady while
// its containers are ready but no ElasticIP reaches it, and makes it Ready once the Node
// programmed one: at that moment the external client reaches it at the first attempt.
func testReadinessGate(t *testing.T, c *cluster.Cluster) {
	ns := namespace(t, c, "gate")
	kubectl(t, c, boxPodYAML("gated", "")+"  readinessGates: [{conditionType: juneau.loutres.me/elastic-ip}]\n", "-n", ns, "apply", "-f", "-")
	pods := c.Kube.CoreV1().Pods(ns)
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(testContext(t, 3*time.Minute), 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		last, err = pods.Get(ctx, "gated", metav1.GetOptions{})
		return err == nil && condition(last, corev1.ContainersReady) == corev1.ConditionTrue &&
			condition(last, v1alpha1.PodConditionElasticIP) == corev1.ConditionFalse, nil
	})
	if err != nil {
		t.Fatalf("the agent did not set the gate False on a running Pod without ElasticIP: %v\n%+v", err, last.Status.Conditions)
	}
	if r := condition(last, corev1.PodReady); r != corev1.ConditionFalse {
		t.Fatalf("Ready is %q with containers ready and the gate False, want False", r)
	}

	kubectl(t, c, natYAML("gated"), "-n", ns, "apply", "-f", "-")
	w, err := pods.Watch(testContext(t, 3*time.Minute), metav1.ListOptions{FieldSelector: "metadata.name=gated"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok || condition(p, corev1.PodReady) != corev1.ConditionTrue {
			continue
		}
		eip, err := c.Juneau.JuneauV1alpha1().ElasticIPs(ns).Get(context.Background(), "gated-eip", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.ClientGet(testContext(t, 10*time.Second), "http://"+eip.Status.Address+"/")
		if err != nil || !strings.HasPrefix(got, "hello from gated") {
			t.Fatalf("the Pod became Ready, but the external client does not reach %s yet: %q %v", eip.Status.Address, got, err)
		}
		return
	}
	t.Fatal("the Pod never became Ready")
}

func condition(p *corev1.Pod, typ corev1.PodConditionType) corev1.ConditionStatus {
	if c := status.PodCondition(p, string(typ)); c != nil {
		return c.Status
	}
	return ""
}
