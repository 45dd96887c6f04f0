package nft

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/test/require"
)

// traceLine is one line of `nft monitor trace` about our table: the trace id,
// the chain and what happened there.
var traceLine = regexp.MustCompile(`^trace id ([0-9a-f]+) ip ` + TableName + ` (\S+) (.*)$`)

// juneauPath sends one UDP datagram to port with send and returns what
// `nft monitor trace` shows of it in table juneau in the prerouting hook:
// the chains of each traced event, in order, and the events themselves.
// done tells when the trace is complete.
func juneauPath(t *testing.T, out func() string, port int, send func(), done func(events []string) bool) (chains, events []string) {
	t.Helper()
	start := len(out())
	send()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		chains, events = nil, nil
		id := ""
		for _, l := range lines(out()[start:]) {
			m := traceLine.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			if id == "" && m[2] == ChainPrerouting && strings.HasPrefix(m[3], "packet:") && strings.Contains(m[3], fmt.Sprintf("udp dport %d ", port)) {
				id = m[1]
			}
			if m[1] != id || m[2] == ChainPostrouting && strings.HasPrefix(m[3], "packet:") {
				if m[1] == id {
					break // the same packet leaving: prerouting is over
				}
				continue
			}
			chains = append(chains, m[2])
			events = append(events, m[2]+" "+m[3])
		}
		return done(events), nil
	})
	if err != nil {
		t.Fatalf("trace incomplete: %q", events)
	}
	return chains, events
}

func anyContains(events []string, s string) bool {
	return slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, s) })
}

// TestDispatch follows packets through the table with the kernel's packet
// trace: a packet from outside to an ElasticIP without a limit goes through
// the interface dispatch and the one translating rule, and no other chain
// (no limit, no anti-spoofing, no ICMP handling); a limited ElasticIP's
// packet still goes through its limit chain and the full translation; a
// direct NIC's spoofed packet is still dropped, and its own packet still
// meets its outbound limit.
func TestDispatch(t *testing.T) {
	require.Binary(t, "nft")
	tp := newTopology(t, topologyOptions{})
	const limitedEIP, limitedPod = "10.225.51.7", "10.244.1.7"
	addNATPod(t, tp, "vpod2", limitedEIP, limitedPod)
	direct := addDirectPod(t, tp)
	tp.state.Mappings = append(tp.state.Mappings, Mapping{ElasticIP: addr(limitedEIP), PodIP: addr(limitedPod), BandwidthMbps: 5})
	tp.state.Direct[0].BandwidthMbps = 50
	tp.sync(t)

	// Trace every packet entering the node, from before our chain on.
	tp.node.MustRun("nft", "-f", writeTemp(t, "trace.nft", `table ip tracing {
	chain prerouting {
		type filter hook prerouting priority -350; policy accept;
		meta nftrace set 1
	}
}`))
	mon := tp.node.Start("nft", "monitor", "trace")
	// The monitor is listening once a packet's trace shows up.
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		sendUDPFrom(t, tp.client, clientIP, nodeIP, 9, "warm-up")
		return strings.Contains(mon.Output(), "ip "+TableName+" prerouting"), nil
	}); err != nil {
		t.Fatalf("no trace from nft monitor: %q", mon.Output())
	}

	t.Run("unlimited ElasticIP: one rule", func(t *testing.T) {
		chains, events := juneauPath(t, mon.Output, 7001, func() { sendUDPFrom(t, tp.client, clientIP, elasticIP, 7001, "plain") },
			func(ev []string) bool { return anyContains(ev, "(verdict accept)") })
		// The packet, then the first rule (interface by index, translation): nothing else.
		if want := []string{ChainPrerouting, ChainPrerouting}; !slices.Equal(chains, want) ||
			!strings.Contains(events[1], `rule iif "`+extIf+`"`) || !strings.Contains(events[1], "notrack accept") {
			t.Errorf("chains %q, want %q; events %q", chains, want, events)
		}
	})
	t.Run("unlimited ElasticIP, interface index unknown: by name", func(t *testing.T) {
		// As after the external interface was recreated: its old index
		// matches nothing, the name-based dispatch does the same.
		index := tp.prog.ifindex
		tp.prog.ifindex = func(string) uint32 { return 0 }
		tp.prog.Invalidate()
		tp.sync(t)
		tp.prog.ifindex = index
		chains, events := juneauPath(t, mon.Output, 7005, func() { sendUDPFrom(t, tp.client, clientIP, elasticIP, 7005, "plain") },
			func(ev []string) bool { return anyContains(ev, "(verdict accept)") })
		if want := []string{ChainPrerouting, ChainPrerouting, ChainFromOutside}; !slices.Equal(chains, want) || anyContains(events, "verdict jump") {
			t.Errorf("chains %q, want %q; events %q", chains, want, events)
		}
		if !anyContains(events, "goto "+ChainFromOutside) || !anyContains(events, "notrack accept") {
			t.Errorf("events %q: not the interface dispatch and the translating rule", events)
		}
		tp.prog.Invalidate()
		tp.sync(t)
	})
	t.Run("limited ElasticIP: limit chain, then translation", func(t *testing.T) {
		chains, events := juneauPath(t, mon.Output, 7002, func() { sendUDPFrom(t, tp.client, clientIP, limitedEIP, 7002, "limited") },
			func(ev []string) bool { return anyContains(ev, ChainPrerouting+" policy accept") })
		in, _ := LimitChainNames(addr(limitedEIP))
		// The limit chain's rule matches only over the rate; the jump shows.
		if !anyContains(events, "verdict jump "+in) || !slices.Contains(chains, ChainDNAT) {
			t.Errorf("chains %q: want a jump to %s and %s; events %q", chains, in, ChainDNAT, events)
		}
	})
	t.Run("translated Pod to outside: accepted at once, rewritten by one rule", func(t *testing.T) {
		start := len(mon.Output())
		sendUDPFrom(t, tp.pod, podIP, clientIP, 7006, "out")
		var pre, post []string
		err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			pre, post = nil, nil
			id := ""
			for _, l := range lines(mon.Output()[start:]) {
				m := traceLine.FindStringSubmatch(l)
				switch {
				case m == nil:
				case id == "" && m[2] == ChainPrerouting && strings.Contains(m[3], "udp dport 7006 "):
					id = m[1]
				case m[1] != id:
				case m[2] == ChainPrerouting:
					pre = append(pre, m[3])
				case m[2] == ChainPostrouting:
					post = append(post, m[3])
				}
			}
			return anyContains(post, "(verdict accept)"), nil
		})
		// In prerouting the outbound rule is the last one evaluated; in
		// postrouting the first rule, by index, rewrites and accepts.
		if err != nil || len(pre) != 1 || !strings.Contains(pre[0], "ip saddr @"+MapVPC2EIP) || !strings.Contains(pre[0], "notrack accept (verdict accept)") ||
			len(post) < 2 || !strings.Contains(post[1], `rule oif "`+extIf+`"`) || !strings.Contains(post[1], "(verdict accept)") {
			t.Errorf("trace of the Pod's packet: prerouting %q, postrouting %q (%v)", pre, post, err)
		}
	})
	t.Run("direct NIC, spoofed source: dropped", func(t *testing.T) {
		direct.Addr("eth0", spoofedIP+"/32")
		_, events := juneauPath(t, mon.Output, 7003, func() { sendUDPFrom(t, direct, spoofedIP, clientIP, 7003, "spoofed") },
			func(ev []string) bool { return anyContains(ev, "verdict drop") })
		if !anyContains(events, SetDirectAllowed) {
			t.Errorf("events %q: not dropped by the anti-spoofing rule", events)
		}
	})
	t.Run("direct NIC, own source: outbound limit", func(t *testing.T) {
		chains, events := juneauPath(t, mon.Output, 7004, func() { sendUDPFrom(t, direct, directEIP, clientIP, 7004, "own") },
			func(ev []string) bool { return anyContains(ev, ChainPrerouting+" policy accept") })
		_, out := LimitChainNames(addr(directEIP))
		if !anyContains(events, "verdict jump "+out) || slices.Contains(chains, ChainFromOutside) {
			t.Errorf("chains %q: want a jump to %s and not %s; events %q", chains, out, ChainFromOutside, events)
		}
	})
}
