package nft

import (
	"strings"
	"testing"
)

// TestNATInboundOutbound: ping, TCP and UDP reach the Pod through the
// ElasticIP; the Pod sees the client's real address; the Pod's own traffic
// reaches the client from the ElasticIP even though a masquerade rule like
// the primary CNI's is installed; conntrack never sees translated flows but
// still tracks the Pod's cluster traffic.
func TestNATInboundOutbound(t *testing.T) {
	tp := newTopology(t, topologyOptions{masquerade: true})
	tp.sync(t)

	t.Run("inbound", func(t *testing.T) {
		ping(t, tp.client, elasticIP, 3)
		if saw := tcpExchange(t, tp.pod, tp.client, 8080, elasticIP); saw != clientIP {
			t.Errorf("Pod saw TCP from %s, want the client %s", saw, clientIP)
		}
		saw, from := udpExchange(t, tp.pod, tp.client, 5353, elasticIP)
		if saw != clientIP || from != elasticIP {
			t.Errorf("UDP: Pod saw %s (want %s), client got the answer from %s (want %s)", saw, clientIP, from, elasticIP)
		}
	})
	t.Run("outbound", func(t *testing.T) {
		ping(t, tp.pod, clientIP, 3)
		if saw := tcpExchange(t, tp.client, tp.pod, 9090, clientIP); saw != elasticIP {
			t.Errorf("client saw TCP from %s, want the ElasticIP %s", saw, elasticIP)
		}
		saw, from := udpExchange(t, tp.client, tp.pod, 5354, clientIP)
		if saw != elasticIP || from != clientIP {
			t.Errorf("UDP: client saw %s (want %s), Pod got the answer from %s", saw, elasticIP, from)
		}
	})
	t.Run("cluster traffic untranslated and tracked", func(t *testing.T) {
		ping(t, tp.pod, nodeIP, 2) // the node address is a cluster range
		ping(t, tp.client, nodeIP, 2)
		ct := tp.conntrackEntries(t)
		if !strings.Contains(ct, "src="+podIP+" dst="+nodeIP) {
			t.Errorf("Pod → node traffic not tracked; conntrack:\n%s", ct)
		}
		if !strings.Contains(ct, "src="+clientIP+" dst="+nodeIP) {
			t.Errorf("conntrack not active in the node (client → node untracked):\n%s", ct)
		}
	})
	t.Run("no conntrack entries for translated flows", func(t *testing.T) {
		for _, l := range lines(tp.conntrackEntries(t)) {
			if strings.Contains(l, "="+elasticIP+" ") || (strings.Contains(l, "="+podIP+" ") && strings.Contains(l, "="+clientIP+" ")) {
				t.Errorf("translated flow in conntrack: %s", l)
			}
		}
	})
}
