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
	"github.com/loutres/juneau/pkg/node/sysctl"
	"github.com/loutres/juneau/test/netns"
	"github.com/loutres/juneau/test/require"
)

// dpTopology is an external client, a node that forwards, and a Pod behind the node,
// each in a namespace of its own; for in-cluster configurations a second Pod on the node
// is the client:
//
//	client (eth0 10.225.51.100) ── (ext0 10.225.51.2) node (vpod) ── (eth0 10.244.1.5) pod
//	                                                   node (vcpod) ── (eth0 10.244.1.6) client Pod
type dpTopology struct {
	client, node, pod *netns.NS
	clientPod         *netns.NS // nil unless addClientPod
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
	plugPod(tp.node, "vpod", tp.pod, podIP)
	tp.node.Sysctl("net/ipv4/ip_forward", "1")
	tp.node.MustDo(func() error { return sysctl.New().Apply(sysctl.ExternalInterface(extIf)) })
	// Static neighbours: the benchmark measures forwarding, not address resolution (row 5
	// measures ARP). Plain routing reaches the Pod network through the node; NAT reaches
	// the ElasticIP at the node's MAC, as the node's ARP replies would tell it.
	tp.client.Route("10.244.0.0/16", nodeIP.String(), "")
	tp.client.Neigh("eth0", elasticIP.String(), tp.node.MAC(extIf))
	tp.client.Neigh("eth0", nodeIP.String(), tp.node.MAC(extIf))
	tp.node.Neigh(extIf, clientIP.String(), tp.client.MAC("eth0"))
	// IPv6 the same way (rows 3n, 3o).
	tp.node.Addr(extIf, nodeIP6.String()+"/64")
	tp.client.Addr("eth0", clientIP6.String()+"/64")
	tp.client.Route("fd00:10:244::/48", nodeIP6.String(), "")
	tp.client.Neigh("eth0", elasticIP6.String(), tp.node.MAC(extIf))
	tp.client.Neigh("eth0", nodeIP6.String(), tp.node.MAC(extIf))
	tp.node.Neigh(extIf, clientIP6.String(), tp.client.MAC("eth0"))
	tp.node.Addr("vpod", podGW6.String()+"/64")
	tp.node.Route(podIP6.String()+"/128", "", "vpod")
	tp.pod.Addr("eth0", podIP6.String()+"/128")
	tp.pod.Route("default", podGW6.String(), "eth0")
	tp.node.Neigh("vpod", podIP6.String(), tp.pod.MAC("eth0"))
	tp.pod.Neigh("eth0", podGW6.String(), tp.node.MAC("vpod"))
	tp.pod.MustDo(func() error {
		var err error
		// Both families: the socket is dual-stack.
		tp.sink, err = net.ListenUDP("udp", &net.UDPAddr{Port: sinkPort})
		if err == nil {
			err = tp.sink.SetReadBuffer(4096)
		}
		return err
	})
	e.Cleanup(func() { tp.sink.Close() })
	return tp
}

// plugPod connects pod to node through a veth whose node end, hostDev, holds the Pod
// gateway: the Pod holds ip/32 and routes everything through the gateway; both sides
// know each other's MAC (static neighbours, like the rest).
func plugPod(node *netns.NS, hostDev string, pod *netns.NS, ip netip.Addr) {
	netns.Veth(node, hostDev, pod, "eth0")
	node.Addr(hostDev, podGW.String()+"/32")
	node.Route(ip.String()+"/32", "", hostDev)
	pod.Addr("eth0", ip.String()+"/32")
	pod.Route(podGW.String()+"/32", "", "eth0")
	pod.Route("default", podGW.String(), "eth0")
	node.Neigh(hostDev, ip.String(), pod.MAC("eth0"))
	pod.Neigh("eth0", podGW.String(), node.MAC(hostDev))
}

// addClientPod adds the in-cluster client: a Pod on the node beside the target.
func (tp *dpTopology) addClientPod(e *env) {
	tp.clientPod = netns.New(e, "dpcpod")
	plugPod(tp.node, "vcpod", tp.clientPod, clientPodIP)
}

// sender is where blasted frames come from and where they are counted: the external
// client or the client Pod (in-cluster configurations) sending to the Pod, or the Pod
// sending out to the client (outbound configurations). newFlow gives the i-th frame's
// source address and port when every frame is a new flow; maxNewFlows bounds the frames
// of such a run where newFlow repeats after that many.
type sender struct {
	ns          *netns.NS
	src         netip.Addr
	toMAC       net.HardwareAddr // the node's end of the link
	newFlow     func(i int) (netip.Addr, uint16)
	maxNewFlows int
	// rx and rxDev: the interface whose received frames are counted.
	rx    *netns.NS
	rxDev string
}

// manySources makes frame i come from one of 100 addresses and a port, so that no two
// of the first 6,451,200 frames share a source.
func manySources(addr func(i int) netip.Addr) func(i int) (netip.Addr, uint16) {
	return func(i int) (netip.Addr, uint16) { return addr(i), uint16(1024 + (i/100)%64512) }
}

func (tp *dpTopology) sender(inCluster, outbound, v6 bool) sender {
	if outbound {
		// The Pod's own address, as its SNAT needs, with a new port per frame.
		return sender{ns: tp.pod, src: podIP, toMAC: tp.node.MAC("vpod"), rx: tp.client, rxDev: "eth0",
			newFlow: func(i int) (netip.Addr, uint16) { return podIP, uint16(1024 + i%64512) }, maxNewFlows: 64512}
	}
	s := tp.senderIn(inCluster, v6)
	s.rx, s.rxDev = tp.pod, "eth0"
	return s
}

func (tp *dpTopology) senderIn(inCluster, v6 bool) sender {
	if v6 {
		return sender{ns: tp.client, src: clientIP6, toMAC: tp.node.MAC(extIf),
			newFlow: manySources(func(i int) netip.Addr {
				a := clientIP6.As16()
				a[15] = byte(100 + i%100)
				return netip.AddrFrom16(a)
			})}
	}
	if inCluster {
		// Sources in the node's Pod range, which the cluster ranges cover: in-cluster
		// clients.
		return sender{ns: tp.clientPod, src: clientPodIP, toMAC: tp.node.MAC("vcpod"),
			newFlow: manySources(func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 244, 1, byte(100 + i%100)}) })}
	}
	return sender{ns: tp.client, src: clientIP, toMAC: tp.node.MAC(extIf),
		newFlow: manySources(func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 225, 51, byte(100 + i%100)}) })}
}

// received is the number of frames the sender's receiving interface got so far.
func (s sender) received(e *env) uint64 {
	l := s.rx.Link(s.rxDev)
	if l.Attrs().Statistics == nil {
		e.Fatalf("no statistics for %s in %s", s.rxDev, s.rx.Name)
	}
	return l.Attrs().Statistics.RxPackets
}

// blast sends 60-byte UDP frames from s towards dst for d (at most limit frames) from
// one thread, and returns the rate at which they reached the receiver, per second of the
// sending thread's CPU time. With newFlows every frame has a source address and port no
// earlier frame had (s.newFlow), so every packet is a new flow for connection tracking.
func (tp *dpTopology) blast(e *env, s sender, dst netip.Addr, newFlows bool, d time.Duration, limit int) float64 {
	var sock *pkt.Socket
	s.ns.MustDo(func() (err error) { sock, err = pkt.Open("eth0", 0); return err })
	defer sock.Close()
	src := pkt.Endpoint{MAC: s.ns.MAC("eth0"), IP: s.src, Port: 40000}
	to := pkt.Endpoint{MAC: s.toMAC, IP: dst, Port: sinkPort}
	bufs := make([][]byte, 64*2)
	for i := range bufs {
		bufs[i] = pkt.UDP(src, to, pkt.MinFrameLen)
	}
	next := func(i int) []byte { return bufs[0] }
	if newFlows {
		next = func(i int) []byte {
			f := bufs[i%len(bufs)]
			addr, port := s.newFlow(i)
			pkt.SetUDPSource(f, addr, port)
			return f
		}
		if s.maxNewFlows > 0 {
			limit = min(limit, s.maxNewFlows)
		}
	}
	before := s.received(e)
	sent, elapsed, err := sock.Blast(next, d, limit)
	if err != nil {
		e.Fatalf("sending: %v", err)
	}
	received := settledReceived(e, s)
	if sent == 0 || received < before {
		e.Fatalf("sent %d frames, the receiver's counter went from %d to %d", sent, before, received)
	}
	// Per second of the sending thread's CPU time, which includes the forwarding (done
	// in its softirq) but not the time it waited for a CPU that other work on the
	// machine held: on a shared machine that wait is most of the noise.
	if sock.BlastCPU > 0 {
		return float64(received-before) / sock.BlastCPU.Seconds()
	}
	return float64(received-before) / elapsed.Seconds()
}

// settledReceived waits until the receiver's counter stops moving (frames still queued
// in the node are counted) and returns it.
func settledReceived(e *env, s sender) uint64 {
	last := s.received(e)
	_ = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 2*time.Second, false,
		func(context.Context) (bool, error) {
			now := s.received(e)
			stable := now == last
			last = now
			return stable, nil
		})
	return last
}

// tcpThroughput runs one iperf3 flow from s to dst:5201, served in the Pod, and returns
// the bits per second the receiver counted.
func (tp *dpTopology) tcpThroughput(e *env, s sender, dst netip.Addr, d time.Duration) float64 {
	if dst.Is6() || s.rx != tp.pod {
		return 0 // the IPv6 and outbound rows compare packet rates only
	}
	server := tp.pod.Start("iperf3", "-s", "-1", "-p", "5201", "--forceflush")
	if err := server.WaitForOutput("Server listening", 10*time.Second); err != nil {
		e.Fatalf("iperf3 server: %v", err)
	}
	out, err := s.ns.Output("iperf3", "-c", dst.String(), "-p", "5201", "-J", "-t", fmt.Sprint(max(1, int(d.Seconds()))))
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
		v := c.tp.blast(e, c.cfg.sender(c.tp), c.cfg.dst, newFlows, d, limit)
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
		from := c.cfg.sender(c.tp)
		e.perfRecord("datapath-"+c.cfg.profile, func() { c.tp.blast(e, from, c.cfg.dst, true, 4*d, perfLimit); after(c) })
		c.tcp = c.tp.tcpThroughput(e, from, c.cfg.dst, 2*time.Second)
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
		juneauConfig(ctx, 1), juneauConfig(ctx, n), floorConfig(n), floorNoNATHooksConfig(n), plainConntrackConfig(), iptablesConfig(1), iptablesConfig(n),
		inClusterConfig(ctx, n, elasticIP, "eip"), inClusterConfig(ctx, n, podIP, "podip"),
		plain6Config(), juneau6Config(ctx, n),
		outboundConfig(plainConntrackConfig()), outboundConfig(juneauConfig(ctx, n)), outboundConfig(floorConfig(n)),
	}, reps, d, limit)
	plain, j1, jN, floor, floorBare, plainCT, i1, iN := res[0], res[1], res[2], res[3], res[4], res[5], res[6], res[7]
	inEIP, inPod := res[8], res[9]
	plain6, j6 := res[10], res[11]
	outPlain, outJ, outFloor := res[12], res[13], res[14]

	how := fmt.Sprintf("60-byte UDP frames sent by one thread (sendmmsg on a packet socket) for %s (≤ %d frames), counted at the Pod's interface, per second of the sending thread's CPU time (it also forwards them, in its softirq; time waiting for a CPU held by other work is left out); median of %d runs, configurations taken in turn; namespaces of their own per configuration; conntrack loaded in the node (a `ct state` rule in the output hook registers its hooks, as kube-proxy's rules do on every node) for every configuration but the informative plain routing without it",
		d, limit, reps)
	floorHow := fmt.Sprintf("floor: table of its own with the maps eip2vpc and vpc2eip (%d elements each) and two rules, `ip daddr set ip daddr map @eip2vpc notrack` at raw prerouting and `ip saddr set ip saddr map @vpc2eip` at srcnat+10 postrouting, conntrack loaded, the kernel's NAT hooks registered (3m); floor / plain routing with conntrack loaded: new flows %.2f, one flow %.2f",
		n, floor.newFlows/plainCT.newFlows, floor.longFlow/plainCT.longFlow)
	all := fmt.Sprintf("all figures, long flow / new flows: plain (conntrack loaded) %s / %s; plain without conntrack %s / %s; juneau 1 %s / %s; juneau %d %s / %s; floor %d %s / %s; iptables 1 %s / %s; iptables %d %s / %s",
		pps(plainCT.longFlow), pps(plainCT.newFlows), pps(plain.longFlow), pps(plain.newFlows), pps(j1.longFlow), pps(j1.newFlows), n, pps(jN.longFlow), pps(jN.newFlows),
		n, pps(floor.longFlow), pps(floor.newFlows), pps(i1.longFlow), pps(i1.newFlows), n, pps(iN.longFlow), pps(iN.newFlows))
	return []Row{
		{ID: "3a", What: "pps, new flow per packet: juneau 10k / plain", Figure: pps(jN.newFlows), Baseline: pps(plainCT.newFlows),
			BaselineWhat: "plain routing, conntrack loaded", Target: ratioAtLeast(0.85), Note: how},
		{ID: "3b", What: "pps, new flow per packet: juneau 10k / bare map NAT 10k", Figure: pps(jN.newFlows), Baseline: pps(floor.newFlows),
			BaselineWhat: "bare stateless nftables map NAT, NAT hooks", Target: ratioAtLeast(0.97), Note: floorHow,
			PairedRatio: pairedRatio(jN.newRuns, floor.newRuns)},
		{ID: "3c", What: "pps, one long flow: juneau 10k / plain", Figure: pps(jN.longFlow), Baseline: pps(plainCT.longFlow),
			BaselineWhat: "plain routing, conntrack loaded", Target: ratioAtLeast(0.85)},
		{ID: "3d", What: "pps, one long flow: juneau 10k / bare map NAT 10k", Figure: pps(jN.longFlow), Baseline: pps(floor.longFlow),
			BaselineWhat: "bare stateless nftables map NAT, NAT hooks", Target: ratioAtLeast(0.97),
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
		{ID: "3k", What: "pps, in-cluster Pod, one long flow: to an ElasticIP / to its Pod IP", Figure: pps(inEIP.longFlow), Baseline: pps(inPod.longFlow),
			BaselineWhat: "the same Pod IP directly", PairedRatio: pairedRatio(inEIP.longRuns, inPod.longRuns),
			Note: fmt.Sprintf("a Pod on the node sends to a Pod beside it, through its ElasticIP (DNAT by conntrack at the sender's node, juneau's in-cluster path) or by Pod IP (tracked, not translated), juneau's table holding %d mappings and as many in-cluster ones, conntrack loaded and flushed between runs; same method as 3a; ratio = median over the %d rounds of the paired rates (to the Pod IP measured just after); ratio of the medians %.2f; TCP (iperf3, 2 s): to the ElasticIP %s, to the Pod IP %s",
				n, reps, inEIP.longFlow/inPod.longFlow, bitsPerSecond(inEIP.tcp), bitsPerSecond(inPod.tcp))},
		{ID: "3l", What: "pps, in-cluster Pod, new flow per packet: to an ElasticIP / to its Pod IP", Figure: pps(inEIP.newFlows), Baseline: pps(inPod.newFlows),
			BaselineWhat: "the same Pod IP directly", PairedRatio: pairedRatio(inEIP.newRuns, inPod.newRuns),
			Note: fmt.Sprintf("every packet a new connection (sources 10.244.1.100-199 × ports): each costs a conntrack entry either way, plus the NAT binding through the ElasticIP; ratio of the medians %.2f", inEIP.newFlows/inPod.newFlows)},
		{ID: "3m", What: "pps, one long flow: juneau 10k / bare map NAT 10k without NAT hooks", Figure: pps(jN.longFlow), Baseline: pps(floorBare.longFlow),
			BaselineWhat: "the floor without the kernel's NAT hooks", PairedRatio: pairedRatio(jN.longRuns, floorBare.longRuns),
			Note: fmt.Sprintf("the floor of 3b and 3d has the kernel's NAT hooks registered (an empty NAT chain in the output hook), which juneau's NAT chains for in-cluster clients register, and every packet then passes (an untracked one returns at once); kube-proxy and masquerading CNIs register them on every node anyway. Without them (the floor before in-cluster clients): new flows %s, one flow %s; juneau 10k / it, new flows (paired): %.2f; the floor with / without them: new flows %.2f, one flow %.2f",
				pps(floorBare.newFlows), pps(floorBare.longFlow), pairedRatio(jN.newRuns, floorBare.newRuns), floor.newFlows/floorBare.newFlows, floor.longFlow/floorBare.longFlow)},
		{ID: "3n", What: "pps, IPv6, new flow per packet: juneau 10k / plain IPv6", Figure: pps(j6.newFlows), Baseline: pps(plain6.newFlows),
			BaselineWhat: "plain IPv6 routing, conntrack loaded", Target: ratioAtLeast(0.85), PairedRatio: pairedRatio(j6.newRuns, plain6.newRuns),
			Note: fmt.Sprintf("80-byte frames (the 60-byte IPv4 frame's datagram behind a 40-byte IPv6 header), otherwise as 3a: from the external client to %d IPv6 mappings (the ip6 table), against plain IPv6 routing to the Pod IP in the same run; ratio = median over the %d rounds of the paired rates (plain IPv6 measured just before); ratio of the medians %.2f; IPv4 in the same run (3a): %.2f",
				n, reps, j6.newFlows/plain6.newFlows, jN.newFlows/plainCT.newFlows)},
		{ID: "3o", What: "pps, IPv6, one long flow: juneau 10k / plain IPv6", Figure: pps(j6.longFlow), Baseline: pps(plain6.longFlow),
			BaselineWhat: "plain IPv6 routing, conntrack loaded", Target: ratioAtLeast(0.85), PairedRatio: pairedRatio(j6.longRuns, plain6.longRuns),
			Note: fmt.Sprintf("ratio of the medians %.2f; IPv4 in the same run (3c): %.2f", j6.longFlow/plain6.longFlow, jN.longFlow/plainCT.longFlow)},
		{ID: "3p", What: "pps, outbound, new flow per packet: juneau 10k / plain", Figure: pps(outJ.newFlows), Baseline: pps(outPlain.newFlows),
			BaselineWhat: "plain routing, conntrack loaded", Target: ratioAtLeast(0.85), PairedRatio: pairedRatio(outJ.newRuns, outPlain.newRuns),
			Note: fmt.Sprintf("the Pod sends out to the external client (juneau: SNAT of the Pod IP to its ElasticIP by the vpc2eip map, past the anti-spoofing checks; the floor: its postrouting map rule), counted at the client's interface; every frame a new source port (at most 64,512 frames a run, so no flow repeats); otherwise as 3a; ratio = median over the %d rounds of the paired rates (plain measured just before); ratio of the medians %.2f",
				reps, outJ.newFlows/outPlain.newFlows)},
		{ID: "3q", What: "pps, outbound, new flow per packet: juneau 10k / bare map NAT 10k", Figure: pps(outJ.newFlows), Baseline: pps(outFloor.newFlows),
			BaselineWhat: "bare stateless nftables map NAT, NAT hooks", Target: ratioAtLeast(0.97), PairedRatio: pairedRatio(outJ.newRuns, outFloor.newRuns),
			Note: fmt.Sprintf("ratio = median over the %d rounds of the paired rates (the floor measured just after); ratio of the medians %.2f", reps, outJ.newFlows/outFloor.newFlows)},
		{ID: "3r", What: "pps, outbound, one long flow: juneau 10k / plain", Figure: pps(outJ.longFlow), Baseline: pps(outPlain.longFlow),
			BaselineWhat: "plain routing, conntrack loaded", Target: ratioAtLeast(0.85), PairedRatio: pairedRatio(outJ.longRuns, outPlain.longRuns),
			Note: fmt.Sprintf("ratio of the medians %.2f", outJ.longFlow/outPlain.longFlow)},
		{ID: "3s", What: "pps, outbound, one long flow: juneau 10k / bare map NAT 10k", Figure: pps(outJ.longFlow), Baseline: pps(outFloor.longFlow),
			BaselineWhat: "bare stateless nftables map NAT, NAT hooks", Target: ratioAtLeast(0.97), PairedRatio: pairedRatio(outJ.longRuns, outFloor.longRuns),
			Note: fmt.Sprintf("ratio of the medians %.2f", outJ.longFlow/outFloor.longFlow)},
	}
}
