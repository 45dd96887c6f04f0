package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/node/bgp"
	"github.com/loutres/juneau/test/bgprouter"
	"github.com/loutres/juneau/test/framework"
	"github.com/loutres/juneau/test/netns"
)

// floodRoutes is how many routes the flooding router of TestBGPAttributesWithBIRD
// sends: a full table by mistake.
const floodRoutes = 100000

// maxFloodGrowth bounds the growth of node-a's agent's resident memory with the flood,
// once the router is removed (the goal); maxFloodPeak bounds the most it holds
// during the flood, what GoBGP reads ahead before the limit trips (that of a Node
// keeping the whole table is ~30% more).
const (
	maxFloodGrowth = 0.1
	maxFloodPeak   = 0.3
)

// TestBGPAttributesWithBIRD: the pool's communities, standard and large, reach BIRD with
// each /32 and follow a change of the pool; the sessions run with TTL security (GTSM)
// on both sides; a second router that sends node-a 100,000 routes is disconnected and
// reported, while node-a's session with the first router keeps its routes. node-a's
// memory is measured: GoBGP parses and stores the UPDATEs already read when the limit
// trips, which the agent hands back to the kernel once it removed the router
// (docs/bgp.md#received-routes).
func TestBGPAttributesWithBIRD(t *testing.T) {
	c, ns := setupBGP(t)
	ctx := testContext(t)
	j := c.CP.Juneau.JuneauV1alpha1()
	setCommunities := func(list ...string) {
		t.Helper()
		pool, err := j.AddressPools().Get(ctx, "bgp-pool", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pool.Spec.BGPCommunities = list
		if _, err := j.AddressPools().Update(ctx, pool, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setCommunities("65000:100", "65000:1:2")
	if r := c.CP.Kubectl(ctx, "", "patch", "bgppeer", "tor", "--type", "merge", "-p", `{"spec":{"ttlSecurity":true}}`); r.Err != nil {
		t.Fatalf("kubectl patch bgppeer tor: %v\n%s", r.Err, r.Stderr)
	}
	cfg := routerConfig(c, true)
	for i := range cfg.Neighbors {
		cfg.Neighbors[i].TTLSecurity = true
	}
	bird := bgprouter.StartBIRD(t, c.Router, cfg)
	nodeA, nodeB := c.Nodes["node-a"], c.Nodes["node-b"]
	natAddr, webAddr, _ := usedPair(t, c, ns)
	natRoute, webRoute := natAddr+"/32", webAddr+"/32"
	bird.WaitRoutes(time.Minute, map[string]string{natRoute: nodeA.IP, webRoute: nodeB.IP})
	for _, node := range []string{"node-a", "node-b"} {
		waitSessions(t, c, node, map[string]v1alpha1.BGPSessionState{"tor": v1alpha1.BGPSessionEstablished})
	}
	if out, _ := bird.Command("show", "protocols", "all", "node_a"); !strings.Contains(out, "Established") {
		t.Errorf("BIRD's session with node-a under TTL security:\n%s", out)
	}

	// The communities in BIRD's table, for both addresses.
	waitAttributes(t, bird, natRoute, []string{"(65000,100)", "(65000, 1, 2)"}, nil)
	out := waitAttributes(t, bird, webRoute, []string{"(65000,100)", "(65000, 1, 2)"}, nil)
	t.Logf("birdc show route all for %s:\n%s", webRoute, out)
	// The pool's communities change: the Nodes announce again with the new set.
	start := time.Now()
	setCommunities("64999:7")
	waitAttributes(t, bird, natRoute, []string{"(64999,7)"}, []string{"(65000,100)", "large_community"})
	waitAttributes(t, bird, webRoute, []string{"(64999,7)"}, []string{"(65000,100)", "large_community"})
	t.Logf("BIRD had the pool's new communities %s after the change", time.Since(start).Round(time.Millisecond))

	// A second router sends node-a a full table by mistake.
	before := agentRSS(t, nodeA.Agent)
	resetPeakRSS(t, nodeA.Agent)
	routesBefore, err := bird.Routes()
	if err != nil {
		t.Fatal(err)
	}
	secrets := c.CP.Kube.CoreV1().Secrets(framework.SystemNamespace)
	patch := []byte(`{"stringData":{"tor-flood":"` + bgpPassword + `"}}`)
	if _, err := secrets.Patch(ctx, "juneau-bgp-passwords", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CP.Kube.CoreV1().Nodes().Patch(ctx, "node-a", types.MergePatchType, []byte(`{"metadata":{"labels":{"rack":"a"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	rtr2 := netns.New(t, "rtr2")
	c.AttachToSegment(rtr2, "eth0", "rtr2")
	rtr2.Addr("eth0", router2IP+"/24")
	flood := bgprouter.Config{RouterID: netip.MustParseAddr(router2IP), AS: routerASN, Flood: floodRoutes,
		Neighbors: neighbors(c, router2IP, bgpPassword)[:1]}
	flood.Neighbors[0].Flood = true
	bird2 := bgprouter.StartBIRD(t, rtr2, flood)
	if out, err := bird2.Command("show", "route", "count"); err != nil || !strings.Contains(out, strconv.Itoa(floodRoutes)) {
		t.Fatalf("the flooding router's table: %v\n%s", err, out)
	}
	start = time.Now()
	applyBGPPeer(t, c, "tor-flood", router2IP, routerASN, "rack: a")
	var message string
	framework.EventuallyWithin(t, 2*time.Minute, "node-a refuses the flooding router", func(ctx context.Context) (bool, string) {
		st, err := j.BGPNodeStatuses().Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range st.Status.Peers {
			if p.Name == "tor-flood" {
				message = string(p.State) + ": " + p.StateMessage
				return p.State == v1alpha1.BGPSessionFailed && strings.Contains(p.StateMessage, fmt.Sprintf("more than %d routes", bgp.MaxReceivedPrefixes)), message
			}
		}
		return false, "no session tor-flood yet"
	})
	t.Logf("node-a refused the router sending %d routes %s after its BGPPeer: %s", floodRoutes, time.Since(start).Round(time.Millisecond), message)
	// The other session and its routes are untouched.
	waitSessions(t, c, "node-a", map[string]v1alpha1.BGPSessionState{"tor": v1alpha1.BGPSessionEstablished, "tor-flood": v1alpha1.BGPSessionFailed})
	routes := bird.WaitRoutes(time.Minute, map[string]string{natRoute: nodeA.IP, webRoute: nodeB.IP})
	if !bgprouter.SameSince(routesBefore[natRoute], routes[natRoute]) {
		t.Errorf("BIRD relearned %s from node-a during the flood: since %s, then %s", natRoute, routesBefore[natRoute].Since, routes[natRoute].Since)
	}
	// The agent hands what it parsed of the flood back to the kernel once it removed the
	// router: the figure that counts is the one it settles to, well before the minute
	// after which node-a connects to the router again. The most it held at once during
	// the flood (VmHWM) is reported too.
	refused := time.Now()
	after := 0
	// Sampled once a second until it settles within maxFloodGrowth or 30 s have passed;
	// a figure that has not settled by then is judged as it is, so the poll's timeout is
	// no error.
	_ = wait.PollUntilContextTimeout(context.Background(), time.Second, 30*time.Second, true, func(context.Context) (bool, error) {
		after = agentRSS(t, nodeA.Agent)
		return float64(after) <= (1+maxFloodGrowth)*float64(before), nil
	})
	peak := procStatus(t, nodeA.Agent, "VmHWM")
	t.Logf("node-a's agent: %d KiB resident before the flood, %d KiB %s after it was refused (%+.1f%%); at most %d KiB during the flood (%+.1f%%)",
		before, after, time.Since(refused).Round(time.Second), 100*float64(after-before)/float64(before), peak, 100*float64(peak-before)/float64(before))
	if float64(after) > (1+maxFloodGrowth)*float64(before) {
		t.Errorf("node-a's agent grew from %d KiB to %d KiB with a router sending %d routes, more than %.0f%%", before, after, floodRoutes, 100*maxFloodGrowth)
	}
	if float64(peak) > (1+maxFloodPeak)*float64(before) {
		t.Errorf("node-a's agent held up to %d KiB (from %d KiB) while a router sent it %d routes, more than %.0f%% more", peak, before, floodRoutes, 100*maxFloodPeak)
	}
}

// waitAttributes waits until BIRD's "show route all" for prefix holds every string of
// want and none of unwanted, and returns it.
func waitAttributes(t *testing.T, bird *bgprouter.BIRD, prefix string, want, unwanted []string) string {
	t.Helper()
	var out string
	framework.EventuallyWithin(t, time.Minute, "BIRD's attributes of "+prefix, func(context.Context) (bool, string) {
		var err error
		out, err = bird.Command("show", "route", "all", "for", prefix)
		if err != nil {
			return false, err.Error()
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				return false, out
			}
		}
		for _, u := range unwanted {
			if strings.Contains(out, u) {
				return false, out
			}
		}
		return true, ""
	})
	return out
}

// procStatus is a figure of /proc/<pid>/status of a node agent, in KiB: VmRSS (resident
// now) or VmHWM (the most resident since the last resetPeakRSS).
func procStatus(t *testing.T, agent *framework.Component, field string) int {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", agent.PID()))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			if n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB")); err == nil {
				return n
			}
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, agent.PID())
	return 0
}

// agentRSS is the resident memory of a node agent, in KiB.
func agentRSS(t *testing.T, agent *framework.Component) int { return procStatus(t, agent, "VmRSS") }

// resetPeakRSS sets the agent's VmHWM to its resident memory now (proc(5), clear_refs 5).
func resetPeakRSS(t *testing.T, agent *framework.Component) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", agent.PID()), []byte("5"), 0); err != nil {
		t.Fatal(err)
	}
}
