// Package faults injects the faults a network add-on meets in production into a running
// system and checks that nothing is lost: the API server stopped for a minute, etcd
// restarted with its history compacted under idle watches, juneau's nftables table
// flushed by hand on a Node, a Node rebooted. Each test says why it runs on the
// simulated cluster of test/e2e/harness (real control plane, real juneau processes,
// real kernel datapath in network namespaces) rather than on the real cluster of
// test/cluster: there the fault could not be injected as faithfully, or only much more
// slowly. The leader failovers of the controller are tested in
// test/integration/controller.
package faults

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/e2e/harness"
	"github.com/loutres/juneau/test/framework"
	"github.com/loutres/juneau/test/require"
)

func TestMain(m *testing.M) { framework.Main(m) }

// udpPort is where every Pod of these tests answers UDP probes.
const udpPort = 7000

// probeInterval paces the continuous probes: each kind (UDP, ICMP, ARP) goes to each
// target this often.
const probeInterval = 75 * time.Millisecond

// ownControlPlane starts a control plane for one test, which may stop and restart it.
func ownControlPlane(t *testing.T) *framework.ControlPlane {
	t.Helper()
	require.Root(t)
	if _, err := framework.FindBinaries(); err != nil {
		require.Unmet(t, "%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp, err := framework.Start(ctx)
	if err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Cleanup(cp.Stop)
	return cp
}

// scenario is what every fault test starts from: a NAT Pod on node-a and a direct Pod
// on node-b, each answering UDP, their ElasticIPs attached and reachable from the
// external client.
type scenario struct {
	c                 *harness.Cluster
	ns                string
	nat, direct       *harness.Pod
	natEIP, directEIP string
}

func newScenario(t *testing.T, cp *framework.ControlPlane, opts harness.Options) *scenario {
	t.Helper()
	c := harness.New(t, cp, opts)
	s := &scenario{c: c, ns: cp.NewNamespace(t, "faults")}
	c.CreateExternalNetwork()
	createEIP(t, c, s.ns, "nat-eip")
	s.nat = c.RunPod(harness.PodSpec{Namespace: s.ns, Name: "nat", Node: "node-a"})
	attach(t, c, s.ns, "nat-attach", "nat-eip", "nat.eth0")
	createEIP(t, c, s.ns, "direct-eip")
	c.WaitElasticIPAvailable(s.ns, "direct-eip")
	s.direct = c.RunPod(harness.PodSpec{Namespace: s.ns, Name: "direct", Node: "node-b",
		Annotations: map[string]string{v1alpha1.AnnotationElasticIP: "direct-eip"}})
	s.natEIP = c.WaitElasticIPWorking(s.ns, "nat-eip")
	s.directEIP = c.WaitElasticIPWorking(s.ns, "direct-eip")
	c.ServeUDP(s.nat.NS, "nat", udpPort)
	c.ServeUDP(s.direct.NS, "direct", udpPort)
	s.waitReachable(t, s.targets()...)
	return s
}

func (s *scenario) targets() []harness.ProbeTarget {
	return []harness.ProbeTarget{{Addr: s.natEIP, Port: udpPort, Name: "nat"}, {Addr: s.directEIP, Port: udpPort, Name: "direct"}}
}

// waitReachable waits until each target answers UDP from the client with the
// client's address.
func (s *scenario) waitReachable(t *testing.T, targets ...harness.ProbeTarget) {
	t.Helper()
	for _, tg := range targets {
		framework.EventuallyWithin(t, time.Minute, "UDP through "+tg.Addr+" to "+tg.Name, func(context.Context) (bool, string) {
			got, from, err := harness.UDPAsk(s.c.Client, tg.Addr, tg.Port)
			return err == nil && got == tg.Name+" "+harness.ClientIP && from == tg.Addr, fmt.Sprintf("%q from %s, %v", got, from, err)
		})
	}
}

func createEIP(t *testing.T, c *harness.Cluster, ns, name string) {
	t.Helper()
	if _, err := c.CP.Juneau.JuneauV1alpha1().ElasticIPs(ns).Create(context.Background(), &v1alpha1.ElasticIP{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ElasticIPSpec{ExternalNetwork: "ext-net"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func attach(t *testing.T, c *harness.Cluster, ns, name, eip, nic string) {
	t.Helper()
	if _, err := c.CP.Juneau.JuneauV1alpha1().ElasticIPAttachments(ns).Create(context.Background(), &v1alpha1.ElasticIPAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ElasticIPAttachmentSpec{ElasticIPRef: v1alpha1.ElasticIPReference{Name: eip},
			TargetRef: v1alpha1.AttachmentTarget{NetworkInterfaceName: nic}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// checkClaims asserts one AllocationClaim per ElasticIP with an address, named after
// it and naming it (by UID) as its consumer, and no other claim: no duplicate, no leak.
func checkClaims(t *testing.T, cp *framework.ControlPlane) {
	t.Helper()
	j := cp.Juneau.JuneauV1alpha1()
	framework.EventuallyWithin(t, time.Minute, "one AllocationClaim per ElasticIP", func(ctx context.Context) (bool, string) {
		eips, err := j.ElasticIPs(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		claims, err := j.AllocationClaims().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		problems := claimProblems(eips.Items, claims.Items)
		return problems == "", problems
	})
}

// claimProblems describes what is wrong between ElasticIPs and claims ("" if nothing).
func claimProblems(eips []v1alpha1.ElasticIP, claims []v1alpha1.AllocationClaim) string {
	var problems []string
	byUID := map[string]v1alpha1.ElasticIP{}
	for _, e := range eips {
		byUID[string(e.UID)] = e
	}
	held := map[string]int{}
	for _, c := range claims {
		e, ok := byUID[c.Spec.Consumer.UID]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("claim %s: consumer %s/%s (%s) is no ElasticIP: leaked", c.Name, c.Spec.Consumer.Namespace, c.Spec.Consumer.Name, c.Spec.Consumer.UID))
		case e.Status.Address != c.Name:
			problems = append(problems, fmt.Sprintf("claim %s: its ElasticIP %s/%s has address %q", c.Name, e.Namespace, e.Name, e.Status.Address))
		}
		held[c.Spec.Consumer.UID]++
	}
	for _, e := range eips {
		if n := held[string(e.UID)]; n != 1 && e.Status.Address != "" {
			problems = append(problems, fmt.Sprintf("ElasticIP %s/%s (%s) holds %d claims", e.Namespace, e.Name, e.Status.Address, n))
		}
	}
	sort.Strings(problems)
	return strings.Join(problems, "; ")
}

// checkProbes fails the test if any probe failed, or if fewer were sent than the
// duration allows at half the pace (a prober that stalled proves nothing).
func checkProbes(t *testing.T, r harness.ProbeReport, d time.Duration) {
	t.Helper()
	least := int(d / probeInterval / 2)
	for what, n := range r.Sent {
		if n < least {
			t.Errorf("only %d %s probes in %s, want at least %d", n, what, d.Round(time.Second), least)
		}
	}
	if len(r.Failures) > 0 {
		t.Errorf("traffic or ARP answers stopped: %s", r)
	}
	t.Logf("%s", r)
}

// answering reports whether the advertisement of the ElasticIP says the Node
// answers ARP for it.
func answering(ctx context.Context, c *harness.Cluster, ns, eip string) bool {
	ad, err := c.CP.Juneau.JuneauV1alpha1().ARPAdvertisements().Get(ctx, advertisement.PreferredName(ns, eip), metav1.GetOptions{})
	if err != nil {
		return false
	}
	cond := meta.FindStatusCondition(ad.Status.Conditions, v1alpha1.ConditionAnswering)
	return cond != nil && cond.Status == metav1.ConditionTrue
}

// apiDown reports whether the API server refuses connections.
func apiDown(cp *framework.ControlPlane) bool {
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(cp.URL, "https://"), time.Second)
	if err == nil {
		conn.Close()
	}
	return err != nil
}
