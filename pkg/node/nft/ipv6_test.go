package nft

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/loutres/juneau/test/netns"
)

// TestNATIPv6: a dual-stack Pod with an IPv4 and an IPv6 ElasticIP at once;
// ping, TCP and UDP reach it through both, its own traffic leaves from
// them although a masquerade like the primary CNI's is installed for both
// families, and conntrack holds none of these flows.
func TestNATIPv6(t *testing.T) {
	tp := newTopology(t, topologyOptions{masquerade: true, ipv6: true})
	tp.sync(t)

	t.Run("inbound", func(t *testing.T) {
		ping(t, tp.client, elasticIP6, 3)
		ping(t, tp.client, elasticIP, 3)
		if saw := tcpExchange(t, tp.pod, tp.client, 8080, elasticIP6); saw != clientIP6 {
			t.Errorf("Pod saw TCP from %s, want the client %s", saw, clientIP6)
		}
		saw, from := udpExchange(t, tp.pod, tp.client, 5353, elasticIP6)
		if saw != clientIP6 || from != elasticIP6 {
			t.Errorf("UDP: Pod saw %s (want %s), client got the answer from %s (want %s)", saw, clientIP6, from, elasticIP6)
		}
		if saw := tcpExchange(t, tp.pod, tp.client, 8081, elasticIP); saw != clientIP {
			t.Errorf("IPv4 beside IPv6: Pod saw TCP from %s, want %s", saw, clientIP)
		}
	})
	t.Run("outbound", func(t *testing.T) {
		ping(t, tp.pod, clientIP6, 3)
		if saw := tcpExchange(t, tp.client, tp.pod, 9090, clientIP6); saw != elasticIP6 {
			t.Errorf("client saw TCP from %s, want the ElasticIP %s", saw, elasticIP6)
		}
		saw, from := udpExchange(t, tp.client, tp.pod, 5354, clientIP6)
		if saw != elasticIP6 || from != clientIP6 {
			t.Errorf("UDP: client saw %s (want %s), Pod got the answer from %s", saw, elasticIP6, from)
		}
		if saw := tcpExchange(t, tp.client, tp.pod, 9091, clientIP); saw != elasticIP {
			t.Errorf("IPv4 beside IPv6: client saw TCP from %s, want %s", saw, elasticIP)
		}
	})
	t.Run("no conntrack entries for translated flows", func(t *testing.T) {
		ping(t, tp.pod, nodeIP6, 2) // a cluster address: tracked
		out, err := tp.node.Output("conntrack", "-L", "-f", "ipv6")
		if err != nil {
			t.Fatalf("conntrack -L -f ipv6: %v\n%s", err, out)
		}
		if !strings.Contains(out, "src="+podIP6+" dst="+nodeIP6) {
			t.Errorf("Pod → node traffic not tracked; conntrack:\n%s", out)
		}
		for _, l := range lines(out) {
			if strings.Contains(l, "="+elasticIP6+" ") || (strings.Contains(l, "="+podIP6+" ") && strings.Contains(l, "="+clientIP6+" ")) {
				t.Errorf("translated flow in conntrack: %s", l)
			}
		}
	})
	t.Run("kernel maps", func(t *testing.T) {
		got, err := tp.prog.KernelMappings(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		want := []Mapping{{ElasticIP: addr(elasticIP), PodIP: addr(podIP)}, {ElasticIP: addr(elasticIP6), PodIP: addr(podIP6)}}
		if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("KernelMappings = %v, want %v", got, want)
		}
	})
}

// TestMixedFamiliesRefused: an IPv6 ElasticIP for an IPv4 Pod IP is left out
// with an error saying so (no NAT64); the other mappings are applied.
func TestMixedFamiliesRefused(t *testing.T) {
	tp := newTopology(t, topologyOptions{ipv6: true})
	tp.state.Mappings = []Mapping{
		{ElasticIP: addr(elasticIP), PodIP: addr(podIP)},
		{ElasticIP: addr(elasticIP6), PodIP: addr("10.244.1.6")},
	}
	err := tp.prog.Sync(context.Background(), tp.state)
	if !errors.Is(err, ErrInvalidMapping) || !strings.Contains(err.Error(), "2001:db8:51::5<->10.244.1.6: ElasticIP and Pod IP are of different families") ||
		!strings.Contains(err.Error(), "no NAT64") {
		t.Fatalf("Sync = %v, want the mixed mapping refused", err)
	}
	ping(t, tp.client, elasticIP, 2)
	got, err := tp.prog.KernelMappings(context.Background())
	if err != nil || len(got) != 1 || got[0].ElasticIP != addr(elasticIP) {
		t.Errorf("KernelMappings = %v, %v; want the IPv4 mapping only", got, err)
	}
}

// TestNeighborDiscoveryNotTranslated: a neighbor solicitation the client
// sends to the ElasticIP itself (a reachability check) is not translated to
// the Pod: it is counted and dropped at the node, while an echo request right
// after it reaches the Pod.
func TestNeighborDiscoveryNotTranslated(t *testing.T) {
	tp := newTopology(t, topologyOptions{ipv6: true})
	tp.sync(t)
	podCap := tp.pod.Capture("eth0")
	tp.client.SendNeighborSolicitation(elasticIP6)
	ping(t, tp.client, elasticIP6, 1)
	podCap.Stop()
	for _, f := range podCap.Frames() {
		if p, ok := netns.ParseFrame6(f.Data); ok && p.Next == netns.ProtoICMPv6 && len(p.Payload) > 0 && p.Payload[0] == 135 &&
			!f.Outgoing && p.Src == addr(clientIP6) {
			t.Errorf("the client's neighbor solicitation reached the Pod: %v → %v", p.Src, p.Dst)
		}
	}
	out, _ := tp.node.Output("nft", "list", "chain", "ip6", TableName, ChainDNAT)
	if m := regexp.MustCompile(`icmpv6 type 133-137 counter packets (\d+)`).FindStringSubmatch(out); m == nil || m[1] != "1" {
		t.Errorf("NDP drop counter: want 1 packet:\n%s", out)
	}
}

// TestInClusterClientsIPv6: a Pod beside the target, the target itself and
// the node reach the target through its IPv6 ElasticIP, translated with
// conntrack at their origin; the target sees the client Pod's address (its
// own ElasticIP in the hairpin case) and every client sees the ElasticIP.
func TestInClusterClientsIPv6(t *testing.T) {
	tp := newTopology(t, topologyOptions{ipv6: true})
	const clientPodIP6 = "fd00:10:244:1::6"
	cpod := netns.New(t, "cpod6")
	netns.Veth(tp.node, "vcpod", cpod, "eth0")
	tp.node.Addr("vcpod", podGW6+"/64")
	tp.node.Route(clientPodIP6+"/128", "", "vcpod")
	cpod.Addr("eth0", clientPodIP6+"/128")
	cpod.Route("default", podGW6, "eth0")
	tp.state.InCluster = tp.state.Mappings
	tp.sync(t)

	if saw := tcpExchange(t, tp.pod, cpod, 8443, elasticIP6); saw != clientPodIP6 {
		t.Errorf("Pod client: target saw %s, want %s", saw, clientPodIP6)
	}
	if saw, from := udpExchange(t, tp.pod, cpod, 5443, elasticIP6); saw != clientPodIP6 || from != elasticIP6 {
		t.Errorf("Pod client over UDP: target saw %s, answer from %s", saw, from)
	}
	if saw := tcpExchange(t, tp.pod, tp.pod, 8444, elasticIP6); saw != elasticIP6 {
		t.Errorf("hairpin: target saw %s, want its own ElasticIP %s", saw, elasticIP6)
	}
	if saw := tcpExchange(t, tp.pod, tp.node, 8445, elasticIP6); saw != nodeIP6 && saw != podGW6 {
		t.Errorf("node client: target saw %s", saw)
	}
	ping(t, cpod, elasticIP6, 2)
}
