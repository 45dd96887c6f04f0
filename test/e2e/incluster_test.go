package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/e2e/harness"
	"github.com/loutres/juneau/test/framework"
	"github.com/loutres/juneau/test/netns"
)

// inClusterClient is a client inside the cluster and the address the server should see
// when that client reaches it.
type inClusterClient struct {
	name string
	ns   *netns.NS
	seen string
}

// eventually polls check for up to a minute and fails the test with its last error, or
// at once when a node agent exits.
func eventually(t *testing.T, c *harness.Cluster, what string, check func() error) {
	t.Helper()
	var agents []*framework.Component
	for _, n := range c.Nodes {
		agents = append(agents, n.Agent)
	}
	framework.EventuallyWithin(t, time.Minute, what, func(context.Context) (bool, string) {
		if err := check(); err != nil {
			return false, err.Error()
		}
		return true, ""
	}, agents...)
}

// reachesThrough checks that client reaches the server named server through addr over
// HTTP, UDP and ICMP echo, that every answer comes from addr, and that the server saw
// the client as client.seen. HTTP is retried until the agents have programmed addr.
func reachesThrough(t *testing.T, c *harness.Cluster, client inClusterClient, addr, server string) {
	t.Helper()
	want := server + " " + client.seen
	eventually(t, c, client.name+": HTTP to "+addr, func() error {
		body, peer, err := harness.HTTPGet(client.ns, addr, 80)
		if err != nil || body != want || peer != addr {
			return fmt.Errorf("answer %q from peer %s (%v), want %q from %s", body, peer, err, want, addr)
		}
		return nil
	})
	if answer, from, err := harness.UDPAsk(client.ns, addr, 53); err != nil || answer != want || from != addr {
		t.Errorf("%s: UDP to %s answered %q from %s (%v), want %q from %s", client.name, addr, answer, from, err, want, addr)
	}
	if from, err := harness.PingFrom(client.ns, addr); err != nil || from != addr {
		t.Errorf("%s: echo request to %s answered from %q (%v)", client.name, addr, from, err)
	}
}

// podIPTraffic asks a server by Pod IP over UDP, one datagram after the other, until
// stopped: a flow that must not notice anything.
type podIPTraffic struct {
	stop     chan struct{}
	wg       sync.WaitGroup
	answered int
	failures []string
}

func startPodIPTraffic(client *netns.NS, podIP, want string) *podIPTraffic {
	p := &podIPTraffic{stop: make(chan struct{})}
	p.wg.Go(func() {
		for {
			select {
			case <-p.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			answer, from, err := harness.UDPAsk(client, podIP, 53)
			if err != nil || answer != want || from != podIP {
				p.failures = append(p.failures, fmt.Sprintf("%q from %s (%v)", answer, from, err))
				continue
			}
			p.answered++
		}
	})
	return p
}

func (p *podIPTraffic) finish(t *testing.T) {
	t.Helper()
	close(p.stop)
	p.wg.Wait()
	if len(p.failures) > 0 || p.answered == 0 {
		t.Errorf("traffic by Pod IP: %d answered, %d failed: %v", p.answered, len(p.failures), p.failures)
	}
}

// serveWhoAmI serves HTTP on 80 and UDP on 53 in ns, answering with name and the client
// address seen.
func serveWhoAmI(c *harness.Cluster, ns *netns.NS, name string) {
	c.ServeHTTP(ns, name, 80)
	c.ServeUDP(ns, name, 53)
}

// TestInClusterClients: web's ElasticIP, attached by NAT, is reached from a Pod on the
// same Node, a Pod on the other Node, web itself and each Node, over HTTP, UDP and ICMP
// echo; every answer comes from the ElasticIP. web sees the client as it would by Pod
// IP (ptp masquerades Pod traffic to other Nodes' Pods), and itself as its ElasticIP.
// A Pod talking to web by Pod IP meanwhile notices nothing, and the external client's
// flows stay out of conntrack. Then web is re-created on the other Node, its
// attachment follows, and the in-cluster clients follow it.
func TestInClusterClients(t *testing.T) {
	c, ns := setup(t)
	ctx := testContext(t)
	nodeA, nodeB := c.Nodes["node-a"], c.Nodes["node-b"]
	web := c.RunPod(harness.PodSpec{Namespace: ns, Name: "web", Node: "node-a"})
	serveWhoAmI(c, web.NS, "web")
	apply := `apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIP
metadata: {name: web-eip}
spec: {externalNetwork: ext-net}
---
apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIPAttachment
metadata: {name: web-attach}
spec:
  elasticIPRef: {name: web-eip}
  targetRef: {networkInterfaceName: web.eth0}
`
	if r := c.CP.Kubectl(ctx, apply, "apply", "-n", ns, "-f", "-"); r.Err != nil {
		t.Fatal(r.Err)
	}
	eip := c.WaitElasticIPWorking(ns, "web-eip")
	same := c.RunPod(harness.PodSpec{Namespace: ns, Name: "same", Node: "node-a"})
	other := c.RunPod(harness.PodSpec{Namespace: ns, Name: "other", Node: "node-b"})

	byPodIP := startPodIPTraffic(same.NS, web.IP, "web "+same.IP)
	clients := []inClusterClient{
		{"Pod on the same Node", same.NS, same.IP},
		{"Pod on the other Node", other.NS, nodeB.IP},
		{"web itself", web.NS, eip},
		{"node-a", nodeA.NS, nodeA.IP},
		{"node-b", nodeB.NS, nodeB.IP},
	}
	for _, cl := range clients {
		t.Run(cl.name, func(t *testing.T) { reachesThrough(t, c, cl, eip, "web") })
	}
	t.Run("by Pod IP, web sees the same clients", func(t *testing.T) {
		for _, cl := range []inClusterClient{clients[0], clients[1], clients[4]} {
			if body, _, err := harness.HTTPGet(cl.ns, web.IP, 80); err != nil || body != "web "+cl.seen {
				t.Errorf("%s: by Pod IP web answered %q (%v), want %q", cl.name, body, err, "web "+cl.seen)
			}
		}
	})
	t.Run("external client, untracked", func(t *testing.T) {
		if body, _, err := harness.HTTPGet(c.Client, eip, 80); err != nil || body != "web "+harness.ClientIP {
			t.Errorf("external client: %q (%v)", body, err)
		}
		for _, n := range []*harness.Node{nodeA, nodeB} {
			if out := n.NS.MustRun("conntrack", "-L"); strings.Contains(out, "src="+harness.ClientIP+" ") {
				t.Errorf("%s tracked the external client's flows:\n%s", n.Name, out)
			}
		}
	})
	byPodIP.finish(t)

	// web moves: deleted, re-created under the same name on node-b. Its
	// NetworkInterface web.eth0 comes back there and the attachment follows.
	web.Gone()
	moved := c.RunPod(harness.PodSpec{Namespace: ns, Name: "web", Node: "node-b"})
	serveWhoAmI(c, moved.NS, "moved")
	c.WaitGone("web-attach on node-b", func(ctx context.Context) bool {
		a, err := c.CP.Juneau.JuneauV1alpha1().ElasticIPAttachments(ns).Get(ctx, "web-attach", metav1.GetOptions{})
		return err == nil && a.Status.Phase == v1alpha1.AttachmentAttached && a.Status.NodeName == "node-b" && a.Status.PodIP == moved.IP
	})
	for _, cl := range []inClusterClient{
		{"Pod on node-a after the move", same.NS, nodeA.IP},
		{"Pod on node-b after the move", other.NS, other.IP},
		{"web itself after the move", moved.NS, eip},
		{"node-a after the move", nodeA.NS, nodeA.IP},
		{"node-b after the move", nodeB.NS, nodeB.IP},
	} {
		t.Run(cl.name, func(t *testing.T) { reachesThrough(t, c, cl, eip, "moved") })
	}
	c.Client.FlushNeighbour("eth0", eip)
	eventually(t, c, "external client after the move", func() error {
		if body, _, err := harness.HTTPGet(c.Client, eip, 80); err != nil || body != "moved "+harness.ClientIP {
			return fmt.Errorf("%q (%v)", body, err)
		}
		return nil
	})
}

// TestInClusterClientsDirect: an ElasticIP a Pod carries itself (direct use) is reached
// from inside the cluster as it is: Pods on either Node and both Nodes get answers from
// the ElasticIP over HTTP, UDP and ICMP echo. No translation is involved; the Pod's
// replies are routed like any other.
func TestInClusterClientsDirect(t *testing.T) {
	c, ns := setup(t)
	createElasticIP(t, c, ns, "edge-eip")
	eip := c.WaitElasticIPAvailable(ns, "edge-eip")
	edge := c.RunPod(harness.PodSpec{Namespace: ns, Name: "edge", Node: "node-b",
		Annotations: map[string]string{v1alpha1.AnnotationElasticIP: "edge-eip"}})
	serveWhoAmI(c, edge.NS, "edge")
	onA := c.RunPod(harness.PodSpec{Namespace: ns, Name: "on-a", Node: "node-a"})
	onB := c.RunPod(harness.PodSpec{Namespace: ns, Name: "on-b", Node: "node-b"})
	for _, cl := range []struct {
		name string
		ns   *netns.NS
	}{{"Pod on node-a", onA.NS}, {"Pod on the same Node", onB.NS}, {"node-a", c.Nodes["node-a"].NS}, {"node-b", c.Nodes["node-b"].NS}} {
		t.Run(cl.name, func(t *testing.T) {
			var body string
			eventually(t, c, "HTTP to "+eip, func() error {
				var peer string
				var err error
				body, peer, err = harness.HTTPGet(cl.ns, eip, 80)
				if err != nil || !strings.HasPrefix(body, "edge ") || peer != eip {
					return fmt.Errorf("answer %q from peer %s (%v)", body, peer, err)
				}
				return nil
			})
			t.Logf("edge saw %s", strings.TrimPrefix(body, "edge "))
			if answer, from, err := harness.UDPAsk(cl.ns, eip, 53); err != nil || !strings.HasPrefix(answer, "edge ") || from != eip {
				t.Errorf("UDP answered %q from %s (%v), want edge from %s", answer, from, err, eip)
			}
			if from, err := harness.PingFrom(cl.ns, eip); err != nil || from != eip {
				t.Errorf("echo request answered from %q (%v)", from, err)
			}
		})
	}
}
