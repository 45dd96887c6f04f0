package faults

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/test/e2e/harness"
	"github.com/loutres/juneau/test/framework"
)

// tooOld is what a component's reflector logs (at -v=4, which these tests ask for
// through --vmodule) when the API server tells it its watch expired.
const tooOld = "too old resource version"

// quietPeriod is how long nothing may change after the components relisted.
const quietPeriod = 5 * time.Second

// TestEtcdRestartExpiredWatches: etcd restarts with its history compacted under the
// components' idle watches, so the API server re-reads etcd and every watch that
// resumes from before the compaction is refused as "too old resource version". The
// controller and both agents relist, and that changes nothing: no API write by any
// component, no nftables transaction on either Node, the ElasticIPs and
// advertisements keep their resourceVersions, and traffic and ARP answers never
// stop. A change made afterwards is applied.
//
// Harness, not the real cluster: the test restarts and compacts etcd through its own
// API and reads the components' logs and the API server's request counters, which
// the harness owns; on the real cluster etcd is shared with every other test and a
// flap would hide among what the kubelets and controllers write.
func TestEtcdRestartExpiredWatches(t *testing.T) {
	cp := ownControlPlane(t)
	reflectorLog := "--vmodule=reflector=4"
	s := newScenario(t, cp, harness.Options{
		ControllerArgs: []string{reflectorLog},
		// No periodic full sync may fall into the test's window, nor a heartbeat Lease
		// expiring while etcd restarts (the harness's 4 s would, on a loaded machine, and
		// Answering=Unknown is another test's subject).
		AgentArgs: []string{reflectorLog, "--resync-period=30m", "--heartbeat-lease-duration=40s"},
	})
	c := s.c
	late := c.RunPod(harness.PodSpec{Namespace: s.ns, Name: "late", Node: "node-b"})
	c.ServeUDP(late.NS, "late", udpPort)
	framework.EventuallyWithin(t, time.Minute, "both advertisements answering", func(ctx context.Context) (bool, string) {
		return answering(ctx, c, s.ns, "nat-eip") && answering(ctx, c, s.ns, "direct-eip"), ""
	})
	components := []*framework.Component{c.Controller, c.Nodes["node-a"].Agent, c.Nodes["node-b"].Agent}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	waitQuiet(t, cp)
	before := snapshot(t, c, s.ns)
	adds := queueAdds(t, c)
	probes := c.StartProbes(probeInterval, s.targets()...)
	start := time.Now()
	// Writes nobody of juneau watches move etcd's revision past every watch of theirs.
	scratch := cp.NewNamespace(t, "scratch")
	for i := range 20 {
		if _, err := cp.Kube.CoreV1().ConfigMaps(scratch).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("filler-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rev, err := cp.EtcdRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.CompactEtcd(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if err := cp.RestartEtcd(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd compacted at revision %d and restarted", rev)

	// Every component is told its watches expired, and relists.
	framework.EventuallyWithin(t, 3*time.Minute, "every component told "+tooOld, func(context.Context) (bool, string) {
		var missing []string
		for _, comp := range components {
			if !strings.Contains(comp.Log(), tooOld) {
				missing = append(missing, comp.Name)
			}
		}
		return len(missing) == 0, "not yet: " + strings.Join(missing, ", ")
	}, components...)
	relisted := time.Now()
	// Then nothing changes for a while.
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, quietPeriod, true, func(context.Context) (bool, error) {
		if diff := before.diff(snapshot(t, c, s.ns)); diff != "" {
			return false, fmt.Errorf("changed by the relist: %s", diff)
		}
		return false, nil
	})
	if !wait.Interrupted(err) {
		t.Fatal(err)
	}
	// The relists reached the loops (an agent's handler, which finds what a relist
	// brings unchanged before queueing), which found nothing to do.
	for queue, n := range queueAdds(t, c) {
		if n <= adds[queue] {
			t.Errorf("the loop %s took no key during the relist (%v before, %v after): the relist did not reach it", queue, adds[queue], n)
		}
	}
	t.Logf("every component relisted %s after the restart; nothing changed in the %s after", relisted.Sub(start).Round(100*time.Millisecond), quietPeriod)

	// A change is applied, and counted by the same snapshot, which therefore sees one.
	createEIP(t, c, s.ns, "late-eip")
	attach(t, c, s.ns, "late-attach", "late-eip", "late.eth0")
	lateEIP := c.WaitElasticIPWorking(s.ns, "late-eip")
	s.waitReachable(t, harness.ProbeTarget{Addr: lateEIP, Port: udpPort, Name: "late"})
	if after := snapshot(t, c, s.ns); after.generations["node-b"] == before.generations["node-b"] || after.writes == before.writes {
		t.Errorf("a new attachment changed neither node-b's ruleset (generation %d) nor anything in the API (%.0f writes): the snapshot sees nothing",
			after.generations["node-b"], after.writes)
	}
	checkProbes(t, probes.Stop(), time.Since(start))
	checkClaims(t, cp)
}

// state is what must not change when components relist.
type state struct {
	// generations is the nftables ruleset generation of each Node.
	generations map[string]uint32
	// writes counts the API server's mutating requests on juneau's kinds, Pods and
	// Events (Leases, the test's own ConfigMaps and namespaces are left out).
	writes float64
	// versions are the resourceVersions of the ElasticIPs and advertisements.
	versions map[string]string
	counts   map[framework.RequestKey]float64
}

// watched are the resources whose writes count in state.writes.
var watched = []string{"elasticips", "elasticipattachments", "networkinterfaces", "arpadvertisements", "allocationclaims",
	"addresspools", "externalnetworks", "bgpnodestatuses", "pods", "events"}

func snapshot(t *testing.T, c *harness.Cluster, ns string) state {
	t.Helper()
	ctx := context.Background()
	st := state{generations: map[string]uint32{}, versions: map[string]string{}, counts: map[framework.RequestKey]float64{}}
	for name, n := range c.Nodes {
		g, err := n.NftGeneration()
		if err != nil {
			t.Fatal(err)
		}
		st.generations[name] = g
	}
	counts, err := c.CP.RequestCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range counts {
		res, _, _ := strings.Cut(k.Resource, "/")
		if k.Mutating() && slices.Contains(watched, res) {
			st.writes += v
			st.counts[k] = v
		}
	}
	// Single GETs: a LIST would make the API server ask etcd for progress, which moves
	// the watches it serves on.
	j := c.CP.Juneau.JuneauV1alpha1()
	for _, name := range []string{"nat-eip", "direct-eip"} {
		eip, err := j.ElasticIPs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st.versions["ElasticIP "+name] = eip.ResourceVersion
		ad, err := j.ARPAdvertisements().Get(ctx, advertisement.PreferredName(ns, name), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st.versions["ARPAdvertisement "+ad.Name] = ad.ResourceVersion
	}
	return st
}

// diff describes how o differs from st ("" if it does not).
func (st state) diff(o state) string {
	var out []string
	for _, n := range slices.Sorted(maps.Keys(st.generations)) {
		if st.generations[n] != o.generations[n] {
			out = append(out, fmt.Sprintf("nftables generation of %s %d → %d", n, st.generations[n], o.generations[n]))
		}
	}
	if st.writes != o.writes {
		var kinds []string
		for k, v := range o.counts {
			if d := v - st.counts[k]; d > 0 {
				kinds = append(kinds, fmt.Sprintf("%s ×%.0f", k, d))
			}
		}
		slices.Sort(kinds)
		out = append(out, "API writes: "+strings.Join(kinds, ", "))
	}
	for _, k := range slices.Sorted(maps.Keys(st.versions)) {
		if st.versions[k] != o.versions[k] {
			out = append(out, fmt.Sprintf("%s resourceVersion %s → %s", k, st.versions[k], o.versions[k]))
		}
	}
	return strings.Join(out, "; ")
}

// waitQuiet waits until the components have finished writing after the setup: no
// write of a watched resource for two seconds.
func waitQuiet(t *testing.T, cp *framework.ControlPlane) {
	t.Helper()
	last, since := -1.0, time.Now()
	framework.EventuallyWithin(t, time.Minute, "no API writes for 2 s", func(ctx context.Context) (bool, string) {
		counts, err := cp.RequestCounts(ctx)
		if err != nil {
			return false, err.Error()
		}
		n := 0.0
		for k, v := range counts {
			if res, _, _ := strings.Cut(k.Resource, "/"); k.Mutating() && slices.Contains(watched, res) {
				n += v
			}
		}
		if n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= 2*time.Second, fmt.Sprintf("%.0f writes so far", n)
	})
}

// queueAdds reads how many keys each agent's loop and the controller's ElasticIP
// controller were given so far.
func queueAdds(t *testing.T, c *harness.Cluster) map[string]float64 {
	t.Helper()
	ctx := context.Background()
	const series = `juneau_workqueue_adds_total{name="%s"}`
	out := map[string]float64{}
	text, err := c.ControllerMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v, ok := harness.MetricValue(text, fmt.Sprintf(series, "elasticip"))
	if !ok {
		t.Fatalf("the controller reports no %s", fmt.Sprintf(series, "elasticip"))
	}
	out["controller elasticip"] = v
	// An agent queues no key for an update that changes nothing it keeps: what a relist
	// brings of unchanged objects is counted as such.
	const unchanged = `juneau_node_updates_ignored_total{reason="unchanged"}`
	for name, n := range c.Nodes {
		text, err := n.Metrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{fmt.Sprintf(series, "node-agent"), unchanged} {
			v, ok := harness.MetricValue(text, s)
			if !ok {
				t.Fatalf("the agent of %s reports no %s", name, s)
			}
			out[name+" node-agent (queued or unchanged)"] += v
		}
	}
	return out
}
