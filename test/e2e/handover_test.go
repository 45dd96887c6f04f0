package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/e2e/harness"
	"github.com/loutres/juneau/test/framework"
)

// attachSteady gives a Pod on node-a an ElasticIP through an attachment, reachable from
// the client, and returns the address. The Pod has the readiness gates given.
func attachSteady(t *testing.T, c *harness.Cluster, ns string, readinessGates ...string) string {
	t.Helper()
	p := c.RunPod(harness.PodSpec{Namespace: ns, Name: "steady", Node: "node-a", ReadinessGates: readinessGates})
	c.ServeTCP(p.NS, "steady", 80)
	manifest := `apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIP
metadata: {name: steady-eip}
spec: {externalNetwork: ext-net}
---
apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIPAttachment
metadata: {name: steady-attach}
spec:
  elasticIPRef: {name: steady-eip}
  targetRef: {networkInterfaceName: steady.eth0}
`
	if r := c.CP.Kubectl(testContext(t), manifest, "apply", "-n", ns, "-f", "-"); r.Err != nil {
		t.Fatal(r.Err)
	}
	eip := c.WaitElasticIPWorking(ns, "steady-eip")
	c.EventuallyDial(c.Client, eip, 80, "steady")
	return eip
}

// freshPing pings addr from the client after deleting the client's neighbour entry for
// it, so that every probe needs an ARP answer, as a client or router whose entry
// expired does.
func freshPing(c *harness.Cluster, addr string) error {
	c.Client.FlushNeighbour("eth0", addr)
	_, err := harness.PingFrom(c.Client, addr)
	return err
}

// prober pings with a fresh neighbour entry again and again until stopped, counting
// the probes that got no answer.
type prober struct {
	stop   chan struct{}
	done   sync.WaitGroup
	mu     sync.Mutex
	sent   int
	failed []string
}

func startProber(c *harness.Cluster, addr string) *prober {
	p := &prober{stop: make(chan struct{})}
	p.done.Go(func() {
		for {
			select {
			case <-p.stop:
				return
			default:
			}
			err := freshPing(c, addr)
			p.mu.Lock()
			p.sent++
			if err != nil {
				p.failed = append(p.failed, time.Now().Format("15:04:05.000")+" "+err.Error())
			}
			p.mu.Unlock()
		}
	})
	return p
}

func (p *prober) finish() (sent int, failed []string) {
	close(p.stop)
	p.done.Wait()
	return p.sent, p.failed
}

// TestAgentSurgeHandover: a second agent started on a Node beside the running one (a
// DaemonSet rolling update with maxSurge) answers ARP at once and stands by; the old
// one stopped, the new one takes over the datapath and the CNI socket; a client whose
// neighbour entry is flushed before every probe loses nothing throughout.
func TestAgentSurgeHandover(t *testing.T) {
	c, ns := setup(t)
	ctx := testContext(t)
	eip := attachSteady(t, c, ns)
	node := c.Nodes["node-a"]
	waitAnswering(t, c, ns, node)

	probe := startProber(c, eip)
	next := c.StartAnotherAgent(node, "surge")
	framework.Eventually(t, "the new agent standing by", func(context.Context) (bool, string) {
		return strings.Contains(next.Log(), "standing by until it stops"), next.LogTail(5)
	}, next)
	// The new agent answers from its caches too before the old one stops.
	framework.Eventually(t, "the new agent answering from its caches", func(context.Context) (bool, string) {
		return strings.Contains(next.Log(), "Answering ARP from the caches while another agent holds the datapath"), next.LogTail(5)
	}, next)
	old := node.Agent
	old.Stop() // SIGTERM, as the DaemonSet controller deletes the old Pod
	node.Agent = next
	framework.Eventually(t, "the new agent taking over", func(context.Context) (bool, string) {
		return strings.Contains(next.Log(), "Took over the datapath"), next.LogTail(5)
	}, next)
	// Keep probing a little after the takeover: the new agent's first full sync.
	framework.Eventually(t, "probes after the takeover", func(context.Context) (bool, string) {
		probe.mu.Lock()
		defer probe.mu.Unlock()
		return probe.sent >= 20, ""
	})
	sent, failed := probe.finish()
	if len(failed) > 0 {
		t.Errorf("%d of %d probes with a flushed neighbour entry got no answer across the handover:\n%s", len(failed), sent, strings.Join(failed, "\n"))
	}
	t.Logf("%d probes, each with a fresh ARP resolution, across the handover", sent)
	if !strings.Contains(old.Log(), "the datapath stays for the next agent") {
		t.Errorf("the old agent did not leave the datapath to the next one:\n%s", old.LogTail(10))
	}

	// The new agent owns the datapath now: it serves the CNI socket and removes the
	// rules of a deleted attachment.
	c.WaitGone("the CNI socket served by the new agent", func(context.Context) bool {
		_, err := os.Stat(node.Socket)
		return err == nil && strings.Contains(next.Log(), "Serving the CNI plugin")
	})
	if err := c.CP.Juneau.JuneauV1alpha1().ElasticIPAttachments(ns).Delete(ctx, "steady-attach", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitGone("the mapping removed by the new agent", func(context.Context) bool {
		out, err := node.NS.Output("nft", "list", "map", "ip", "juneau", "eip2vpc")
		return err == nil && !strings.Contains(out, eip)
	})
}

// TestAgentCrashAnswersBeforeAPI: after a crash the next agent answers ARP for what the
// crashed one answered before it has heard from the API server (here: it cannot reach
// it at all), so the gap is the time the process takes to start; the NAT rules the
// kernel kept carry the traffic.
func TestAgentCrashAnswersBeforeAPI(t *testing.T) {
	c, ns := setup(t)
	eip := attachSteady(t, c, ns)
	node := c.Nodes["node-a"]
	waitAnswering(t, c, ns, node)

	node.Agent.Kill()
	// Nobody answers while no agent runs: the probe can fail.
	if err := freshPing(c, eip); err == nil {
		t.Fatalf("%s answered ARP with no agent running on node-a", eip)
	}

	// An API server that is not there: a kubeconfig naming a closed port.
	cfg, err := clientcmd.LoadFromFile(filepath.Join(filepath.Dir(node.Socket), "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range cfg.Clusters {
		cl.Server = "https://127.0.0.1:1"
	}
	unreachable := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, unreachable); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	blind := c.StartAnotherAgent(node, "no-api", "--kubeconfig="+unreachable, "--external-interface=ext0")
	// The agent says when it answers from what the crashed one saved; from then on an
	// answer is one ARP try away (docs/operations.md#restarts-and-rollouts).
	var ready time.Time
	framework.EventuallyWithin(t, 30*time.Second, "the restarted agent answering from the saved addresses", func(context.Context) (bool, string) {
		if strings.Contains(blind.Log(), "Answering ARP for the addresses of the previous agent") {
			ready = time.Now()
			return true, ""
		}
		return false, blind.LogTail(5)
	}, blind)
	framework.EventuallyWithin(t, 30*time.Second, "an answer from the restarted agent without the API server", func(context.Context) (bool, string) {
		err := freshPing(c, eip)
		return err == nil, errString(err)
	}, blind)
	gap, answered := time.Since(started), time.Since(ready)
	t.Logf("answered %v after the agent was started, %v after it said it answers, without the API server",
		gap.Round(time.Millisecond), answered.Round(time.Millisecond))
	// The client resolves again every second (the kernel's ARP retransmission time), so
	// an answer at the first or second try is all a client can see: the agent must not
	// wait for anything once it answers.
	if answered > 2*time.Second {
		t.Errorf("the restarted agent answered only %v after it said it answers from the saved addresses", answered)
	}
	if strings.Contains(blind.Log(), "Caches are synced") {
		t.Fatalf("the agent reached the API server; the test proves nothing:\n%s", blind.LogTail(10))
	}

	// Back with the API server: the caches take over and the datapath is whole.
	blind.Kill()
	c.StartAgent(node)
	waitAnswering(t, c, ns, node)
	if err := freshPing(c, eip); err != nil {
		t.Fatalf("after the restart with the API server: %v", err)
	}
	c.EventuallyDial(c.Client, eip, 80, "steady")
}

// waitAnswering waits until steady-eip's advertisement says node answers with its MAC.
func waitAnswering(t *testing.T, c *harness.Cluster, ns string, node *harness.Node) {
	t.Helper()
	mac := node.NS.MAC("ext0").String()
	name := advertisement.PreferredName(ns, "steady-eip")
	c.WaitGone("Answering on "+node.Name, func(ctx context.Context) bool {
		ad, err := c.CP.Juneau.JuneauV1alpha1().ARPAdvertisements().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		cond := meta.FindStatusCondition(ad.Status.Conditions, v1alpha1.ConditionAnswering)
		return cond != nil && cond.Status == metav1.ConditionTrue && strings.Contains(cond.Message, mac)
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestAnsweringUnknownWhenAgentGone: the agent of a Node renews its heartbeat Lease; once
// it is killed and the Lease expires, the controller turns the Node's advertisement
// Answering=Unknown (AgentNotReporting) and the ElasticIP's Attached False saying so;
// the agent back, both are True again.
func TestAnsweringUnknownWhenAgentGone(t *testing.T) {
	c, ns := setup(t)
	attachSteady(t, c, ns)
	node := c.Nodes["node-a"]
	waitAnswering(t, c, ns, node)
	lease, err := c.CP.Kube.CoordinationV1().Leases(framework.NodeNamespace).Get(testContext(t), v1alpha1.NodeLeasePrefix+"node-a", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "node-a" || len(lease.OwnerReferences) != 1 || lease.OwnerReferences[0].Name != "node-a" {
		t.Fatalf("heartbeat Lease of node-a: %+v, %v; want one held by node-a and owned by its Node", lease, err)
	}

	node.Agent.Kill()
	name := advertisement.PreferredName(ns, "steady-eip")
	c.WaitGone("Answering Unknown after the agent's Lease expired", func(ctx context.Context) bool {
		ad, err := c.CP.Juneau.JuneauV1alpha1().ARPAdvertisements().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		cond := meta.FindStatusCondition(ad.Status.Conditions, v1alpha1.ConditionAnswering)
		return cond != nil && cond.Status == metav1.ConditionUnknown && cond.Reason == v1alpha1.ReasonAgentNotReporting &&
			strings.Contains(cond.Message, `"juneau-node/juneau-node-node-a"`)
	})
	eip := c.WaitElasticIPCondition(ns, "steady-eip", v1alpha1.ConditionAttached, v1alpha1.ReasonAgentNotReporting)
	if at := meta.FindStatusCondition(eip.Status.Conditions, v1alpha1.ConditionAttached); at.Status != metav1.ConditionFalse ||
		!strings.Contains(at.Message, `Node "node-a" may no longer answer ARP`) {
		t.Errorf("ElasticIP Attached %s: %q, want False saying the Node may no longer answer", at.Status, at.Message)
	}

	c.StartAgent(node)
	waitAnswering(t, c, ns, node)
	c.WaitElasticIPCondition(ns, "steady-eip", v1alpha1.ConditionAttached, v1alpha1.ReasonAttached)
}
