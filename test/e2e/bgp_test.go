package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/bgprouter"
	"github.com/loutres/juneau/test/e2e/harness"
	"github.com/loutres/juneau/test/framework"
	"github.com/loutres/juneau/test/netns"
)

// The bgp network of these tests: its pool is on no segment; routers learn each address
// from the Node that uses it.
const (
	bgpPool     = "10.225.53.0/24"
	routerASN   = 64512
	nodeASN     = 64513
	bgpPassword = "s3cret"
	// A second router on the segment, for sessions that must fail.
	router2IP = "10.225.51.253"
)

// setupBGP starts a cluster with a router (harness.Options.Router) and the far client
// behind it, a bgp network bgp-net, the password Secret and the BGPPeer "tor" selecting
// every Node; the test starts the router's daemon.
func setupBGP(t *testing.T) (*harness.Cluster, string) {
	t.Helper()
	return setupBGPWith(t, harness.Options{Router: true})
}

// setupBGPWith is setupBGP on a cluster with opts (Router set).
func setupBGPWith(t *testing.T, opts harness.Options) (*harness.Cluster, string) {
	t.Helper()
	ctx := testContext(t)
	cp := framework.Shared(t)
	c := harness.New(t, cp, opts)
	ns := cp.NewNamespace(t, "e2e")
	j := cp.Juneau.JuneauV1alpha1()
	if _, err := j.AddressPools().Create(ctx, &v1alpha1.AddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: "bgp-pool"},
		Spec:       v1alpha1.AddressPoolSpec{AdvertiseMode: v1alpha1.AdvertiseBGP, Addresses: []string{"10.225.53.5-10.225.53.99"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.ExternalNetworks().Create(ctx, &v1alpha1.ExternalNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: "bgp-net"},
		Spec:       v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseBGP, AddressPools: []string{"bgp-pool"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secrets := cp.Kube.CoreV1().Secrets(framework.SystemNamespace)
	if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "juneau-bgp-passwords"},
		StringData: map[string]string{"tor": bgpPassword, "tor-pw": "wrong", "tor-asn": bgpPassword}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Cluster-scoped BGP objects outlive the cluster's Nodes; remove them with it.
	t.Cleanup(func() {
		ctx := context.Background()
		_ = j.BGPPeers().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = j.BGPNodeStatuses().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = secrets.Delete(ctx, "juneau-bgp-passwords", metav1.DeleteOptions{})
	})
	applyBGPPeer(t, c, "tor", harness.RouterIP, routerASN, "")
	return c, ns
}

// applyBGPPeer applies a BGPPeer with kubectl; selector is a "key: value" label or empty.
func applyBGPPeer(t *testing.T, c *harness.Cluster, name, addr string, peerASN int, selector string) {
	t.Helper()
	sel := ""
	if selector != "" {
		sel = "\n  nodeSelector:\n    matchLabels: {" + selector + "}"
	}
	manifest := fmt.Sprintf(`apiVersion: juneau.loutres.me/v1alpha1
kind: BGPPeer
metadata: {name: %s}
spec:
  peerAddress: %s
  peerASN: %d
  myASN: %d
  passwordSecretRef: {namespace: juneau-system, name: juneau-bgp-passwords, key: %s}%s
`, name, addr, peerASN, nodeASN, name, sel)
	if r := c.CP.Kubectl(testContext(t), manifest, "apply", "-f", "-"); r.Err != nil {
		t.Fatalf("kubectl apply BGPPeer %s: %v\n%s", name, r.Err, r.Stderr)
	}
}

// neighbors are a router's sessions with every Node (BIRD protocol node_a, ...).
func neighbors(c *harness.Cluster, local, password string) []bgprouter.Neighbor {
	var out []bgprouter.Neighbor
	for _, name := range []string{"node-a", "node-b"} {
		out = append(out, bgprouter.Neighbor{Name: strings.ReplaceAll(name, "-", "_"), Local: netip.MustParseAddr(local),
			Address: netip.MustParseAddr(c.Nodes[name].IP), AS: nodeASN, Password: password})
	}
	return out
}

func routerConfig(c *harness.Cluster, kernel bool) bgprouter.Config {
	return bgprouter.Config{RouterID: netip.MustParseAddr(harness.RouterIP), AS: routerASN, Kernel: kernel,
		Neighbors: neighbors(c, harness.RouterIP, bgpPassword), Accept: netip.MustParsePrefix(bgpPool)}
}

// usedPair makes the two ElasticIPs of the tests on bgp-net: nat-eip attached to Pod
// "nat" on node-a, web-eip directly on Pod "web"'s eth0 on node-b; both Pods serve TCP
// port 80. It returns their addresses.
func usedPair(t *testing.T, c *harness.Cluster, ns string) (natAddr, webAddr string, nat *harness.Pod) {
	t.Helper()
	ctx := testContext(t)
	nat = c.RunPod(harness.PodSpec{Namespace: ns, Name: "nat", Node: "node-a"})
	c.ServeTCP(nat.NS, "nat", 80)
	manifest := `apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIP
metadata: {name: nat-eip}
spec: {externalNetwork: bgp-net}
---
apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIPAttachment
metadata: {name: nat-attach}
spec:
  elasticIPRef: {name: nat-eip}
  targetRef: {networkInterfaceName: nat.eth0}
---
apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIP
metadata: {name: web-eip}
spec: {externalNetwork: bgp-net}
`
	if r := c.CP.Kubectl(ctx, manifest, "apply", "-n", ns, "-f", "-"); r.Err != nil {
		t.Fatal(r.Err)
	}
	webAddr = c.WaitElasticIPAvailable(ns, "web-eip")
	web := c.RunPod(harness.PodSpec{Namespace: ns, Name: "web", Node: "node-b",
		Annotations: map[string]string{v1alpha1.AnnotationElasticIP: "web-eip"}, ReadinessGates: []string{v1alpha1.PodConditionElasticIP}})
	c.ServeTCP(web.NS, "web", 80)
	natAddr = c.WaitElasticIPUser(ns, "nat-eip")
	c.WaitElasticIPUser(ns, "web-eip")
	return natAddr, webAddr, nat
}

// TestBGPWithBIRD: a real BIRD 2 router peers with both Nodes (TCP-MD5) and forwards to
// them; the far client behind it, on no Node's subnet, reaches a NAT'ed and a direct
// ElasticIP of a bgp network. The route follows a Pod that moves, survives agent
// restarts without a withdrawal or a lost packet, and goes with the ElasticIP. Sessions
// with a wrong password or AS number are reported and get nothing.
func TestBGPWithBIRD(t *testing.T) {
	c, ns := setupBGP(t)
	ctx := testContext(t)
	bird := bgprouter.StartBIRD(t, c.Router, routerConfig(c, true))
	nodeA, nodeB := c.Nodes["node-a"], c.Nodes["node-b"]
	natAddr, webAddr, nat := usedPair(t, c, ns)
	natRoute, webRoute := natAddr+"/32", webAddr+"/32"

	routes := bird.WaitRoutes(time.Minute, map[string]string{natRoute: nodeA.IP, webRoute: nodeB.IP})
	if r := routes[natRoute]; r.Protocol != "node_a" {
		t.Errorf("%s learned from %s, want node_a", natRoute, r.Protocol)
	}
	show, _ := bird.Command("show", "route")
	t.Logf("birdc show route:\n%s", show)
	c.EventuallyDial(c.Far, natAddr, 80, "nat")
	if got := c.EventuallyDial(c.Far, webAddr, 80, "web"); got != "web "+harness.FarClientIP {
		t.Errorf("web saw %q, want the far client's address", got)
	}
	waitPodReady(t, c, ns, "web")
	c.WaitElasticIPWorking(ns, "nat-eip")
	c.WaitElasticIPWorking(ns, "web-eip")
	for _, node := range []string{"node-a", "node-b"} {
		waitSessions(t, c, node, map[string]v1alpha1.BGPSessionState{"tor": v1alpha1.BGPSessionEstablished})
	}
	r := c.CP.Kubectl(ctx, "", "get", "bgpnodestatus", "node-a")
	if r.Err != nil || !strings.Contains(strings.Join(strings.Fields(r.Stdout), " "), "node-a 1 1") {
		t.Errorf("kubectl get bgpnodestatus node-a:\n%s %v", r.Stdout, r.Err)
	}

	// The Pod moves to node-b: the route follows within 3 s of the Pod running there.
	nat.Gone()
	moved := c.RunPod(harness.PodSpec{Namespace: ns, Name: "nat", Node: "node-b"})
	start := time.Now()
	c.ServeTCP(moved.NS, "nat-moved", 80)
	bird.WaitRoutes(time.Minute, map[string]string{natRoute: nodeB.IP, webRoute: nodeB.IP})
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the route followed the Pod after %s, want within 3s", took)
	} else {
		t.Logf("the route followed the Pod to node-b %s after it started there", took)
	}
	c.EventuallyDial(c.Far, natAddr, 80, "nat-moved")

	// The agent of node-b is killed and restarted, twice, under a continuous ping: BIRD
	// keeps both routes (never missing, never relearned) and no packet is lost. Each
	// restarted agent is killed again only once it sent its routes again: BIRD flushes
	// the stale routes of a session that drops again during its restart recovery.
	before := settledRoutes(t, bird)
	const count = 1000
	ping := c.Far.Start("ping", "-n", "-i", "0.02", "-c", strconv.Itoa(count), "-W", "5", webAddr)
	if err := ping.WaitForOutput("icmp_seq=", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	watch := watchRoutes(bird, natRoute, webRoute)
	for range 2 {
		killed := time.Now().Truncate(time.Second)
		nodeB.Agent.Kill()
		c.StartAgent(nodeB)
		waitResent(t, c, "node-b", "tor", killed, 2)
	}
	if ping.Exited() {
		t.Errorf("the ping ended before the agent restarts did; make it longer")
	}
	if err := ping.Wait(time.Minute); err != nil {
		t.Fatalf("ping: %v\n%s", err, ping.Output())
	}
	polls, missing := watch()
	if missing != "" {
		t.Errorf("BIRD's table lacked a route across the agent restarts (%d polls): %s", polls, missing)
	} else {
		t.Logf("BIRD had both routes in each of %d polls across two agent restarts", polls)
	}
	after, _ := bird.Routes()
	for _, p := range []string{natRoute, webRoute} {
		if !bgprouter.SameSince(before[p], after[p]) {
			t.Errorf("BIRD relearned %s across the agent restarts: since %s, then %s", p, before[p].Since, after[p].Since)
		}
	}
	if m := pingSummary.FindStringSubmatch(ping.Output()); m == nil || m[1] != strconv.Itoa(count) || m[2] != strconv.Itoa(count) {
		t.Errorf("packets lost across agent restarts:\n%s", ping.Output())
	}

	// The ElasticIP goes: its route is withdrawn.
	deleteNatEIP(t, c, ns)
	bird.WaitRoutes(time.Minute, map[string]string{webRoute: nodeB.IP})

	// A second router, whose password node-a gets wrong and whose AS node-b expects
	// wrong: each Node says so and that router learns nothing.
	rtr2 := netns.New(t, "rtr2")
	c.AttachToSegment(rtr2, "eth0", "rtr2")
	rtr2.Addr("eth0", router2IP+"/24")
	bird2 := bgprouter.StartBIRD(t, rtr2, bgprouter.Config{RouterID: netip.MustParseAddr(router2IP), AS: routerASN,
		Neighbors: neighbors(c, router2IP, bgpPassword), Accept: netip.MustParsePrefix(bgpPool)})
	for name, rack := range map[string]string{"node-a": "a", "node-b": "b"} {
		patch := []byte(`{"metadata":{"labels":{"rack":"` + rack + `"}}}`)
		if _, err := c.CP.Kube.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	applyBGPPeer(t, c, "tor-pw", router2IP, routerASN, "rack: a")
	applyBGPPeer(t, c, "tor-asn", router2IP, 64999, "rack: b")
	waitSessions(t, c, "node-a", map[string]v1alpha1.BGPSessionState{"tor": v1alpha1.BGPSessionEstablished, "tor-pw": v1alpha1.BGPSessionAuthenticationFailed})
	waitSessions(t, c, "node-b", map[string]v1alpha1.BGPSessionState{"tor": v1alpha1.BGPSessionEstablished, "tor-asn": v1alpha1.BGPSessionWrongASN})
	for _, proto := range []string{"node_a", "node_b"} {
		if up, err := bird2.Established(proto); up || err != nil {
			t.Errorf("the second router's session %s is Established (%v)", proto, err)
		}
	}
	if got, err := bird2.Routes(); err != nil || len(got) != 0 {
		t.Errorf("the second router learned %v (%v), want nothing", got, err)
	}
	bird.WaitRoutes(time.Minute, map[string]string{webRoute: nodeB.IP})
	r = c.CP.Kubectl(ctx, "", "describe", "bgpnodestatus", "node-b")
	t.Logf("kubectl describe bgpnodestatus node-b:\n%s", r.Stdout)
}

// TestBGPWithFRR: the same ElasticIPs announced to FRR's bgpd: both routes via the
// right Node, the NAT'ed one follows its Pod, and goes with its ElasticIP. Before the
// router runs, the ElasticIPs are used but not ATTACHED and the Pod is not Ready.
func TestBGPWithFRR(t *testing.T) {
	c, ns := setupBGP(t)
	nodeA, nodeB := c.Nodes["node-a"], c.Nodes["node-b"]
	natAddr, webAddr, nat := usedPair(t, c, ns)
	c.WaitElasticIPCondition(ns, "web-eip", v1alpha1.ConditionAttached, v1alpha1.ReasonNotAnnounced)
	c.WaitElasticIPCondition(ns, "nat-eip", v1alpha1.ConditionAttached, v1alpha1.ReasonNotAnnounced)
	// The agent writes the gate after the controller's condition: poll until it tells why.
	var gate corev1.PodCondition
	err := wait.PollUntilContextTimeout(testContext(t), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pod, err := c.CP.Kube.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range pod.Status.Conditions {
			if cond.Type == v1alpha1.PodConditionElasticIP {
				gate = cond
			}
		}
		if gate.Status == corev1.ConditionTrue {
			return false, fmt.Errorf("gate True with no router: %q", gate.Message)
		}
		return strings.Contains(gate.Message, "BGP announcement"), nil
	})
	if err != nil {
		t.Errorf("readiness gate with no router: %s %q, want False waiting for the BGP announcement: %v", gate.Status, gate.Message, err)
	}

	frr := bgprouter.StartFRR(t, c.Router, routerConfig(c, false))
	natRoute, webRoute := natAddr+"/32", webAddr+"/32"
	frr.WaitRoutes(time.Minute, map[string]string{natRoute: nodeA.IP, webRoute: nodeB.IP})
	waitPodReady(t, c, ns, "web")
	c.WaitElasticIPWorking(ns, "web-eip")
	c.WaitElasticIPWorking(ns, "nat-eip")

	nat.Gone()
	c.RunPod(harness.PodSpec{Namespace: ns, Name: "nat", Node: "node-b"})
	start := time.Now()
	frr.WaitRoutes(time.Minute, map[string]string{natRoute: nodeB.IP, webRoute: nodeB.IP})
	t.Logf("the route followed the Pod to node-b %s after it started there", time.Since(start))

	deleteNatEIP(t, c, ns)
	frr.WaitRoutes(time.Minute, map[string]string{webRoute: nodeB.IP})
}

// deleteNatEIP deletes nat-attach, then nat-eip once the webhook no longer sees the
// attachment (it refuses to delete an ElasticIP an attachment references).
func deleteNatEIP(t *testing.T, c *harness.Cluster, ns string) {
	t.Helper()
	j := c.CP.Juneau.JuneauV1alpha1()
	if err := j.ElasticIPAttachments(ns).Delete(testContext(t), "nat-attach", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.EventuallyWithin(t, time.Minute, "deleting ElasticIP nat-eip", func(ctx context.Context) (bool, string) {
		err := j.ElasticIPs(ns).Delete(ctx, "nat-eip", metav1.DeleteOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

// waitSessions waits until the Node's BGPNodeStatus shows exactly these sessions.
func waitSessions(t *testing.T, c *harness.Cluster, node string, want map[string]v1alpha1.BGPSessionState) {
	t.Helper()
	var got map[string]string
	framework.EventuallyWithin(t, 2*time.Minute, "BGPNodeStatus "+node, func(ctx context.Context) (bool, string) {
		st, err := c.CP.Juneau.JuneauV1alpha1().BGPNodeStatuses().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got = map[string]string{}
		ok := len(st.Status.Peers) == len(want)
		for _, p := range st.Status.Peers {
			got[p.Name] = string(p.State) + ": " + p.StateMessage
			if want[p.Name] != p.State {
				ok = false
			}
		}
		return ok, fmt.Sprintf("%v", got)
	})
	t.Logf("BGPNodeStatus %s: %v", node, got)
}

// waitResent waits until the Node's session with peer is Established since at least
// after and has sent this many routes (past the graceful restart exchange).
func waitResent(t *testing.T, c *harness.Cluster, node, peer string, after time.Time, prefixes int32) {
	t.Helper()
	framework.EventuallyWithin(t, 2*time.Minute, "the routes of "+node+" sent again to "+peer, func(ctx context.Context) (bool, string) {
		st, err := c.CP.Juneau.JuneauV1alpha1().BGPNodeStatuses().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range st.Status.Peers {
			if p.Name == peer {
				return p.State == v1alpha1.BGPSessionEstablished && !p.Since.Time.Before(after) && p.PrefixesAnnounced == prefixes, fmt.Sprintf("%+v", p)
			}
		}
		return false, fmt.Sprintf("%+v", st.Status)
	})
}

// waitPodReady waits for the Pod's ElasticIP readiness gate to be True.
func waitPodReady(t *testing.T, c *harness.Cluster, ns, name string) {
	t.Helper()
	framework.EventuallyWithin(t, time.Minute, "readiness gate of "+name, func(ctx context.Context) (bool, string) {
		pod, err := c.CP.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, cond := range pod.Status.Conditions {
			if cond.Type == v1alpha1.PodConditionElasticIP {
				return cond.Status == corev1.ConditionTrue, cond.Message
			}
		}
		return false, "no condition"
	})
}

// watchRoutes polls BIRD's table until the returned stop is called, which reports the
// number of polls and the first prefix found missing ("" when none).
func watchRoutes(b *bgprouter.BIRD, prefixes ...string) (stop func() (int, string)) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var polls int
	var missing string
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			routes, err := b.Routes()
			if err != nil {
				continue
			}
			polls++
			for _, p := range prefixes {
				if _, ok := routes[p]; !ok && missing == "" {
					missing = fmt.Sprintf("%s at poll %d (%s)", p, polls, time.Now().Format(time.RFC3339Nano))
				}
			}
		}
	})
	return func() (int, string) {
		close(done)
		wg.Wait()
		return polls, missing
	}
}

// settledRoutes reads BIRD's table until it stays the same, times included, for a
// second: right after a move the old Node's withdrawal may still change the route's
// time, which is no relearning by a restart.
func settledRoutes(t *testing.T, bird *bgprouter.BIRD) map[string]bgprouter.Route {
	t.Helper()
	var last map[string]bgprouter.Route
	var since time.Time
	framework.EventuallyWithin(t, time.Minute, "BIRD's table unchanged for a second", func(context.Context) (bool, string) {
		routes, err := bird.Routes()
		if err != nil {
			return false, err.Error()
		}
		if !maps.Equal(routes, last) {
			last, since = routes, time.Now()
			return false, fmt.Sprint(routes)
		}
		return time.Since(since) >= time.Second, fmt.Sprint(routes)
	})
	return last
}
