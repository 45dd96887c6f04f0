package realcluster

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/cluster"
	"github.com/loutres/juneau/test/doctest"
	"github.com/loutres/juneau/test/images"
)

// testGarbageCollection: a Pod's NetworkInterface is owned by the Pod, and the
// garbage collector of kube-controller-manager deletes it with the Pod, even while no
// juneau controller runs.
func testGarbageCollection(t *testing.T, c *cluster.Cluster) {
	ns := namespace(t, c, "gc")
	kubectl(t, c, boxPodYAML("owner", ""), "-n", ns, "apply", "-f", "-")
	waitPods(t, c, ns, "owner")
	pod, err := c.Kube.CoreV1().Pods(ns).Get(context.Background(), "owner", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nics := c.Juneau.JuneauV1alpha1().NetworkInterfaces(ns)
	if err := wait.PollUntilContextTimeout(testContext(t, 2*time.Minute), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		nic, err := nics.Get(ctx, "owner.eth0", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		owner := metav1.GetControllerOf(nic)
		return owner != nil && owner.UID == pod.UID && owner.Kind == "Pod", nil
	}); err != nil {
		t.Fatalf("NetworkInterface owner.eth0 owned by the Pod: %v", err)
	}

	scaleController(t, c, 0)
	defer scaleController(t, c, 2)
	kubectl(t, c, "", "-n", ns, "delete", "pod", "owner", "--wait=true")
	gone(t, "NetworkInterface owner.eth0 (its Pod deleted, no juneau controller running)", 2*time.Minute, func(ctx context.Context) error {
		_, err := nics.Get(ctx, "owner.eth0", metav1.GetOptions{})
		return err
	})
}

// scaleController sets the controller's replicas and waits until they run (or are gone).
func scaleController(t *testing.T, c *cluster.Cluster, replicas int) {
	t.Helper()
	kubectl(t, c, "", "-n", cluster.SystemNamespace, "scale", "deployment/juneau-controller", fmt.Sprintf("--replicas=%d", replicas))
	kubectl(t, c, "", "-n", cluster.SystemNamespace, "rollout", "status", "deployment/juneau-controller", "--timeout=3m")
	if err := wait.PollUntilContextTimeout(testContext(t, 2*time.Minute), 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Kube.CoreV1().Pods(cluster.SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=controller"})
		return err == nil && len(pods.Items) == replicas, nil
	}); err != nil {
		t.Fatalf("controller Pods not %d: %v", replicas, err)
	}
}

// testWebhook: what the webhook refuses is refused through its Service, with the
// field and the object in the way named, as kubectl shows it to the user.
func testWebhook(t *testing.T, c *cluster.Cluster) {
	ns := namespace(t, c, "admission")
	for _, tc := range []struct {
		name, manifest, want string
	}{
		{"an ElasticIP on a network that does not exist", `apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIP
metadata: {name: lost}
spec: {externalNetwork: nowhere}
`, `spec.externalNetwork: Invalid value: "nowhere": ExternalNetwork "nowhere" does not exist`},
		{"a Pod with an invalid annotation", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: maybe
  annotations: {juneau.loutres.me/pod-with-eip: "maybe"}
spec:
  containers: [{name: web, image: %s}]
`, images.Box), `metadata.annotations[juneau.loutres.me/pod-with-eip]: Unsupported value: "maybe"`},
	} {
		out, err := c.KubectlRun(testContext(t, time.Minute), tc.manifest, "-n", ns, "create", "-f", "-")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: kubectl create: %v %s; want a refusal saying %s", tc.name, err, out, tc.want)
		}
	}
	// The same refusals come from the webhook itself (its name is in the API error).
	_, err := c.Juneau.JuneauV1alpha1().ElasticIPs(ns).Create(context.Background(), mustEIP(ns), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), `admission webhook "validate.juneau.loutres.me" denied the request`) {
		t.Errorf("creating an ElasticIP on a missing network: %v, want the webhook's denial", err)
	}
}

// testRollout: a rolling update of the node DaemonSet, every agent replaced one by one,
// under continuous UDP traffic from the external client to a Pod behind NAT: not one
// datagram is lost, since a stopping agent leaves its rules to the next one.
func testRollout(t *testing.T, c *cluster.Cluster) {
	ns := namespace(t, c, "rollout")
	kubectl(t, c, boxPodYAML("echo", "")+"    args: [serve, -udp, \":7\"]\n  readinessGates: [{conditionType: juneau.loutres.me/elastic-ip}]\n---\n"+natYAML("echo"), "-n", ns, "apply", "-f", "-")
	waitPods(t, c, ns, "echo")
	addr := eipWorks(t, c, ns, "echo-eip", "echo")

	agents := agentPods(t, c)
	f := startFlow(t, c, addr+":7", 20*time.Millisecond)
	kubectl(t, c, "", "-n", cluster.NodeNamespace, "rollout", "restart", "daemonset/juneau-node")
	kubectl(t, c, "", "-n", cluster.NodeNamespace, "rollout", "status", "daemonset/juneau-node", "--timeout=5m")
	for name := range agentPods(t, c) {
		if agents[name] {
			t.Errorf("agent Pod %s was not replaced", name)
		}
	}
	// The new agents have taken over: a hundred more round trips through them.
	if err := f.waitEchoes(100, time.Minute); err != nil {
		t.Fatalf("after the rollout: %v", err)
	}
	sent, lost := f.stop()
	t.Logf("%d datagrams through the ElasticIP during the rollout, %d lost", sent, len(lost))
	if sent < 100 || len(lost) > 0 {
		t.Fatalf("%d datagrams sent, %d lost (sequence numbers %v)", sent, len(lost), lost)
	}
}

// agentPods lists the node agents' Pods.
func agentPods(t *testing.T, c *cluster.Cluster) map[string]bool {
	t.Helper()
	pods, err := c.Kube.CoreV1().Pods(cluster.NodeNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=node"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			out[p.Name] = true
		}
	}
	return out
}

// flow sends numbered datagrams from the external client and records the echoes.
type flow struct {
	conn     net.Conn
	stopSend chan struct{}
	sending  sync.WaitGroup // the sender: stop waits for it before counting
	wg       sync.WaitGroup // the reader
	mu       sync.Mutex
	sent     uint64
	got      map[uint64]bool
}

func startFlow(t *testing.T, c *cluster.Cluster, addr string, every time.Duration) *flow {
	t.Helper()
	conn, err := c.ClientDial(context.Background(), "udp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	f := &flow{conn: conn, stopSend: make(chan struct{}), got: map[uint64]bool{}}
	f.wg.Go(func() {
		buf := make([]byte, 64)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			if n >= 8 {
				f.mu.Lock()
				f.got[binary.BigEndian.Uint64(buf)] = true
				f.mu.Unlock()
			}
		}
	})
	f.sending.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		msg := make([]byte, 8)
		for {
			select {
			case <-f.stopSend:
				return
			case <-tick.C:
				f.mu.Lock()
				binary.BigEndian.PutUint64(msg, f.sent)
				f.sent++
				f.mu.Unlock()
				_, _ = conn.Write(msg)
			}
		}
	})
	t.Cleanup(func() { conn.Close() })
	return f
}

// waitEchoes waits until n more echoes than now have come back.
func (f *flow) waitEchoes(n int, timeout time.Duration) error {
	f.mu.Lock()
	want := len(f.got) + n
	f.mu.Unlock()
	return wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.got) >= want, nil
	})
}

// stop ends the flow, waits for the last echoes and returns what was sent and lost.
// The sender is waited for first: its select may still take a ready tick after
// stopSend closes, and a datagram sent then must be counted before the echoes are.
func (f *flow) stop() (sent uint64, lost []uint64) {
	close(f.stopSend)
	f.sending.Wait()
	_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return uint64(len(f.got)) >= f.sent, nil
	})
	f.conn.Close()
	f.wg.Wait()
	for i := uint64(0); i < f.sent; i++ {
		if !f.got[i] {
			lost = append(lost, i)
		}
	}
	return f.sent, lost
}

// testUninstall: the uninstall steps of docs/operations.md, run while the pages' Pods
// still use ElasticIPs in every way (directly, automatically, by NAT), remove juneau;
// once the Pods left are gone too, every Node's CNI configuration, nftables and routes
// are as before the install.
func testUninstall(t *testing.T, c *cluster.Cluster) {
	ctx := testContext(t, 10*time.Minute)
	pods, err := c.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, p := range pods.Items {
		for k := range p.Annotations {
			if strings.HasPrefix(k, "juneau.loutres.me/") && p.Namespace != cluster.SystemNamespace && p.Namespace != cluster.NodeNamespace {
				users = append(users, p.Namespace+"/"+p.Name)
				break
			}
		}
	}
	t.Logf("Pods with juneau annotations before the uninstall: %v", users)

	start := time.Now()
	shared.docs.RunStage(t, doctest.StageUninstall, shared.pages)
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("the uninstall steps took %s", time.Since(start).Round(100*time.Millisecond))
	// The workloads left running (NAT Pods keep running through the uninstall) go, as a
	// user's would some day, so that the primary CNI's routes of their Pods go too.
	kubectl(t, c, "", "delete", "pods", "--all", "-n", "default", "--wait=true")
	nss, err := c.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nss.Items {
		if n.Status.Phase == corev1.NamespaceTerminating {
			gone(t, "namespace "+n.Name, 3*time.Minute, func(ctx context.Context) error {
				_, err := c.Kube.CoreV1().Namespaces().Get(ctx, n.Name, metav1.GetOptions{})
				return err
			})
		}
	}
	for _, crd := range []string{"elasticips.juneau.loutres.me", "addresspools.juneau.loutres.me"} {
		if _, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + crd).DoRaw(ctx); !apierrors.IsNotFound(err) {
			t.Errorf("CRD %s still there: %v", crd, err)
		}
	}
	waitNodesAsBefore(ctx, t, c, "kubectl delete -k")
}

// waitNodesAsBefore waits until every Node's state (readNodeState) is what it was
// before the install, after what (an uninstall).
func waitNodesAsBefore(ctx context.Context, t *testing.T, c *cluster.Cluster, what string) {
	t.Helper()
	var diffs string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var now string
		for _, n := range c.Nodes {
			s, err := readNodeState(ctx, n)
			if err != nil {
				return false, nil // retried; diffs keeps the last complete comparison
			}
			if d := shared.before[n.Name].diff(s); d != "" {
				now += n.Name + ":\n" + d
			}
		}
		diffs = now
		return diffs == "", nil
	})
	if err != nil {
		t.Fatalf("after %s the Nodes differ from before the install (%v):\n%s", what, err, diffs)
	}
}

func mustEIP(ns string) *v1alpha1.ElasticIP {
	return &v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lost-again"},
		Spec: v1alpha1.ElasticIPSpec{ExternalNetwork: "nowhere"}}
}
