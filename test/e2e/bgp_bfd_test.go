package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/bgprouter"
	"github.com/loutres/juneau/test/e2e/harness"
	"github.com/loutres/juneau/test/framework"
)

// maxBFDDetection bounds the time from a Node's failure to its route gone from the
// router, with BFD at its defaults (300ms × 3: the router declares the Node down 600–
// 900ms after its last packet). The goal is under a second; the bound leaves room for
// a loaded machine, and the figures are logged. Without BFD the router would keep the
// route for the hold time and then the graceful restart time.
const maxBFDDetection = 2 * time.Second

// setupBFD is setupBGP with BFD on the BGPPeer "tor" (`bfd: {}`, the defaults) and a
// router configuration with BFD for both Nodes.
func setupBFD(t *testing.T) (*harness.Cluster, string, bgprouter.Config) {
	t.Helper()
	c, ns := setupBGP(t)
	if r := c.CP.Kubectl(testContext(t), "", "patch", "bgppeer", "tor", "--type", "merge", "-p", `{"spec":{"bfd":{}}}`); r.Err != nil {
		t.Fatalf("kubectl patch bgppeer tor: %v\n%s", r.Err, r.Stderr)
	}
	cfg := routerConfig(c, false)
	for i := range cfg.Neighbors {
		cfg.Neighbors[i].BFD = true
	}
	return c, ns, cfg
}

// waitBFDUp waits until the Node's BGPNodeStatus shows its session with peer
// Established with BFD Up.
func waitBFDUp(t *testing.T, c *harness.Cluster, node, peer string) {
	t.Helper()
	framework.EventuallyWithin(t, 2*time.Minute, "BFD Up in the BGPNodeStatus of "+node, func(ctx context.Context) (bool, string) {
		st, err := c.CP.Juneau.JuneauV1alpha1().BGPNodeStatuses().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range st.Status.Peers {
			if p.Name == peer {
				return p.State == v1alpha1.BGPSessionEstablished && p.StateBFD == v1alpha1.BFDUp, fmt.Sprintf("%+v", p)
			}
		}
		return false, fmt.Sprintf("%+v", st.Status)
	})
}

// routeGoneAfter polls a router's table until prefix is gone and returns how long
// after start that was.
func routeGoneAfter(t *testing.T, table func() (map[string]string, error), prefix string, start time.Time) time.Duration {
	t.Helper()
	var at time.Time
	var last map[string]string
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		routes, err := table()
		if err != nil {
			return false, nil
		}
		last, at = routes, time.Now()
		_, ok := routes[prefix]
		return !ok, nil
	})
	if err != nil {
		t.Fatalf("%s still in the router's table a minute after the failure (%v): %v", prefix, last, err)
	}
	return at.Sub(start)
}

// firstMissing polls a router's table until stop is closed and returns when prefix was
// first missing (zero: never) and the number of polls.
func firstMissing(table func() (map[string]string, error), prefix string, stop <-chan struct{}) (missing chan time.Time, polls *int) {
	missing = make(chan time.Time, 1)
	polls = new(int)
	go func() {
		var first time.Time
		defer func() { missing <- first }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			routes, err := table()
			if err != nil {
				continue
			}
			*polls++
			if _, ok := routes[prefix]; !ok && first.IsZero() {
				first = time.Now()
			}
		}
	}()
	return missing, polls
}

func birdTable(b *bgprouter.BIRD) func() (map[string]string, error) {
	return func() (map[string]string, error) {
		routes, err := b.Routes()
		out := map[string]string{}
		for p, r := range routes {
			out[p] = r.Via
		}
		return out, err
	}
}

// restartAgent kills the Node's agent (SIGKILL, the link stays up) and starts it again
// while the router's table is watched; it returns when the Node's session is back with
// its route and BFD Up, with the kill's time and when the route was first missing.
func restartAgent(t *testing.T, c *harness.Cluster, n *harness.Node, table func() (map[string]string, error), prefix string) (killed, missing time.Time, polls int) {
	t.Helper()
	stop := make(chan struct{})
	miss, count := firstMissing(table, prefix, stop)
	killed = time.Now()
	n.Agent.Kill()
	c.StartAgent(n)
	waitResent(t, c, n.Name, "tor", killed.Truncate(time.Second), 1)
	waitBFDUp(t, c, n.Name, "tor")
	close(stop)
	return killed, <-miss, *count
}

// TestBGPBFDWithBIRD: BFD on the BGPPeer and BIRD's `protocol bfd` with `bfd on`
// (docs/bgp.md#bfd). Both Nodes' sessions run BFD (BGPNodeStatus and BIRD say Up).
// When a Node dies (its agent killed, its link gone, nothing said), BIRD drops its
// route within about a second although the session negotiated graceful restart; the
// other Node's route stays. The price with BIRD: an agent restart drops the Node's
// route too (BIRD ends even a session in graceful restart when BFD goes down) until
// the restarted agent announces it again.
func TestBGPBFDWithBIRD(t *testing.T) {
	c, ns, cfg := setupBFD(t)
	bird := bgprouter.StartBIRD(t, c.Router, cfg)
	nodeA, nodeB := c.Nodes["node-a"], c.Nodes["node-b"]
	natAddr, webAddr, _ := usedPair(t, c, ns)
	natRoute, webRoute := natAddr+"/32", webAddr+"/32"
	bird.WaitRoutes(time.Minute, map[string]string{natRoute: nodeA.IP, webRoute: nodeB.IP})
	for _, n := range []*harness.Node{nodeA, nodeB} {
		waitBFDUp(t, c, n.Name, "tor")
		bird.WaitBFD(n.IP, "Up", 30*time.Second)
	}
	out, _ := bird.Command("show", "bfd", "sessions")
	t.Logf("birdc show bfd sessions:\n%s", out)
	r := c.CP.Kubectl(testContext(t), "", "describe", "bgpnodestatus", "node-a")
	if !strings.Contains(strings.Join(strings.Fields(r.Stdout), " "), "State: Established State BFD: Up") {
		t.Errorf("kubectl describe bgpnodestatus node-a does not show BFD Up after the state:\n%s %v", r.Stdout, r.Err)
	}

	// node-a's agent restarts; its link stays up.
	killed, missing, polls := restartAgent(t, c, nodeA, birdTable(bird), natRoute)
	back := time.Since(killed)
	bird.WaitRoutes(time.Minute, map[string]string{natRoute: nodeA.IP, webRoute: nodeB.IP})
	if missing.IsZero() {
		t.Errorf("BIRD kept node-a's route across its agent restart (%d polls); with `bfd on` it drops it when BFD goes down (docs/bgp.md#bfd)", polls)
	} else {
		t.Logf("agent restart: BIRD dropped node-a's route %s after the kill; the session, its route and BFD were back within %s",
			missing.Sub(killed).Round(time.Millisecond), back.Round(time.Millisecond))
	}

	// node-b dies.
	c.Unplug(nodeB)
	failed := time.Now()
	nodeB.Agent.Kill()
	gone := routeGoneAfter(t, birdTable(bird), webRoute, failed)
	if gone > maxBFDDetection {
		t.Errorf("BIRD dropped the dead node-b's route %s after the failure, want within %s", gone, maxBFDDetection)
	}
	t.Logf("Node death: node-b's route left BIRD's table %s after its link went down", gone.Round(time.Millisecond))
	bird.WaitRoutes(time.Second, map[string]string{natRoute: nodeA.IP})
	if out, _ := bird.Protocol("node_b"); !strings.Contains(out, "BFD session down") {
		t.Errorf("BIRD's session with node-b did not end by BFD:\n%s", out)
	}

	// node-b comes back: its route and its BFD too.
	c.Plug(nodeB)
	c.StartAgent(nodeB)
	bird.WaitRoutes(time.Minute, map[string]string{natRoute: nodeA.IP, webRoute: nodeB.IP})
	waitBFDUp(t, c, "node-b", "tor")
}

// TestBGPBFDWithFRR: the same against FRR (bgpd with bfdd and zebra, graceful restart
// on, docs/bgp.md#bfd). FRR ends a session whose BFD goes down without graceful
// restart: a dead Node's route goes within about a second. An agent restart closes
// the connection first, which FRR takes for a graceful restart, and BFD going down
// afterwards no longer matters: the route stays throughout.
func TestBGPBFDWithFRR(t *testing.T) {
	c, ns, cfg := setupBFD(t)
	frr := bgprouter.StartFRR(t, c.Router, cfg)
	nodeA, nodeB := c.Nodes["node-a"], c.Nodes["node-b"]
	natAddr, webAddr, _ := usedPair(t, c, ns)
	natRoute, webRoute := natAddr+"/32", webAddr+"/32"
	frr.WaitRoutes(time.Minute, map[string]string{natRoute: nodeA.IP, webRoute: nodeB.IP})
	for _, n := range []*harness.Node{nodeA, nodeB} {
		waitBFDUp(t, c, n.Name, "tor")
		frr.WaitBFD(n.IP, "Up", 30*time.Second)
	}
	out, _ := frr.BFDSessions()
	t.Logf("FRR's BFD sessions: %v", out)

	killed, missing, polls := restartAgent(t, c, nodeA, frr.Routes, natRoute)
	if !missing.IsZero() || polls < 10 {
		t.Errorf("FRR lacked node-a's route across its agent restart from %s after the kill (%d polls)", missing.Sub(killed), polls)
	} else {
		t.Logf("agent restart: node-a's route was in each of %d polls of FRR's table", polls)
	}

	// zebra installs FRR's routes in the router's kernel, which is read in microseconds
	// where vtysh takes tens of milliseconds: the time is taken there, then bgpd's table
	// is checked.
	framework.EventuallyWithin(t, 10*time.Second, "zebra installing "+webRoute+" in the router's kernel", func(context.Context) (bool, string) {
		routes := kernelTable(c)()
		return routes[webRoute] == nodeB.IP, fmt.Sprint(routes)
	})
	c.Unplug(nodeB)
	failed := time.Now()
	nodeB.Agent.Kill()
	gone := routeGoneAfter(t, func() (map[string]string, error) { return kernelTable(c)(), nil }, webRoute, failed)
	goneBGP := routeGoneAfter(t, frr.Routes, webRoute, failed)
	if gone > maxBFDDetection {
		t.Errorf("FRR dropped the dead node-b's route %s after the failure, want within %s", gone, maxBFDDetection)
	}
	t.Logf("Node death: node-b's route left the router's forwarding table %s after its link went down (gone from bgpd's table when vtysh next answered, %s after)",
		gone.Round(time.Millisecond), goneBGP.Round(time.Millisecond))
	frr.WaitRoutes(time.Second, map[string]string{natRoute: nodeA.IP})

	c.Plug(nodeB)
	c.StartAgent(nodeB)
	frr.WaitRoutes(time.Minute, map[string]string{natRoute: nodeA.IP, webRoute: nodeB.IP})
	waitBFDUp(t, c, "node-b", "tor")
}

// kernelTable reads the IPv4 routes of the router's namespace: prefix → gateway.
func kernelTable(c *harness.Cluster) func() map[string]string {
	return func() map[string]string {
		routes, err := c.Router.Netlink().RouteList(nil, netlink.FAMILY_V4)
		out := map[string]string{}
		if err != nil {
			return out
		}
		for _, r := range routes {
			if r.Dst != nil && r.Gw != nil {
				out[r.Dst.String()] = r.Gw.String()
			}
		}
		return out
	}
}
