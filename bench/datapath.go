package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/bench/pkt"
	"github.com/loutres/juneau/pkg/node/nft"
	"github.com/loutres/juneau/pkg/node/sysctl"
	"github.com/loutres/juneau/test/netns"
	"github.com/loutres/juneau/test/require"
)

// dpTopology is an external client, a node that forwards, and a Pod behind the node,
// each in a namespace of its own:
//
//	client (eth0 10.225.51.100) ── (ext0 10.225.51.2) node (vpod) ── (eth0 10.244.1.5) pod
type dpTopology struct {
	client, node, pod *netns.NS
	sink              *net.UDPConn
}

// sinkPort is where the blasted datagrams go; the Pod binds it and never reads, so the
// kernel drops them quietly instead of answering port-unreachable.
const sinkPort = 9

func newDPTopology(e *env) *dpTopology {
	tp := &dpTopology{client: netns.New(e, "dpcli"), node: netns.New(e, "dpnode"), pod: netns.New(e, "dppod")}
	netns.Veth(tp.node, extIf, tp.client, "eth0")
	tp.node.Addr(extIf, nodeIP.String()+"/24")
	tp.client.Addr("eth0", clientIP.String()+"/24")
	netns.Veth(tp.node, "vpod", tp.pod, "eth0")
	tp.node.Addr("vpod", podGW.String()+"/32")
	tp.node.Route(podIP.String()+"/32", "", "vpod")
	tp.pod.Addr("eth0", podIP.String()+"/32")
	tp.pod.Route(podGW.String()+"/32", "", "eth0")
	tp.pod.Route("default", podGW.String(), "eth0")
	tp.node.Sysctl("net/ipv4/ip_forward", "1")
	tp.node.MustDo(func() error { return sysctl.New().Apply(sysctl.ExternalInterface(extIf)) })
	// Static neighbours: the benchmark measures forwarding, not address resolution (row 5
	// measures ARP). Plain routing reaches the Pod network through the node; NAT reaches
	// the ElasticIP at the node's MAC, as the node's ARP replies would tell it.
	tp.client.Route("10.244.0.0/16", nodeIP.String(), "")
	tp.client.Neigh("eth0", elasticIP.String(), tp.node.MAC(extIf))
	tp.client.Neigh("eth0", nodeIP.String(), tp.node.MAC(extIf))
	tp.node.Neigh("vpod", podIP.String(), tp.pod.MAC("eth0"))
	tp.node.Neigh(extIf, clientIP.String(), tp.client.MAC("eth0"))
	tp.pod.Neigh("eth0", podGW.String(), tp.node.MAC("vpod"))
	tp.pod.MustDo(func() error {
		var err error
		tp.sink, err = net.ListenUDP("udp4", &net.UDPAddr{Port: sinkPort})
		if err == nil {
			err = tp.sink.SetReadBuffer(4096)
		}
		return err
	})
	e.Cleanup(func() { tp.sink.Close() })
	return tp
}

// podReceived is the number of frames the Pod's interface received so far.
func (tp *dpTopology) podReceived(e *env) uint64 {
	l := tp.pod.Link("eth0")
	if l.Attrs().Statistics == nil {
		e.Fatalf("no statistics for the Pod's eth0")
	}
	return l.Attrs().Statistics.RxPackets
}

// blast sends 60-byte UDP frames from the client towards dst for d (at most limit
// frames) from one thread, and returns the rate at which they reached the Pod, per
// second of the sending thread's CPU time. With
// newFlows every frame has a source address and port no earlier frame had (10.225.51.100
// to .199 × ports 1024-65535), so every packet is a new flow for connection tracking.
func (tp *dpTopology) blast(e *env, dst netip.Addr, newFlows bool, d time.Duration, limit int) float64 {
	var sock *pkt.Socket
	tp.client.MustDo(func() (err error) { sock, err = pkt.Open("eth0", 0); return err })
	defer sock.Close()
	src := pkt.Endpoint{MAC: tp.client.MAC("eth0"), IP: clientIP, Port: 40000}
	to := pkt.Endpoint{MAC: tp.node.MAC(extIf), IP: dst, Port: sinkPort}
	bufs := make([][]byte, 64*2)
	for i := range bufs {
		bufs[i] = pkt.UDP(src, to, pkt.MinFrameLen)
	}
	next := func(i int) []byte { return bufs[0] }
	if newFlows {
		next = func(i int) []byte {
			f := bufs[i%len(bufs)]
			pkt.SetUDPSource(f, netip.AddrFrom4([4]byte{10, 225, 51, byte(100 + i%100)}), uint16(1024+(i/100)%64512))
			return f
		}
	}
	before := tp.podReceived(e)
	sent, elapsed, err := sock.Blast(next, d, limit)
	if err != nil {
		e.Fatalf("sending: %v", err)
	}
	received := tp.settledReceived(e)
	if sent == 0 || received < before {
		e.Fatalf("sent %d frames, Pod counter went from %d to %d", sent, before, received)
	}
	// Per second of the sending thread's CPU time, which includes the forwarding (done
	// in its softirq) but not the time it waited for a CPU that other work on the
	// machine held: on a shared machine that wait is most of the noise.
	if sock.BlastCPU > 0 {
		return float64(received-before) / sock.BlastCPU.Seconds()
	}
	return float64(received-before) / elapsed.Seconds()
}

// settledReceived waits until the Pod's counter stops moving (frames still queued in the
// node are counted) and returns it.
func (tp *dpTopology) settledReceived(e *env) uint64 {
	last := tp.podReceived(e)
	_ = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 2*time.Second, false,
		func(context.Context) (bool, error) {
			now := tp.podReceived(e)
			stable := now == last
			last = now
			return stable, nil
		})
	return last
}

// tcpThroughput runs one iperf3 flow from the client to dst:5201, served in the Pod, and
// returns the bits per second the receiver counted.
func (tp *dpTopology) tcpThroughput(e *env, dst netip.Addr, d time.Duration) float64 {
	server := tp.pod.Start("iperf3", "-s", "-1", "-p", "5201", "--forceflush")
	if err := server.WaitForOutput("Server listening", 10*time.Second); err != nil {
		e.Fatalf("iperf3 server: %v", err)
	}
	out, err := tp.client.Output("iperf3", "-c", dst.String(), "-p", "5201", "-J", "-t", fmt.Sprint(max(1, int(d.Seconds()))))
	if err != nil {
		e.Fatalf("iperf3 client: %v\n%s", err, out)
	}
	var res struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.End.SumReceived.BitsPerSecond == 0 {
		e.Fatalf("iperf3 output (%v):\n%s", err, out)
	}
	_ = server.Wait(10 * time.Second)
	return res.End.SumReceived.BitsPerSecond
}

// dpResult is what one datapath configuration achieved.
type dpResult struct {
	longFlow, newFlows float64 // packets per second (medians)
	// longRuns and newRuns are the rates of each round, in the order measured.
	longRuns, newRuns []float64
	tcp               float64 // bits per second
}

// dpConfig is one way of getting packets through the node.
type dpConfig struct {
	name    string
	profile string     // file name of its kernel profile
	dst     netip.Addr // where the client sends
	setup   func(e *env, tp *dpTopology)
	// afterRun runs between repetitions (flushing conntrack, so new flows stay new).
	afterRun func(e *env, tp *dpTopology)
}

// juneauConfig is juneau's NAT with n mappings on a node where conntrack is loaded.
func juneauConfig(ctx context.Context, n int) dpConfig {
	return dpConfig{name: fmt.Sprintf("juneau NAT, %d mappings", n), profile: fmt.Sprintf("juneau-%d", n), dst: elasticIP, setup: func(e *env, tp *dpTopology) {
		loadConntrack(e, tp.node)
		p := nft.NewProgrammer(nft.Options{NetNS: tp.node.FD()})
		if err := p.Sync(ctx, natState(benchMappings(n))); err != nil {
			e.Fatalf("programming %d mappings: %v", n, err)
		}
	}}
}

// floorConfig is the bare stateless map NAT (bareMapNAT) with n mappings, conntrack loaded.
func floorConfig(n int) dpConfig {
	return dpConfig{name: fmt.Sprintf("bare nftables map NAT, %d mappings", n), profile: fmt.Sprintf("floor-%d", n), dst: elasticIP,
		setup: func(e *env, tp *dpTopology) {
			loadConntrack(e, tp.node)
			bareMapNAT(e, tp.node, benchMappings(n))
		}}
}

// plainConntrackConfig is plain routing on a node where conntrack is loaded: every
// packet is tracked.
func plainConntrackConfig() dpConfig {
	return dpConfig{name: "plain routing, conntrack loaded", profile: "plain-conntrack", dst: podIP,
		setup:    func(e *env, tp *dpTopology) { loadConntrack(e, tp.node) },
		afterRun: func(e *env, tp *dpTopology) { tp.node.MustRun("conntrack", "-F") },
	}
}

func iptablesConfig(n int) dpConfig {
	return dpConfig{name: fmt.Sprintf("iptables DNAT/SNAT + conntrack, %d rules", n), profile: fmt.Sprintf("iptables-%d", n), dst: elasticIP,
		setup: func(e *env, tp *dpTopology) {
			bin := require.Binary(e, "iptables-restore")
			runIn(e, tp.node, bin, iptablesRestore(benchMappings(n)))
		},
		afterRun: func(e *env, tp *dpTopology) { tp.node.MustRun("conntrack", "-F") },
	}
}

// dpCase is one configuration on its own topology and what it achieved.
type dpCase struct {
	cfg         dpConfig
	tp          *dpTopology
	long, fresh []float64 // packets per second of each run
	tcp         float64   // bits per second
}

func (c *dpCase) result() dpResult {
	return dpResult{longFlow: median(c.long), newFlows: median(c.fresh), longRuns: c.long, newRuns: c.fresh, tcp: c.tcp}
}

// measureAll builds a fresh topology per configuration, then measures in rounds that
// visit every configuration in turn, so that load from elsewhere on the machine spreads
// over all of them alike; each figure is the median of its runs.
func measureAll(e *env, cfgs []dpConfig, reps int, d time.Duration, limit int) []dpResult {
	cases := make([]*dpCase, len(cfgs))
	for i, cfg := range cfgs {
		cases[i] = &dpCase{cfg: cfg, tp: newDPTopology(e)}
		if cfg.setup != nil {
			cfg.setup(e, cases[i].tp)
		}
	}
	after := func(c *dpCase) {
		if c.cfg.afterRun != nil {
			c.cfg.afterRun(e, c.tp)
		}
	}
	run := func(c *dpCase, newFlows bool) float64 {
		v := c.tp.blast(e, c.cfg.dst, newFlows, d, limit)
		after(c)
		return v
	}
	for range reps {
		for _, c := range cases {
			c.long = append(c.long, run(c, false))
			c.fresh = append(c.fresh, run(c, true))
		}
	}
	out := make([]dpResult, len(cases))
	for i, c := range cases {
		// A longer extra run under perf, not counted, with enough samples to attribute the
		// cost; bounded as before where connection tracking keeps state per flow.
		perfLimit := 4 * limit
		if c.cfg.afterRun != nil {
			perfLimit = limit
		}
		e.perfRecord("datapath-"+c.cfg.profile, func() { c.tp.blast(e, c.cfg.dst, true, 4*d, perfLimit); after(c) })
		c.tcp = c.tp.tcpThroughput(e, c.cfg.dst, 2*time.Second)
		out[i] = c.result()
		e.Logf("%-45s long flow %10.0f pps   new flows %10.0f pps   TCP %6.2f Gbit/s", c.cfg.name, out[i].longFlow, out[i].newFlows, out[i].tcp/1e9)
	}
	return out
}

// pairedRatio is the median of a[i] / b[i]: two configurations measured back to back in
// every round, so that load from elsewhere on the machine, which changes from one
// round to the next, cancels out of each ratio.
func pairedRatio(a, b []float64) float64 {
	var r []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			r = append(r, a[i]/b[i])
		}
	}
	return median(r)
}

// benchDatapath (row 3) compares packets per second and TCP throughput through the node
// for plain routing, juneau NAT and iptables DNAT/SNAT with conntrack.
func benchDatapath(ctx context.Context, e *env) []Row {
	require.Root(e)
	for _, bin := range []string{"iperf3", "iptables-restore", "conntrack"} {
		require.Binary(e, bin)
	}
	reps, d, n := 9, 500*time.Millisecond, 10000
	if e.cfg.quick {
		reps, d = 1, 200*time.Millisecond
	}
	// Bounded so that one iptables run never fills the connection-tracking table
	// (262,144 entries by default), which would measure drops instead of the rules.
	limit := 200000
	res := measureAll(e, []dpConfig{
		{name: "plain routing", profile: "plain", dst: podIP},
		juneauConfig(ctx, 1), juneauConfig(ctx, n), floorConfig(n), plainConntrackConfig(), iptablesConfig(1), iptablesConfig(n),
	}, reps, d, limit)
	plain, j1, jN, floor, plainCT, i1, iN := res[0], res[1], res[2], res[3], res[4], res[5], res[6]

	how := fmt.Sprintf("60-byte UDP frames sent by one thread (sendmmsg on a packet socket) for %s (≤ %d frames), counted at the Pod's interface, per second of the sending thread's CPU time (it also forwards them, in its softirq; time waiting for a CPU held by other work is left out); median of %d runs, configurations taken in turn; namespaces of their own per configuration; conntrack loaded in the node (a `ct state` rule in the output hook registers its hooks, as kube-proxy's rules do on every node) for every configuration but the informative plain routing without it",
		d, limit, reps)
	floorHow := fmt.Sprintf("floor: table of its own with the maps eip2vpc and vpc2eip (%d elements each) and two rules, `ip daddr set ip daddr map @eip2vpc notrack` at raw prerouting and `ip saddr set ip saddr map @vpc2eip` at srcnat+10 postrouting, conntrack loaded; floor / plain routing with conntrack loaded: new flows %.2f, one flow %.2f",
		n, floor.newFlows/plainCT.newFlows, floor.longFlow/plainCT.longFlow)
	all := fmt.Sprintf("all figures, long flow / new flows: plain (conntrack loaded) %s / %s; plain without conntrack %s / %s; juneau 1 %s / %s; juneau %d %s / %s; floor %d %s / %s; iptables 1 %s / %s; iptables %d %s / %s",
		pps(plainCT.longFlow), pps(plainCT.newFlows), pps(plain.longFlow), pps(plain.newFlows), pps(j1.longFlow), pps(j1.newFlows), n, pps(jN.longFlow), pps(jN.newFlows),
		n, pps(floor.longFlow), pps(floor.newFlows), pps(i1.longFlow), pps(i1.newFlows), n, pps(iN.longFlow), pps(iN.newFlows))
	return []Row{
		{ID: "3a", What: "pps, new flow per packet: juneau 10k / plain", Figure: pps(jN.newFlows), Baseline: pps(plainCT.newFlows),
			BaselineWhat: "plain routing, conntrack loaded", Target: ratioAtLeast(0.85), Note: how},
		{ID: "3b", What: "pps, new flow per packet: juneau 10k / bare map NAT 10k", Figure: pps(jN.newFlows), Baseline: pps(floor.newFlows),
			BaselineWhat: "bare stateless nftables map NAT", Target: ratioAtLeast(0.97), Note: floorHow,
			PairedRatio: pairedRatio(jN.newRuns, floor.newRuns)},
		{ID: "3c", What: "pps, one long flow: juneau 10k / plain", Figure: pps(jN.longFlow), Baseline: pps(plainCT.longFlow),
			BaselineWhat: "plain routing, conntrack loaded", Target: ratioAtLeast(0.85)},
		{ID: "3d", What: "pps, one long flow: juneau 10k / bare map NAT 10k", Figure: pps(jN.longFlow), Baseline: pps(floor.longFlow),
			BaselineWhat: "bare stateless nftables map NAT", Target: ratioAtLeast(0.97),
			PairedRatio: pairedRatio(jN.longRuns, floor.longRuns),
			Note: fmt.Sprintf("3b, 3d: ratio = median over the %d rounds of juneau's rate / the floor's, measured back to back in each round (juneau 10k is the configuration just before the floor); ratio of the medians: new flows %.2f, one flow %.2f; juneau 1 / floor: new flows %.2f, one flow %.2f",
				reps, jN.newFlows/floor.newFlows, jN.longFlow/floor.longFlow, pairedRatio(j1.newRuns, floor.newRuns), pairedRatio(j1.longRuns, floor.longRuns))},
		{ID: "3e", What: "pps, one long flow: juneau 10k / plain without conntrack", Figure: pps(jN.longFlow), Baseline: pps(plain.longFlow),
			BaselineWhat: "plain routing, no conntrack", Note: fmt.Sprintf("new flows: %.2f; the floor: %.2f one flow, %.2f new flows",
				jN.newFlows/plain.newFlows, floor.longFlow/plain.longFlow, floor.newFlows/plain.newFlows)},
		{ID: "3f", What: "pps, new flow per packet: juneau 10k / iptables 10k", Figure: pps(jN.newFlows), Baseline: pps(iN.newFlows),
			BaselineWhat: "iptables+conntrack", Target: ratioAtLeast(1), Note: all},
		{ID: "3g", What: "pps, one long flow: juneau 10k / iptables 10k", Figure: pps(jN.longFlow), Baseline: pps(iN.longFlow),
			BaselineWhat: "iptables+conntrack"},
		{ID: "3h", What: "pps, new flows: juneau 1 / iptables 1", Figure: pps(j1.newFlows), Baseline: pps(i1.newFlows),
			BaselineWhat: "iptables+conntrack"},
		{ID: "3i", What: "TCP throughput, one flow: juneau 10k / plain", Figure: bitsPerSecond(jN.tcp), Baseline: bitsPerSecond(plainCT.tcp),
			BaselineWhat: "plain routing, conntrack loaded", Note: "iperf3, one TCP connection for 2 s, veth offloads on"},
		{ID: "3j", What: "TCP throughput, one flow: juneau 10k / iptables 10k", Figure: bitsPerSecond(jN.tcp), Baseline: bitsPerSecond(iN.tcp),
			BaselineWhat: "iptables+conntrack", Note: strings.TrimSpace(fmt.Sprintf("TCP: plain without conntrack %s, plain with conntrack loaded %s, juneau 1 %s, juneau %d %s, floor %d %s, iptables 1 %s, iptables %d %s",
				bitsPerSecond(plain.tcp), bitsPerSecond(plainCT.tcp), bitsPerSecond(j1.tcp), n, bitsPerSecond(jN.tcp), n, bitsPerSecond(floor.tcp), bitsPerSecond(i1.tcp), n, bitsPerSecond(iN.tcp)))},
	}
}
