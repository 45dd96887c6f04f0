package faults

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/e2e/harness"
	"github.com/loutres/juneau/test/framework"
)

// TestNodeReboot: both Nodes lose power. node-a carried a NAT ElasticIP and a second
// one, "old-eip", whose attachment is deleted while the Node is down; node-b carried
// the direct Pod. Each Node comes back with an empty kernel and what it kept on disk,
// its agent started again, the kubelet re-creating the Pods' sandboxes. From the API
// alone: node-a's table maps the NAT ElasticIP to the Pod's new address and nothing
// else (not old-eip), node-b routes the direct ElasticIP to the Pod's new veth and
// nowhere else, both ElasticIPs answer from outside again, nobody answers ARP for
// old-eip's address, the CNI state and IPAM reservations of the dead sandboxes are
// gone, and the claims are one per ElasticIP.
//
// Harness, not the real cluster: a Node's reboot there is a machine's, which the
// real-cluster tier cannot do to a Node without losing the test's own kubelet; the
// harness empties exactly what a reboot empties (the kernel's state, /run) and keeps
// the disk.
func TestNodeReboot(t *testing.T) {
	s := newScenario(t, framework.Shared(t), harness.Options{})
	c := s.c
	a, b := c.Nodes["node-a"], c.Nodes["node-b"]
	createEIP(t, c, s.ns, "old-eip")
	old := c.RunPod(harness.PodSpec{Namespace: s.ns, Name: "old", Node: "node-a"})
	attach(t, c, s.ns, "old-attach", "old-eip", "old.eth0")
	oldEIP := c.WaitElasticIPWorking(s.ns, "old-eip")
	c.ServeUDP(old.NS, "old", udpPort)
	s.waitReachable(t, harness.ProbeTarget{Addr: oldEIP, Port: udpPort, Name: "old"})
	before := map[string][]string{}
	for _, n := range []*harness.Node{a, b} {
		before[n.Name] = containerIDs(t, n)
	}

	c.PowerOff(a)
	c.PowerOff(b)
	if c.ARPAnswered(s.natEIP) {
		t.Fatalf("%s is still answered with both Nodes down", s.natEIP)
	}
	// While node-a is down, old-eip's attachment goes: nothing must bring it back.
	if err := c.CP.Juneau.JuneauV1alpha1().ElasticIPAttachments(s.ns).Delete(context.Background(), "old-attach", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.EventuallyWithin(t, time.Minute, "old-eip Available", func(ctx context.Context) (bool, string) {
		e, err := c.CP.Juneau.JuneauV1alpha1().ElasticIPs(s.ns).Get(ctx, "old-eip", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return e.Status.Phase == v1alpha1.ElasticIPAvailable, string(e.Status.Phase)
	})
	booted := time.Now()
	c.PowerOn(a)
	c.PowerOn(b)
	for _, p := range []*harness.Pod{s.nat, old, s.direct} {
		if err := p.RestartSandbox(); err != nil {
			t.Fatalf("restarting the sandbox of %s: %v", p.Spec.Name, err)
		}
	}
	c.ServeUDP(s.nat.NS, "nat", udpPort)
	c.ServeUDP(s.direct.NS, "direct", udpPort)
	c.ServeUDP(old.NS, "old", udpPort)
	s.waitReachable(t, s.targets()...)
	t.Logf("both ElasticIPs answer %s after the Nodes booted", time.Since(booted).Round(100*time.Millisecond))

	// node-a: exactly the NAT ElasticIP, to the Pod's new address.
	table := listTable(t, a)
	if !strings.Contains(table, s.natEIP+" : "+s.nat.IP) {
		t.Errorf("node-a's table does not map %s to the Pod's new address %s:\n%s", s.natEIP, s.nat.IP, table)
	}
	if strings.Contains(table, oldEIP) {
		t.Errorf("node-a's table still has %s, detached while the Node was down:\n%s", oldEIP, table)
	}
	if c.ARPAnswered(oldEIP) {
		t.Errorf("%s, detached while node-a was down, is answered by ARP", oldEIP)
	}
	if got, _, err := harness.UDPAsk(c.Client, oldEIP, udpPort); err == nil {
		t.Errorf("%s, detached while node-a was down, still reaches a Pod: %q", oldEIP, got)
	}
	// node-b: one route to the direct ElasticIP, through the new sandbox's veth.
	hostIf := hostInterface(t, s.direct)
	routes := strings.TrimSpace(b.NS.MustRun("ip", "-4", "-o", "route", "show", "table", "all", "to", s.directEIP+"/32"))
	if lines := strings.Split(routes, "\n"); len(lines) != 1 || !strings.Contains(routes, "dev "+hostIf+" ") {
		t.Errorf("node-b's routes to %s: %q, want one through %s", s.directEIP, routes, hostIf)
	}
	if s.direct.IP != s.directEIP {
		t.Errorf("the direct Pod's eth0 is %s after the reboot, want its ElasticIP %s", s.direct.IP, s.directEIP)
	}
	// On disk: only the new sandboxes' state and reservations.
	for n, pods := range map[*harness.Node]int{a: 2, b: 1} {
		now := containerIDs(t, n)
		for _, id := range before[n.Name] {
			for _, cur := range now {
				if cur == id {
					t.Errorf("%s still keeps state of the sandbox %s, which died with it", n.Name, id)
				}
			}
		}
		if len(now) != pods {
			t.Errorf("%s keeps state of %d sandboxes %v, want %d (its Pods')", n.Name, len(now), now, pods)
		}
	}
	checkClaims(t, c.CP)
	for _, n := range []*harness.Node{a, b} {
		if starts := strings.Count(n.Agent.Log(), "Starting node agent"); starts != 1 {
			t.Errorf("the agent of %s started %d times since the reboot", n.Name, starts)
		}
	}
}

// hostInterface is the host side of the Pod's eth0, from its CNI result.
func hostInterface(t *testing.T, p *harness.Pod) string {
	t.Helper()
	for _, ifc := range p.Result.Interfaces {
		if ifc.Sandbox == "" {
			return ifc.Name
		}
	}
	t.Fatalf("no host interface in the CNI result of %s: %+v", p.Spec.Name, p.Result.Interfaces)
	return ""
}

// containerIDs lists the sandboxes the Node keeps state of on its disk: host-local's
// reservations (one file per address, holding the container ID) and juneau's state
// files (which name it), deduplicated.
func containerIDs(t *testing.T, n *harness.Node) []string {
	t.Helper()
	seen := map[string]bool{}
	var ids []string
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	reservations, _ := filepath.Glob(filepath.Join(n.Dir(), "ipam", "*", "*.*.*.*"))
	for _, f := range reservations {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		add(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	}
	states, _ := filepath.Glob(filepath.Join(n.Dir(), "cni-state", "*"))
	for _, f := range states {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			ContainerID string `json:"containerID"`
		}
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		add(st.ContainerID)
	}
	return ids
}
