package realcluster

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/bgprouter"
	"github.com/loutres/juneau/test/cluster"
	"github.com/loutres/juneau/test/images"
)

// spareNode is the Node the failure test adds and powers off; no other scenario sees it.
const spareNode = "node-c"

// failoverCase is one way the Node failure is met.
type failoverCase struct {
	name string
	// network of the automatic ElasticIP: ext-net (arp) or bgp-net.
	network string
	// garp is ext-net's spec.gratuitousARP.
	garp bool
	// bfd: the BGPPeer has spec.bfd (and BIRD runs BFD with every Node).
	bfd bool
}

// failoverTimes are measured from the power-off.
type failoverTimes struct {
	// twinReady: the twin's new Pod Ready (no juneau: the scheduler's and the kubelet's
	// own time); ready: the ElasticIP Pod's, readiness gate included; reply: the
	// external client's first reply at the ElasticIP; webhookOut: the dead Node's
	// webhook replica out of the Service's ready endpoints.
	twinReady, ready, reply, webhookOut time.Duration
}

// testNodeFailure: a Node that dies with an ElasticIP's Pod on it, and one of the
// webhook's replicas. node-c joins the cluster; a StatefulSet Pod with an automatic
// ElasticIP runs there, beside a twin StatefulSet without juneau; node-c is powered off
// (its link down, every process of it SIGKILLed: cluster.Node.PowerOff) and at once
// cordoned and both Pods force-deleted, as docs/operations.md#a-node-dies tells an
// operator. Measured from the power-off: both new Pods Ready on another Node, the
// external client's first reply at the ElasticIP, and the dead webhook replica's exit
// from the endpoints. The ElasticIP Pod may be Ready at most 2 s (the goal) plus 1 s
// (the two sandboxes' own spread) after the twin, and over the goal is logged; with
// gratuitous ARP or on bgp the client is answered within 2 s of Ready. Then node-c is powered on
// again for the next case, and removed at the end.
func testNodeFailure(t *testing.T, c *cluster.Cluster) {
	ctx := testContext(t, 30*time.Minute)
	n, err := c.AddNode(ctx, spareNode)
	if err != nil {
		t.Fatal(err)
	}
	others := otherNodes(c, n)
	t.Cleanup(func() { removeSpare(t, c, n) })
	waitNodeUp(t, c, n, 2, time.Time{})
	// One webhook replica on node-c: the third, placed while the others are cordoned.
	setCordon(t, c, true, others...)
	kubectl(t, c, "", "-n", cluster.SystemNamespace, "scale", "deployment/juneau-webhook", "--replicas=3")
	webhookOnNode(t, c, n)
	setCordon(t, c, false, others...)
	t.Cleanup(func() {
		kubectl(t, c, "", "-n", cluster.SystemNamespace, "scale", "deployment/juneau-webhook", "--replicas=2")
	})
	garp := kubectl(t, c, "", "get", "externalnetwork", "ext-net", "-o", "jsonpath={.spec.gratuitousARP}")
	t.Cleanup(func() { setGratuitousARP(t, c, garp == "true") })

	results := map[string]failoverTimes{}
	var order []string
	run := func(t *testing.T, fc failoverCase, client string, router bgprouter.Router) {
		t.Run(fc.name, func(t *testing.T) {
			table := func(string) {}
			if fc.network == "bgp-net" {
				setBFD(t, c, fc.bfd)
				table = func(when string) {
					out, err := router.Table()
					t.Logf("the router's table %s (%v):\n%s", when, err, out)
				}
			} else {
				setGratuitousARP(t, c, fc.garp)
			}
			got := failover(t, c, n, others, fc, client, table)
			results[fc.name] = got
			order = append(order, fc.name)
			t.Logf("%s: from power-off, twin Ready %s, ElasticIP Pod Ready %s (+%s), first reply %s (%s after Ready)",
				fc.name, got.twinReady, got.ready, got.ready-got.twinReady, got.reply, got.reply-got.ready)
			// The goal is 2 s. A write of the new Pod (the StatefulSet controller
			// creates it within a second of the power-off here) that the API server
			// sends to the dead webhook replica before juneau's controller took it out
			// (0.6-0.9 s) costs the webhook's timeout (1 s for the Pod, 2 s for juneau's
			// objects: docs/operations.md#a-node-dies), and the Pod's addresses from the
			// CNI ADD make the gate True before the kubelet's report of its IP; the
			// sandboxes of the two Pods vary by up to a second on this machine.
			extra := got.ready - got.twinReady
			if extra > 2*time.Second {
				t.Logf("%s: the ElasticIP Pod was Ready %s after its twin, over the 2s goal", fc.name, extra)
			}
			if limit := 3 * time.Second; extra > limit {
				t.Errorf("the ElasticIP Pod was Ready %s after its twin without juneau, want at most %s", extra, limit)
			}
			// On bgp the newest path wins, BFD or not (bgp.MEDOf); BFD only clears the
			// stale one sooner.
			if (fc.garp || fc.network == "bgp-net") && got.reply-got.ready > 2*time.Second {
				t.Errorf("the client was answered %s after the Pod was Ready, want within 2s", got.reply-got.ready)
			}
		})
	}
	run(t, failoverCase{name: "arp-gratuitous-arp", network: "ext-net", garp: true}, c.ClientNS, nil)
	run(t, failoverCase{name: "arp-without-gratuitous-arp", network: "ext-net"}, c.ClientNS, nil)
	// bgp: BIRD with and without BFD, then FRR without BFD, which prefers the older of
	// two eBGP paths by default and so keeps the dead Node's but for the MED. Each
	// router runs in a subtest of its own, which removes it and bgp-net when it ends.
	for _, kind := range []string{bgprouter.KindBIRD, bgprouter.KindFRR} {
		t.Run(kind, func(t *testing.T) {
			far, router := failoverRouter(t, c, kind)
			prefix := "bgp"
			if kind != bgprouter.KindBIRD {
				prefix = kind
			}
			if kind == bgprouter.KindBIRD {
				run(t, failoverCase{name: prefix + "-bfd", network: "bgp-net", bfd: true}, far, router)
			}
			run(t, failoverCase{name: prefix + "-without-bfd", network: "bgp-net"}, far, router)
		})
	}
	var table strings.Builder
	fmt.Fprintf(&table, "Node failure, times from the power-off:\n%-28s %10s %10s %10s %11s\n", "case", "twinReady", "ready", "reply", "webhookOut")
	for _, name := range order {
		r := results[name]
		fmt.Fprintf(&table, "%-28s %10s %10s %10s %11s\n", name, r.twinReady.Round(10*time.Millisecond),
			r.ready.Round(10*time.Millisecond), r.reply.Round(10*time.Millisecond), r.webhookOut.Round(10*time.Millisecond))
	}
	t.Log(table.String())
	// make test prints it after the tier: go test shows no log of a test that passed.
	if path := os.Getenv("JUNEAU_NODE_FAILURE_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(table.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// failover runs one Node failure and powers the Node on again.
func failover(t *testing.T, c *cluster.Cluster, n *cluster.Node, others []*cluster.Node, fc failoverCase, client string, table func(when string)) failoverTimes {
	ns := namespace(t, c, "failover")
	// Gone, with its ElasticIP, before the next case or the removal of bgp-net.
	t.Cleanup(func() {
		showNamespace(t, c, ns)
		kubectl(t, c, "", "delete", "namespace", ns, "--timeout=3m")
	})
	setCordon(t, c, true, others...)
	doomedWebhook := webhookOnNode(t, c, n)
	kubectl(t, c, statefulSetYAML("survivor", `{juneau.loutres.me/pod-with-eip: "true", juneau.loutres.me/eip-external-network: `+fc.network+`}`, true)+
		"---\n"+statefulSetYAML("twin", "{}", false), "-n", ns, "apply", "-f", "-")
	waitForPod(t, c, ns, "survivor-0")
	waitForPod(t, c, ns, "twin-0")
	waitPods(t, c, ns, "survivor-0", "twin-0")
	setCordon(t, c, false, others...)
	before := map[string]types.UID{}
	for _, name := range []string{"survivor-0", "twin-0"} {
		p, err := c.Kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != n.Name {
			t.Fatalf("%s runs on %s, want %s", name, p.Spec.NodeName, n.Name)
		}
		before[name] = p.UID
	}
	p, err := c.Kube.CoreV1().Pods(ns).Get(context.Background(), "survivor-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	url := cluster.URL(p.Annotations[v1alpha1.AnnotationAllocatedEIPAddr])
	var body string
	err = wait.PollUntilContextTimeout(testContext(t, time.Minute), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		body, err = cluster.GetFrom(ctx, client, url, time.Second)
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("GET %s before the failure: %q %v", url, body, err)
	}

	table("before the power-off")
	start := time.Now()
	if err := n.PowerOff(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s powered off", n.Name)
	powered := false
	defer func() {
		if !powered {
			powerOn(t, c, n)
		}
	}()
	setCordon(t, c, true, n)
	kubectl(t, c, "", "-n", ns, "delete", "pod", "survivor-0", "twin-0", "--force", "--grace-period=0")

	replied := make(chan time.Duration, 1)
	probeCtx := testContext(t, 5*time.Minute)
	go func() {
		want := "hello from survivor-0"
		_ = wait.PollUntilContextTimeout(probeCtx, 50*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			body, err := cluster.GetFrom(ctx, client, url, 300*time.Millisecond)
			if err == nil && strings.HasPrefix(body, want) {
				replied <- time.Since(start)
				return true, nil
			}
			return false, nil
		})
		close(replied)
	}()
	var got failoverTimes
	way := newSteps(start)
	ready := map[string]*time.Duration{"survivor-0": &got.ready, "twin-0": &got.twinReady}
	err = wait.PollUntilContextTimeout(testContext(t, 4*time.Minute), 50*time.Millisecond, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		way.observeWebhook(ctx, c, doomedWebhook)
		done := true
		for name, at := range ready {
			if *at != 0 {
				continue
			}
			p, err := c.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err == nil && p.UID != before[name] && name == "survivor-0" {
				way.observe(ctx, c, ns, p, fc.network)
			}
			if err == nil && p.UID != before[name] && condition(p, corev1.PodReady) == corev1.ConditionTrue {
				*at = time.Since(start)
				continue
			}
			done = false
		}
		return done, nil
	})
	if err != nil {
		out, _ := c.KubectlRun(context.Background(), "", "-n", ns, "describe", "pods")
		t.Fatalf("the re-created Pods were not Ready (survivor %s, twin %s): %v\n%s", got.ready, got.twinReady, err, out)
	}
	table("when both new Pods were Ready")
	reply, ok := <-replied
	if !ok {
		t.Fatalf("the external client got no reply at %s from the re-created survivor-0", url)
	}
	got.reply, got.webhookOut = reply, way.at[stepWebhookOut]
	t.Logf("the ElasticIP Pod's way back, from the power-off (first reply at %s):\n%s", reply.Round(10*time.Millisecond), way)
	table("at the first reply")
	powerOn(t, c, n)
	powered = true
	return got
}

// failoverRouter adds docs/guide-bgp.md's router (BIRD or FRR: bgprouter.KindBIRD,
// KindFRR) and far client, with BFD on the router's side with every Node (a BFD
// failure drops the Node's routes at once) and the learned routes installed, the
// network bgp-net and the BGPPeer tor; it returns the far client's namespace and the
// router. All of it goes when t ends.
func failoverRouter(t *testing.T, c *cluster.Cluster, kind string) (string, bgprouter.Router) {
	router, far := bgpHosts(t, c)
	cfg := guideRouter(c)
	for i := range cfg.Neighbors {
		cfg.Neighbors[i].BFD = true
	}
	// Without juneau's MEDs the older path, the dead Node's, would win here, as it
	// does on FRR by default (docs/bgp.md#the-newest-path-wins).
	cfg.PreferOlder = true
	r := bgprouter.Start(t, kind, router, cfg)
	t.Cleanup(func() { removeBGPGuide(t, c, r, cfg.Neighbors) })
	kubectl(t, c, `apiVersion: juneau.loutres.me/v1alpha1
kind: AddressPool
metadata: {name: bgp-pool}
spec: {advertiseMode: bgp, addresses: [10.225.53.5-10.225.53.99]}
---
apiVersion: juneau.loutres.me/v1alpha1
kind: ExternalNetwork
metadata: {name: bgp-net}
spec: {type: bgp, addressPools: [bgp-pool]}
---
apiVersion: juneau.loutres.me/v1alpha1
kind: BGPPeer
metadata: {name: tor}
spec:
  peerAddress: `+routerIP+`
  peerASN: 64512
  myASN: 64513
  passwordSecretRef: {namespace: juneau-system, name: juneau-bgp-passwords, key: tor}
`, "apply", "-f", "-")
	return far.Path(), r
}

// setBFD sets or removes spec.bfd of the BGPPeer tor and waits until every Node's
// session is Established, with BFD Up when set.
func setBFD(t *testing.T, c *cluster.Cluster, on bool) {
	t.Helper()
	patch := `{"spec":{"bfd":null}}`
	if on {
		patch = `{"spec":{"bfd":{}}}`
	}
	kubectl(t, c, "", "patch", "bgppeer", "tor", "--type=merge", "-p", patch)
	var last string
	err := wait.PollUntilContextTimeout(testContext(t, 2*time.Minute), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, n := range c.Nodes {
			st, err := c.Juneau.JuneauV1alpha1().BGPNodeStatuses().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil || len(st.Status.Peers) != 1 {
				last = fmt.Sprintf("%s: %v", n.Name, err)
				return false, nil
			}
			p := st.Status.Peers[0]
			last = fmt.Sprintf("%s: %+v", n.Name, p)
			if p.State != v1alpha1.BGPSessionEstablished || (p.StateBFD == v1alpha1.BFDUp) != on {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("sessions not Established with BFD %v: %s: %v", on, last, err)
	}
}

// powerOn powers the Node on again and waits until juneau's agent and the webhook's
// replica run there.
func powerOn(t *testing.T, c *cluster.Cluster, n *cluster.Node) {
	t.Helper()
	since := time.Now()
	if err := n.PowerOn(testContext(t, 5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	setCordon(t, c, false, n)
	waitNodeUp(t, c, n, 3, since)
}

// waitNodeUp waits until the node agent on n is Ready, its containers started after
// since (a Pod of a Node that was powered off reads Ready until the kubelet, back,
// restarted it), and the webhook has replicas Ready replicas.
func waitNodeUp(t *testing.T, c *cluster.Cluster, n *cluster.Node, replicas int32, since time.Time) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(testContext(t, 5*time.Minute), 500*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, ns := range []string{cluster.NodeNamespace, cluster.SystemNamespace} {
			pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
			if err != nil || (ns == cluster.NodeNamespace && len(pods.Items) != 1) {
				last = fmt.Sprintf("no agent on %s (%v)", n.Name, err)
				return false, nil
			}
			for _, p := range pods.Items {
				if !startedSince(&p, since) {
					last = fmt.Sprintf("%s/%s on %s not Ready since %s", ns, p.Name, n.Name, since.Format(time.RFC3339))
					return false, nil
				}
			}
		}
		d, err := c.Kube.AppsV1().Deployments(cluster.SystemNamespace).Get(ctx, "juneau-webhook", metav1.GetOptions{})
		if err != nil || d.Status.ReadyReplicas != replicas || d.Status.UpdatedReplicas != replicas {
			last = fmt.Sprintf("webhook replicas not %d Ready (%v)", replicas, err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("%s: %v", last, err)
	}
}

// webhookOnNode makes sure that one of the three webhook replicas runs on n, the other
// Nodes cordoned: when none does (juneau's controller deleted the one that died with
// n), one replica elsewhere is deleted, and the Deployment starts its replacement on n.
func webhookOnNode(t *testing.T, c *cluster.Cluster, n *cluster.Node) (ip string) {
	t.Helper()
	selector := metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=webhook"}
	pods := c.Kube.CoreV1().Pods(cluster.SystemNamespace)
	list, err := pods.List(context.Background(), selector)
	if err != nil {
		t.Fatal(err)
	}
	on := false
	for _, p := range list.Items {
		on = on || (p.Spec.NodeName == n.Name && p.DeletionTimestamp == nil)
	}
	for _, p := range list.Items {
		if !on && p.Spec.NodeName != n.Name && p.DeletionTimestamp == nil {
			if err := pods.Delete(context.Background(), p.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	var last string
	err = wait.PollUntilContextTimeout(testContext(t, 3*time.Minute), 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := pods.List(ctx, selector)
		if err != nil {
			return false, nil
		}
		ready, onNode := 0, false
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil && condition(&p, corev1.PodReady) == corev1.ConditionTrue {
				ready++
				if p.Spec.NodeName == n.Name {
					onNode, ip = true, p.Status.PodIP
				}
			}
		}
		last = fmt.Sprintf("%d webhook replicas Ready, one on %s: %v", ready, n.Name, onNode)
		return ready == 3 && onNode, nil
	})
	if err != nil {
		t.Fatalf("%s: %v", last, err)
	}
	return ip
}

// startedSince: the Pod is Ready and every container of it runs, started at since or
// later.
func startedSince(p *corev1.Pod, since time.Time) bool {
	if condition(p, corev1.PodReady) != corev1.ConditionTrue {
		return false
	}
	for _, st := range p.Status.ContainerStatuses {
		if st.State.Running == nil || st.State.Running.StartedAt.Time.Before(since.Truncate(time.Second)) {
			return false
		}
	}
	return true
}

// statefulSetYAML is a one-replica StatefulSet of box Pods with the annotations (a YAML
// flow map), gated on their ElasticIP when gated.
func statefulSetYAML(name, annotations string, gated bool) string {
	gate := ""
	if gated {
		gate = "\n      readinessGates: [{conditionType: " + v1alpha1.PodConditionElasticIP + "}]"
	}
	return fmt.Sprintf(`apiVersion: apps/v1
kind: StatefulSet
metadata: {name: %[1]s}
spec:
  serviceName: %[1]s
  replicas: 1
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata:
      labels: {app: %[1]s}
      annotations: %[2]s
    spec:
      terminationGracePeriodSeconds: 5%[3]s
      containers: [{name: web, image: %[4]s}]
`, name, annotations, gate, images.Box)
}

// setCordon cordons or uncordons Nodes.
func setCordon(t *testing.T, c *cluster.Cluster, on bool, nodes ...*cluster.Node) {
	t.Helper()
	verb := "uncordon"
	if on {
		verb = "cordon"
	}
	args := []string{verb}
	for _, n := range nodes {
		args = append(args, n.Name)
	}
	kubectl(t, c, "", args...)
}

// setGratuitousARP sets ext-net's spec.gratuitousARP.
func setGratuitousARP(t *testing.T, c *cluster.Cluster, on bool) {
	t.Helper()
	kubectl(t, c, "", "patch", "externalnetwork", "ext-net", "--type=merge", "-p", fmt.Sprintf(`{"spec":{"gratuitousARP":%t}}`, on))
}

// otherNodes are the Nodes of c but n.
func otherNodes(c *cluster.Cluster, n *cluster.Node) []*cluster.Node {
	var out []*cluster.Node
	for _, m := range c.Nodes {
		if m != n {
			out = append(out, m)
		}
	}
	return out
}

// removeSpare takes the spare Node out of the cluster as an operator retires a Node:
// powered off, its Node object and Pods deleted, its routes gone from the others. The
// Node object goes first: while it exists, the DaemonSet controller re-creates the
// agent Pod deleted on it, and that Pod would be left to the Pod garbage collector
// (a minute later), holding up the deletion of the agents' namespace at uninstall.
func removeSpare(t *testing.T, c *cluster.Cluster, n *cluster.Node) {
	if err := c.RemoveNode(n); err != nil {
		t.Error(err)
	}
	kubectl(t, c, "", "delete", "node", n.Name)
	if out, err := c.KubectlRun(testContext(t, 2*time.Minute), "", "delete", "pods", "--all-namespaces",
		"--field-selector", "spec.nodeName="+n.Name, "--force", "--grace-period=0"); err != nil {
		t.Errorf("deleting the Pods of %s: %v\n%s", n.Name, err, out)
	}
}
