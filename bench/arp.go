package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/mdlayher/ndp"
	"github.com/vishvananda/netlink"

	"github.com/loutres/juneau/bench/pkt"
	"github.com/loutres/juneau/pkg/node/arp"
	"github.com/loutres/juneau/pkg/node/sysctl"
	"github.com/loutres/juneau/test/netns"
	"github.com/loutres/juneau/test/require"
)

// responderCommand runs juneau's ARP responder alone (inside the node's namespace), as
// the node agent runs it, for row 5.
const responderCommand = "responder"

// responderMain answers ARP on -iface for the first -addresses ElasticIPs of
// benchMappings until SIGTERM.
func responderMain(args []string) int {
	fs := flag.NewFlagSet(responderCommand, flag.ContinueOnError)
	iface := fs.String("iface", extIf, "interface to answer on")
	n := fs.Int("addresses", 1, "number of advertised addresses")
	socketOnly := fs.Bool("socket-only", false, "answer from the raw socket only (the agent's fallback), not from the kernel")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var opts []arp.Option
	if *socketOnly {
		opts = append(opts, arp.WithoutKernelPath())
	}
	r := arp.NewResponder(*iface, opts...)
	r.SetAddresses(advertised(*n))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 20*time.Second, true,
		func(context.Context) (bool, error) { return r.Path() != "", nil }); err != nil {
		fmt.Fprintln(os.Stderr, "the responder did not start:", err)
		return 1
	}
	fmt.Printf("answering for %d addresses on %s from the %s path\n", *n, *iface, r.Path())
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// advertised is the address set of a responder answering for n ElasticIPs: the
// topology's ElasticIP among n-1 that nobody asks for.
func advertised(n int) []netip.Addr {
	m := benchMappings(n)
	out := make([]netip.Addr, len(m))
	for i, x := range m {
		out[i] = x.ElasticIP
	}
	return out
}

// arpTopology is a client and a node on one veth link; the node answers ARP for its own
// address in the kernel and for ElasticIPs with juneau's responder.
type arpTopology struct {
	client, node *netns.NS
	sock         *pkt.Socket // client side: sends requests, receives replies
	// ndp asks by Neighbor Discovery (IPv6 addresses) instead of ARP, from the client's
	// address from; own is the node's address, answered by the kernel (the baseline).
	// Zero: ARP, from clientIP, the kernel answering for nodeIP.
	ndp       bool
	from, own netip.Addr
}

// kernelAddr is the node's own address, which the kernel answers for.
func (tp *arpTopology) kernelAddr() netip.Addr {
	if tp.own.IsValid() {
		return tp.own
	}
	return nodeIP
}

// request is the frame asking for target: an ARP request, or a neighbor solicitation
// to target's solicited-node group.
func (tp *arpTopology) request(target netip.Addr) []byte {
	mac := tp.client.MAC("eth0")
	if !tp.ndp {
		return pkt.ARPRequestFrame(mac, clientIP, target)
	}
	return nsFrame(mac, tp.from, target)
}

// nsFrame is a neighbor solicitation from (mac, from) for target, sent to target's
// solicited-node group as a host resolving target does.
func nsFrame(mac net.HardwareAddr, from, target netip.Addr) []byte {
	group, err := ndp.SolicitedNodeMulticast(target)
	if err != nil {
		panic(err) // the benchmark's own IPv6 addresses
	}
	msg, err := ndp.MarshalMessageChecksum(&ndp.NeighborSolicitation{TargetAddress: target,
		Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: mac}}}, from, group)
	if err != nil {
		panic(err)
	}
	g := group.As16()
	eth := append([]byte{0x33, 0x33, g[12], g[13], g[14], g[15]}, mac...)
	eth = append(eth, 0x86, 0xdd)
	return append(eth, netns.BuildIPv6(from, group, netns.ProtoICMPv6, 255, msg)...)
}

// isReply reports whether frame answers the request for target: an ARP reply from it,
// or a neighbor advertisement of it.
func (tp *arpTopology) isReply(frame []byte, target netip.Addr) bool {
	if !tp.ndp {
		a, ok := netns.ParseARP(frame)
		return ok && a.Op == pkt.ARPReply && a.SenderIP == target
	}
	p, ok := netns.ParseFrame6(frame)
	if !ok || p.Next != netns.ProtoICMPv6 {
		return false
	}
	m, err := ndp.ParseMessage(p.Payload)
	if err != nil {
		return false
	}
	na, ok := m.(*ndp.NeighborAdvertisement)
	return ok && na.TargetAddress == target
}

func newARPTopology(e *env) *arpTopology {
	tp := &arpTopology{client: netns.New(e, "arpcli"), node: netns.New(e, "arpnode")}
	netns.Veth(tp.node, extIf, tp.client, "eth0")
	tp.node.Addr(extIf, nodeIP.String()+"/24")
	tp.client.Addr("eth0", clientIP.String()+"/24")
	tp.node.MustDo(func() error { return sysctl.New().Apply(sysctl.ExternalInterface(extIf)) })
	tp.openProbe(e)
	return tp
}

// openProbe opens the client's packet socket for ARP (or IPv6), stamping arrivals.
func (tp *arpTopology) openProbe(e *env) {
	proto := uint16(pkt.EtherTypeARP)
	if tp.ndp {
		proto = 0x86dd
	}
	tp.client.MustDo(func() (err error) { tp.sock, err = pkt.Open("eth0", proto); return err })
	e.Cleanup(func() { tp.sock.Close() })
	if err := tp.sock.EnableTimestamps(); err != nil {
		e.Fatal(err)
	}
	if err := tp.sock.SetReadTimeout(probeTimeout); err != nil {
		e.Fatal(err)
	}
}

// probeTimeout is how long a probe waits for its reply.
const probeTimeout = 100 * time.Millisecond

// startResponder runs `bench responder` in the node's namespace and waits until it
// answers.
func (tp *arpTopology) startResponder(e *env, n int, path string) *netns.Process {
	self, err := os.Executable()
	if err != nil {
		e.Fatal(err)
	}
	p := tp.node.Start(self, responderCommand, "-iface", extIf, "-addresses", fmt.Sprint(n), fmt.Sprintf("-socket-only=%v", path == arp.PathSocket))
	if err := p.WaitForOutput("from the "+path+" path", 30*time.Second); err != nil {
		e.Fatalf("the responder does not answer from the %s path: %v\n%s", path, err, p.Output())
	}
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 20*time.Second, true,
		func(context.Context) (bool, error) {
			_, ok := tp.probe(elasticIP)
			return ok, nil
		})
	if err != nil {
		e.Fatalf("the responder never answered: %v\n%s", err, p.Output())
	}
	return p
}

// probe asks for target and returns the time from just before the request was sent to
// the kernel's arrival stamp of the reply.
func (tp *arpTopology) probe(target netip.Addr) (time.Duration, bool) {
	frame := tp.request(target)
	buf := make([]byte, 1514)
	sent := time.Now()
	if err := tp.sock.Send(frame); err != nil {
		return 0, false
	}
	for {
		n, at, err := tp.sock.Recv(buf)
		if err != nil {
			return 0, false
		}
		if tp.isReply(buf[:n], target) && !at.IsZero() {
			return at.Sub(sent), true
		}
	}
}

// latencies probes count times, alternating between the responder's addresses (cycling
// through targets) and the kernel's own address, so both see the same conditions.
func (tp *arpTopology) latencies(e *env, targets []netip.Addr, count int) (juneau, kernel []time.Duration, lost int) {
	for i := range count {
		if d, ok := tp.probe(targets[(i*7919)%len(targets)]); ok {
			juneau = append(juneau, d)
		} else {
			lost++
		}
		if d, ok := tp.probe(tp.kernelAddr()); ok {
			kernel = append(kernel, d)
		} else {
			lost++
		}
	}
	if len(juneau) == 0 || len(kernel) == 0 {
		e.Fatalf("no replies: %d from juneau, %d from the kernel", len(juneau), len(kernel))
	}
	return juneau, kernel, lost
}

// flood sends ARP requests for targets as fast as one thread can for d and returns the
// replies per second that came back.
func (tp *arpTopology) flood(e *env, targets []netip.Addr, d time.Duration) (replies, requests float64) {
	mac := tp.client.MAC("eth0")
	frames := make([][]byte, min(len(targets), 4096))
	for i := range frames {
		frames[i] = pkt.ARPRequestFrame(mac, clientIP, targets[(i*7919)%len(targets)])
	}
	var sock *pkt.Socket
	tp.client.MustDo(func() (err error) { sock, err = pkt.Open("eth0", 0); return err })
	defer sock.Close()
	rx := func() uint64 { return tp.client.Link("eth0").Attrs().Statistics.RxPackets }
	before := rx()
	sent, elapsed, err := sock.Blast(func(i int) []byte { return frames[i%len(frames)] }, d, 5_000_000)
	if err != nil {
		e.Fatalf("flood: %v", err)
	}
	last := rx()
	_ = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 2*time.Second, false,
		func(context.Context) (bool, error) {
			now := rx()
			stable := now == last
			last = now
			return stable, nil
		})
	tp.drain()
	return float64(last-before) / elapsed.Seconds(), float64(sent) / elapsed.Seconds()
}

// drain discards replies left on the probe socket after a flood.
func (tp *arpTopology) drain() {
	buf := make([]byte, 1514)
	for {
		if _, _, err := tp.sock.Recv(buf); errors.Is(err, pkt.ErrTimeout) || err != nil {
			return
		}
	}
}

// sweep probes every address of addrs once, in order, and returns the latencies of the
// answered ones and the addresses that got no answer.
func (tp *arpTopology) sweep(addrs []netip.Addr) (lat []time.Duration, lost []netip.Addr) {
	lat = make([]time.Duration, 0, len(addrs))
	for _, a := range addrs {
		if d, ok := tp.probe(a); ok {
			lat = append(lat, d)
		} else {
			lost = append(lost, a)
		}
	}
	return lat, lost
}

// kernelAnswers configures addrs on the node's interface, so that the kernel's own ARP
// answers for them, and returns the function that removes them again.
func (tp *arpTopology) kernelAnswers(e *env, addrs []netip.Addr) (remove func()) {
	link := tp.node.Link(extIf)
	var added []*netlink.Addr
	remove = func() {
		tp.node.MustDo(func() error {
			for _, a := range added {
				if err := netlink.AddrDel(link, a); err != nil {
					return fmt.Errorf("removing %s: %w", a.IPNet, err)
				}
			}
			added = nil
			return nil
		})
	}
	tp.node.MustDo(func() error {
		for _, a := range addrs {
			na := &netlink.Addr{IPNet: netlink.NewIPNet(a.AsSlice())}
			if err := netlink.AddrAdd(link, na); err != nil {
				return fmt.Errorf("adding %s to %s: %w", a, extIf, err)
			}
			added = append(added, na)
		}
		return nil
	})
	e.Cleanup(remove)
	return remove
}

// sweeps is row 5a: every one of the addresses asked for once per round, in rounds that
// alternate between juneau's responder answering for them and the kernel answering for
// the same addresses configured on the node's interface (the responder stopped), so
// that both answer for the same 10,000 addresses under the same conditions.
func (tp *arpTopology) sweeps(e *env, targets []netip.Addr, rounds int) (juneau, kernel []time.Duration, lost []string) {
	for r := range rounds {
		p := tp.startResponder(e, len(targets), arp.PathKernel)
		lat, missed := tp.sweep(targets)
		juneau = append(juneau, lat...)
		for _, a := range missed {
			lost = append(lost, fmt.Sprintf("round %d, juneau: %s", r+1, a))
		}
		if err := p.Signal(syscall.SIGTERM); err != nil {
			e.Fatalf("stopping the responder: %v", err)
		}
		if err := p.Wait(10 * time.Second); err != nil {
			e.Fatalf("the responder did not stop: %v\n%s", err, p.Output())
		}
		remove := tp.kernelAnswers(e, targets)
		lat, missed = tp.sweep(targets)
		kernel = append(kernel, lat...)
		for _, a := range missed {
			lost = append(lost, fmt.Sprintf("round %d, kernel: %s", r+1, a))
		}
		remove()
	}
	return juneau, kernel, lost
}

// arpRun is one responder configuration's figures and the kernel's in the same run.
type arpRun struct {
	juneau, kernel             []time.Duration
	lost                       int
	juneauFlood, kernelFlood   float64
	juneauOffered, kernelOffer float64
}

func (tp *arpTopology) run(e *env, n int, path string, probes int, d time.Duration) arpRun {
	p := tp.startResponder(e, n, path)
	targets := advertised(n)
	var r arpRun
	r.juneau, r.kernel, r.lost = tp.latencies(e, targets, probes)
	if n > 1 && path == arp.PathSocket {
		// An extra, uncounted run of probes while perf records every wakeup and
		// context switch: how long the responder's thread waits between the
		// request waking it and running.
		e.Logf("responder pid %d", p.PID())
		e.perf("arp-sched", []string{"-a", "-e", "sched:sched_wakeup", "-e", "sched:sched_switch"}, func() { tp.latencies(e, targets, probes) })
	}
	r.juneauFlood, r.juneauOffered = tp.flood(e, targets, d)
	r.kernelFlood, r.kernelOffer = tp.flood(e, []netip.Addr{nodeIP}, d)
	if err := p.Signal(syscall.SIGTERM); err == nil {
		_ = p.Wait(10 * time.Second)
	}
	e.Logf("%5d addresses, %s path: juneau p50 %v p99 %v, kernel p50 %v p99 %v, %d lost; flood replies/s juneau %.0f (of %.0f asked), kernel %.0f (of %.0f)",
		n, path, percentile(r.juneau, 50), percentile(r.juneau, 99), percentile(r.kernel, 50), percentile(r.kernel, 99), r.lost,
		r.juneauFlood, r.juneauOffered, r.kernelFlood, r.kernelOffer)
	return r
}

// benchARP (row 5) measures juneau's ARP responder as the node agent runs it (answering
// from its TCX program, the kernel path) with 1 and 10,000 advertised addresses, and its
// raw-socket fallback alone with 10,000, against the kernel answering for its own address
// on the same interface.
func benchARP(_ context.Context, e *env) []Row {
	require.Root(e)
	probes, d := 2000, time.Second
	if e.cfg.quick {
		probes, d = 200, 300*time.Millisecond
	}
	rounds := 3
	if e.cfg.quick {
		rounds = 1
	}
	tp := newARPTopology(e)
	all, allKernel, lost := tp.sweeps(e, advertised(10000), rounds)
	one := tp.run(e, 1, arp.PathKernel, probes, d)
	many := tp.run(e, 10000, arp.PathKernel, probes, d)
	sock := tp.run(e, 10000, arp.PathSocket, probes, d)
	e.plots.cdf("arp-reply", "5. ARP reply latency", dist{"juneau, 10,000 addresses (kernel path)", many.juneau},
		dist{"juneau, 10,000 addresses (raw socket)", sock.juneau}, dist{"kernel, own address", many.kernel})
	e.plots.scale("arp-scale", "5. ARP reply p99 against advertised addresses", "addresses", "p99 (µs)", true, map[string][]point{
		"juneau": {{1, micros(percentile(one.juneau, 99))}, {10000, micros(percentile(many.juneau, 99))}},
		"kernel": {{1, micros(percentile(one.kernel, 99))}, {10000, micros(percentile(many.kernel, 99))}},
	})
	how := fmt.Sprintf("every one of the 10,000 addresses asked for once per round, in %d round(s) alternating juneau's responder (answering from its TCX ingress program) and the kernel answering for the same 10,000 addresses configured on the node's interface; request sent from a packet socket in the client namespace, latency = kernel arrival stamp of the reply − time before sending; p50 juneau %s, kernel %s; %d probes lost",
		rounds, percentile(all, 50).Round(time.Microsecond), percentile(allKernel, 50).Round(time.Microsecond), len(lost))
	row5a := Row{ID: "5a", What: "ARP reply p99, 10,000 addresses, each asked for", Figure: duration(percentile(all, 99)),
		Baseline: duration(percentile(allKernel, 99)), BaselineWhat: "kernel, the same 10,000 addresses", Target: ratioAtMost(3), Note: how}
	if len(lost) > 0 {
		// A lost probe is a failure of the row, not a sample left out.
		row5a.Err = fmt.Sprintf("%d of %d probes got no answer (first: %s)", len(lost), 2*rounds*10000, lost[0])
	}
	return []Row{
		row5a,
		{ID: "5b", What: "ARP reply p99, 1 address", Figure: duration(percentile(one.juneau, 99)),
			Baseline: duration(percentile(one.kernel, 99)), BaselineWhat: "kernel, own address"},
		{ID: "5c", What: "ARP replies/s under a request flood, 10,000 addresses", Figure: rate(many.juneauFlood),
			Baseline: rate(many.kernelFlood), BaselineWhat: "kernel, own address",
			Note: fmt.Sprintf("one sender thread flooding for %s (juneau was asked %s, the kernel %s); replies counted at the client's interface; 1 address: juneau %s",
				d, rate(many.juneauOffered), rate(many.kernelOffer), rate(one.juneauFlood))},
		{ID: "5d", What: "ARP reply p99, 10,000 addresses, raw-socket fallback alone", Figure: duration(percentile(sock.juneau, 99)),
			Baseline: duration(percentile(sock.kernel, 99)), BaselineWhat: "kernel, own address",
			Note: fmt.Sprintf("the responder without its kernel path (where the TCX program cannot be attached): p50 juneau %s, kernel %s; flood replies/s %s (of %s asked), kernel %s",
				percentile(sock.juneau, 50).Round(time.Microsecond), percentile(sock.kernel, 50).Round(time.Microsecond),
				rate(sock.juneauFlood), rate(sock.juneauOffered), rate(sock.kernelFlood))},
	}
}
