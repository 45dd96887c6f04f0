package nft

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/loutres/juneau/test/netns"
)

// A second NAT Pod on the node, whose mapping stays unlimited.
const (
	freeEIP    = "10.225.51.7"
	freePodIP  = "10.244.1.7"
	freePodDev = "vfree"
)

// Bulk TCP transfers: segments carry 1448 bytes of payload (MSS 1460 minus
// the timestamp option) in 1500-byte IP packets, and the limit counts IP
// bytes. The warmup drains the bucket the limiter starts with (one second
// of traffic at the rate) and lets TCP settle; the window is measured.
const (
	payloadPerPacket = 1448.0 / 1500.0
	limitedWarmup    = time.Second
	limitedWindow    = 3 * time.Second
	freeWarmup       = 300 * time.Millisecond
	freeWindow       = time.Second
	// An unlimited flow must run at least this many times the limit.
	freeFactor = 4
	// endpointRTOMin is the minimum TCP retransmission timeout of the test's
	// client and Pods (µs). With the default 200 ms on a link whose RTT is
	// a few µs, a sender stalled in a timeout leaves tokens unused; the
	// one-second bucket saves them and pays them back as a burst later, so
	// a 3 s window measured 4.7–6.0 Mbit/s at a 5 Mbit/s limit. The limiter's
	// long-run rate is the same; a short timeout only keeps the sender
	// backlogged, so the window measures the rate rather than TCP's stalls
	// (4.8–4.9 Mbit/s over many runs, with CUBIC or BBR).
	endpointRTOMin = "5000"
)

// addNATPod adds a Pod behind the node with its own veth, like the
// topology's Pod, and the client's neighbour entry for its ElasticIP.
func addNATPod(t *testing.T, tp *topology, hostDev, eip, ip string) *netns.NS {
	t.Helper()
	pod := netns.New(t, "pod2")
	netns.Veth(tp.node, hostDev, pod, "eth0")
	tp.node.Addr(hostDev, podGW+"/32")
	tp.node.Route(ip+"/32", "", hostDev)
	pod.Addr("eth0", ip+"/32")
	pod.Route(podGW+"/32", "", "eth0")
	pod.Route("default", podGW, "eth0")
	tp.node.DisableOffload(hostDev)
	pod.DisableOffload("eth0")
	tp.client.Neigh("eth0", eip, tp.node.MAC(extIf))
	return pod
}

type flowResult struct {
	name string
	// mbps is the rate the receiver saw, converted to IP bytes (the unit
	// of the limit): goodput / payloadPerPacket.
	mbps float64
	err  error
}

// startFlow sends TCP data from sender to dialIP:port, where receiver
// listens, as fast as TCP manages. The receiver measures over window,
// starting warmup after the first byte, then closes the connection, which
// stops the sender.
func startFlow(t *testing.T, name string, receiver, sender *netns.NS, dialIP string, port int, warmup, window time.Duration) <-chan flowResult {
	t.Helper()
	var ln *net.TCPListener
	receiver.MustDo(func() error {
		l, err := net.Listen("tcp4", fmt.Sprintf("0.0.0.0:%d", port))
		if err == nil {
			ln = l.(*net.TCPListener)
		}
		return err
	})
	t.Cleanup(func() { ln.Close() })
	_ = ln.SetDeadline(time.Now().Add(ioTimeout))
	res := make(chan flowResult, 1)
	go func() {
		defer ln.Close()
		c, err := ln.Accept()
		if err != nil {
			res <- flowResult{name: name, err: err}
			return
		}
		defer c.Close()
		r := measure(c, warmup, window)
		r.name = name
		res <- r
	}()
	var conn net.Conn
	sender.MustDo(func() (err error) {
		conn, err = net.DialTimeout("tcp4", fmt.Sprintf("%s:%d", dialIP, port), ioTimeout)
		return err
	})
	t.Cleanup(func() { conn.Close() })
	go func() {
		defer conn.Close()
		buf := make([]byte, 64<<10)
		_ = conn.SetWriteDeadline(time.Now().Add(warmup + window + ioTimeout))
		for {
			if _, err := conn.Write(buf); err != nil {
				return
			}
		}
	}()
	return res
}

// measure reads from c until warmup+window after the first byte and returns
// the rate over the window.
func measure(c net.Conn, warmup, window time.Duration) flowResult {
	_ = c.SetReadDeadline(time.Now().Add(ioTimeout + warmup + window))
	buf := make([]byte, 64<<10)
	var total, mark int64
	var first, markAt time.Time
	for {
		n, err := c.Read(buf)
		now := time.Now()
		if err != nil {
			return flowResult{err: fmt.Errorf("after %d bytes: %w", total, err)}
		}
		total += int64(n)
		switch {
		case first.IsZero():
			first = now
		case markAt.IsZero() && now.Sub(first) >= warmup:
			markAt, mark = now, total
		case !markAt.IsZero() && now.Sub(markAt) >= window:
			bits := float64(total-mark) * 8 / payloadPerPacket
			return flowResult{mbps: bits / now.Sub(markAt).Seconds() / 1e6}
		}
	}
}

// collect waits for flows and fails the test on a transfer error.
func collect(t *testing.T, flows ...<-chan flowResult) []flowResult {
	t.Helper()
	var out []flowResult
	for _, f := range flows {
		r := <-f
		if r.err != nil {
			t.Fatalf("flow %s: %v", r.name, r.err)
		}
		out = append(out, r)
	}
	return out
}

// wantNear checks that a limited flow carries what its token bucket allows and
// is not starved by it. On a quiet machine flows measure 4.7–5.2 Mbit/s for a
// 5 Mbit/s limit; on a machine whose CPUs are oversubscribed a sender loses
// whole scheduling slices, so TCP leaves tokens unused (hence the 70% floor)
// and the bucket, which holds one second of traffic, refills meanwhile and is
// spent in a burst inside the window: a window carries at most the rate plus
// one bucket, 10% more for measurement.
func wantNear(t *testing.T, rs []flowResult, limit float64) {
	t.Helper()
	low, high := 0.7*limit, 1.1*limit*(1+float64(time.Second)/float64(limitedWindow))
	for _, r := range rs {
		t.Logf("%s: %.2f Mbit/s (limit %.0f)", r.name, r.mbps, limit)
		if r.mbps < low || r.mbps > high {
			t.Errorf("%s: %.2f Mbit/s, want %.1f to %.1f for a limit of %.0f", r.name, r.mbps, low, high, limit)
		}
	}
}

func wantFast(t *testing.T, rs []flowResult, limit float64) {
	t.Helper()
	for _, r := range rs {
		t.Logf("%s: %.1f Mbit/s (unlimited)", r.name, r.mbps)
		if r.mbps < freeFactor*limit {
			t.Errorf("%s: %.1f Mbit/s, want at least %d × %.0f", r.name, r.mbps, freeFactor, limit)
		}
	}
}

// limitRule reads the handle and the drop counter of the rule in a limit
// chain.
func limitRule(t *testing.T, ns *netns.NS, chain string) (handle, drops uint64) {
	t.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(ns.FD()))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := c.GetRules(newTable(fam4), &nftables.Chain{Name: chain, Table: newTable(fam4)})
	if err != nil || len(rules) != 1 {
		t.Fatalf("chain %s: %d rules, %v", chain, len(rules), err)
	}
	for _, e := range rules[0].Exprs {
		if ctr, ok := e.(*expr.Counter); ok {
			return rules[0].Handle, ctr.Packets
		}
	}
	t.Fatalf("chain %s: rule without a counter", chain)
	return 0, 0
}

func wantKernelLimits(t *testing.T, tp *topology, want map[netip.Addr]int32) {
	t.Helper()
	got, err := tp.prog.KernelLimits(context.Background())
	if err != nil || !maps.Equal(got, want) {
		t.Errorf("KernelLimits = %v, %v; want %v", got, err, want)
	}
}

// TestBandwidthLimit: a NAT ElasticIP and a direct NIC limited to 5 Mbit/s
// each carry about 5 Mbit/s (within wantNear's bounds) in each direction while an unlimited mapping on
// the same node runs many times faster; raising the NAT limit to 10 Mbit/s
// rewrites only that ElasticIP's chains and takes effect; removing it makes
// the flows unlimited. Drops are counted by the limit rules themselves.
func TestBandwidthLimit(t *testing.T) {
	tp := newTopology(t, topologyOptions{})
	free := addNATPod(t, tp, freePodDev, freeEIP, freePodIP)
	direct := addDirectPod(t, tp)
	tp.state.Mappings[0].BandwidthMbps = 5
	tp.state.Mappings = append(tp.state.Mappings, Mapping{ElasticIP: addr(freeEIP), PodIP: addr(freePodIP)})
	tp.state.Direct[0].BandwidthMbps = 5
	tp.sync(t)
	for _, ns := range []*netns.NS{tp.client, tp.pod, direct, free} {
		ns.Sysctl("net/ipv4/tcp_rto_min_us", endpointRTOMin)
	}
	wantKernelLimits(t, tp, map[netip.Addr]int32{addr(elasticIP): 5, addr(directEIP): 5})
	natIn, natOut := LimitChainNames(addr(elasticIP))
	dirIn, dirOut := LimitChainNames(addr(directEIP))

	t.Run("5 Mbit/s in each direction", func(t *testing.T) {
		rs := collect(t,
			startFlow(t, "NAT inbound", tp.pod, tp.client, elasticIP, 7001, limitedWarmup, limitedWindow),
			startFlow(t, "NAT outbound", tp.client, tp.pod, clientIP, 7002, limitedWarmup, limitedWindow),
			startFlow(t, "direct inbound", direct, tp.client, directEIP, 7003, limitedWarmup, limitedWindow),
			startFlow(t, "direct outbound", tp.client, direct, clientIP, 7004, limitedWarmup, limitedWindow),
		)
		wantNear(t, rs, 5)
		for _, chain := range []string{natIn, natOut, dirIn, dirOut} {
			if _, drops := limitRule(t, tp.node, chain); drops == 0 {
				t.Errorf("%s dropped nothing", chain)
			}
		}
	})
	t.Run("unlimited mapping unaffected", func(t *testing.T) {
		wantFast(t, collect(t, startFlow(t, "free inbound", free, tp.client, freeEIP, 7005, freeWarmup, freeWindow)), 5)
		wantFast(t, collect(t, startFlow(t, "free outbound", tp.client, free, clientIP, 7006, freeWarmup, freeWindow)), 5)
	})

	t.Run("raised to 10 Mbit/s", func(t *testing.T) {
		hIn, dropsIn := limitRule(t, tp.node, dirIn)
		hOut, dropsOut := limitRule(t, tp.node, dirOut)
		natHandle, _ := limitRule(t, tp.node, natIn)
		tp.state.Mappings[0].BandwidthMbps = 10
		before := generation(t, tp.node)
		tp.sync(t)
		if after := generation(t, tp.node); after != before+1 {
			t.Errorf("generation went from %d to %d: not one transaction", before, after)
		}
		if st := tp.prog.LastSync(); st.Full || st.LimitsChanged != 1 || st.Added+st.Removed+st.LimitsAdded+st.LimitsRemoved != 0 {
			t.Errorf("stats = %+v, want one limit changed and nothing else", st)
		}
		wantKernelLimits(t, tp, map[netip.Addr]int32{addr(elasticIP): 10, addr(directEIP): 5})
		// The direct NIC's rules are the same rules, counters and buckets intact.
		if h, d := limitRule(t, tp.node, dirIn); h != hIn || d < dropsIn {
			t.Errorf("%s rewritten: handle %d -> %d, drops %d -> %d", dirIn, hIn, h, dropsIn, d)
		}
		if h, d := limitRule(t, tp.node, dirOut); h != hOut || d < dropsOut {
			t.Errorf("%s rewritten: handle %d -> %d, drops %d -> %d", dirOut, hOut, h, dropsOut, d)
		}
		if h, _ := limitRule(t, tp.node, natIn); h == natHandle {
			t.Errorf("%s kept its rule", natIn)
		}
		wantNear(t, collect(t,
			startFlow(t, "NAT inbound", tp.pod, tp.client, elasticIP, 7011, limitedWarmup, limitedWindow),
			startFlow(t, "NAT outbound", tp.client, tp.pod, clientIP, 7012, limitedWarmup, limitedWindow),
		), 10)
	})

	t.Run("removed", func(t *testing.T) {
		tp.state.Mappings[0].BandwidthMbps = 0
		tp.sync(t)
		if st := tp.prog.LastSync(); st.Full || st.LimitsRemoved != 1 || st.Limited != 1 {
			t.Errorf("stats = %+v, want one limit removed element by element", st)
		}
		wantKernelLimits(t, tp, map[netip.Addr]int32{addr(directEIP): 5})
		for _, set := range []string{MapLimitIn, MapLimitOut} {
			if e := kernelElements(t, tp.node, set); len(e) != 1 {
				t.Errorf("%s holds %d elements, want only the direct NIC's", set, len(e))
			}
		}
		wantFast(t, collect(t, startFlow(t, "NAT inbound", tp.pod, tp.client, elasticIP, 7021, freeWarmup, freeWindow)), 10)
		wantFast(t, collect(t, startFlow(t, "NAT outbound", tp.client, tp.pod, clientIP, 7022, freeWarmup, freeWindow)), 10)
	})
}
