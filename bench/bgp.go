package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/bench/pkt"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/bgprouter"
	"github.com/loutres/juneau/test/e2e/harness"
	"github.com/loutres/juneau/test/netns"
	"github.com/loutres/juneau/test/require"
)

// Row 7's networks: an arp one on the external segment and a bgp one on no segment,
// announced to a BIRD 2 router on the segment.
const (
	bgpBenchPool   = "10.225.53.0/24"
	bgpBenchRange  = "10.225.53.5-10.225.53.99"
	arpBenchRange  = "10.225.51.5-10.225.51.99"
	bgpRouterASN   = 64512
	bgpNodeASN     = 64513
	bgpBenchNS     = "bgp"
	bgpBenchArpNet = "arp-net"
	bgpBenchBGPNet = "bgp-net"
)

// announceTimes records, per ElasticIP address, when its Pod was created and when the
// address was first reachable: its /32 in BIRD's table (bgp) or the first ARP reply
// for it at the external client (arp).
type announceTimes struct {
	mu      sync.Mutex
	created map[netip.Addr]time.Time
	seen    map[netip.Addr]time.Time
}

func (at *announceTimes) pending(addrs []netip.Addr) []netip.Addr {
	at.mu.Lock()
	defer at.mu.Unlock()
	var out []netip.Addr
	for _, a := range addrs {
		if _, created := at.created[a]; created {
			if _, done := at.seen[a]; !done {
				out = append(out, a)
			}
		}
	}
	return out
}

func (at *announceTimes) see(a netip.Addr, when time.Time) {
	at.mu.Lock()
	defer at.mu.Unlock()
	if _, created := at.created[a]; !created {
		return
	}
	if _, ok := at.seen[a]; !ok {
		at.seen[a] = when
	}
}

func (at *announceTimes) latencies(addrs []netip.Addr) []time.Duration {
	at.mu.Lock()
	defer at.mu.Unlock()
	var out []time.Duration
	for _, a := range addrs {
		if s, ok := at.seen[a]; ok {
			out = append(out, s.Sub(at.created[a]))
		}
	}
	return out
}

// benchBGP (row 7): Pods directly using an ElasticIP are created at a steady rate on the
// end-to-end harness, alternately on a bgp and an arp network; for each, the time from
// creation to its /32 in the table of a real BIRD 2 peering with both Nodes, against
// the time to the first ARP request the external client sends for it being answered.
func benchBGP(ctx context.Context, e *env) []Row {
	require.Root(e)
	n, interval := 40, 250*time.Millisecond
	if e.cfg.quick {
		n = 8
	}
	cp := startControlPlane(ctx, e)
	c := harness.New(e, cp, harness.Options{Nodes: attachNodes, Router: true})
	ensureNamespace(e, cp, bgpBenchNS)
	createNetwork(e, cp, bgpBenchArpNet, arpBenchRange)
	createBGPNetwork(e, c)
	bird := bgprouter.StartBIRD(e, c.Router, bgprouter.Config{RouterID: netip.MustParseAddr(harness.RouterIP), AS: bgpRouterASN,
		Neighbors: benchNeighbors(c), Accept: netip.MustParsePrefix(bgpBenchPool)})
	for _, nb := range benchNeighbors(c) {
		bird.WaitEstablished(nb.Name, 2*time.Minute)
	}
	bgpAddrs := createElasticIPs(ctx, e, c, bgpBenchBGPNet, n)
	arpAddrs := createElasticIPs(ctx, e, c, bgpBenchArpNet, n)

	at := &announceTimes{created: map[netip.Addr]time.Time{}, seen: map[netip.Addr]time.Time{}}
	probeCtx, stop := context.WithCancel(ctx)
	var probes sync.WaitGroup
	probes.Go(func() { pollBIRD(probeCtx, bird, at, bgpAddrs) })
	sock := openARPProbe(e, c.Client)
	probes.Go(func() { readARPReplies(probeCtx, sock, at) })
	probes.Go(func() { sendARPRequests(probeCtx, sock, c.Client, at, arpAddrs) })
	defer func() { stop(); probes.Wait() }()

	var wg sync.WaitGroup
	var failures []error
	var mu sync.Mutex
	tick := time.NewTicker(interval)
	for i := range 2 * n {
		<-tick.C
		network, addrs := bgpBenchBGPNet, bgpAddrs
		if i%2 == 1 {
			network, addrs = bgpBenchArpNet, arpAddrs
		}
		addr := addrs[i/2]
		spec := harness.PodSpec{Namespace: bgpBenchNS, Node: attachNodes[(i/2)%2], Name: fmt.Sprintf("%s-%d", network, i/2),
			Annotations: map[string]string{v1alpha1.AnnotationElasticIP: fmt.Sprintf("%s-%d", network, i/2)}}
		wg.Go(func() {
			defer func() {
				if p := recover(); p != nil {
					mu.Lock()
					failures = append(failures, fmt.Errorf("Pod %s: %v", spec.Name, p))
					mu.Unlock()
				}
			}()
			at.mu.Lock()
			at.created[addr] = time.Now()
			at.mu.Unlock()
			if err := c.CreatePod(spec).Start(); err != nil {
				mu.Lock()
				failures = append(failures, fmt.Errorf("Pod %s: %w", spec.Name, err))
				mu.Unlock()
			}
		})
	}
	tick.Stop()
	wg.Wait()
	if len(failures) > 0 {
		e.Fatalf("%d Pods failed to start, first: %v", len(failures), failures[0])
	}
	all := append(append([]netip.Addr(nil), bgpAddrs...), arpAddrs...)
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		return len(at.pending(all)) == 0, nil
	}); err != nil {
		e.Fatalf("not every ElasticIP was announced or answered: %v (still waiting for %v)", err, at.pending(all))
	}
	bgpTimes, arpTimes := at.latencies(bgpAddrs), at.latencies(arpAddrs)
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	how := fmt.Sprintf("%d Pods directly using an ElasticIP of a bgp network and %d of an arp network, interleaved, one every %s over 2 Nodes (CNI ADD included); "+
		"bgp: `birdc show route` polled back to back in the router, which peers with both Nodes; arp: an ARP request every 5 ms from the external client per waiting address",
		n, n, interval)
	return []Row{
		{ID: "7a", What: "Pod created → its /32 in BIRD's table, p50", Figure: duration(percentile(bgpTimes, 50)),
			Baseline: duration(percentile(arpTimes, 50)), BaselineWhat: "arp network: → first ARP reply", Note: how},
		{ID: "7b", What: "Pod created → its /32 in BIRD's table, p99", Figure: duration(percentile(bgpTimes, 99)),
			Baseline: duration(percentile(arpTimes, 99)), BaselineWhat: "arp network: → first ARP reply",
			Note: fmt.Sprintf("max bgp %s, arp %s", ms(percentile(bgpTimes, 100)), ms(percentile(arpTimes, 100)))},
	}
}

// createBGPNetwork makes bgp-net and the BGPPeer of the router, selecting every Node.
func createBGPNetwork(e *env, c *harness.Cluster) {
	ctx := context.Background()
	j := c.CP.Juneau.JuneauV1alpha1()
	if _, err := j.AddressPools().Create(ctx, &v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: bgpBenchBGPNet},
		Spec: v1alpha1.AddressPoolSpec{AdvertiseMode: v1alpha1.AdvertiseBGP, Addresses: []string{bgpBenchRange}}}, metav1.CreateOptions{}); err != nil {
		e.Fatal(err)
	}
	if _, err := j.ExternalNetworks().Create(ctx, &v1alpha1.ExternalNetwork{ObjectMeta: metav1.ObjectMeta{Name: bgpBenchBGPNet},
		Spec: v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseBGP, AddressPools: []string{bgpBenchBGPNet}}}, metav1.CreateOptions{}); err != nil {
		e.Fatal(err)
	}
	if _, err := j.BGPPeers().Create(ctx, &v1alpha1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor"},
		Spec: v1alpha1.BGPPeerSpec{PeerAddress: harness.RouterIP, PeerASN: bgpRouterASN, MyASN: bgpNodeASN}}, metav1.CreateOptions{}); err != nil {
		e.Fatal(err)
	}
}

func benchNeighbors(c *harness.Cluster) []bgprouter.Neighbor {
	var out []bgprouter.Neighbor
	for _, name := range attachNodes {
		out = append(out, bgprouter.Neighbor{Name: strings.ReplaceAll(name, "-", "_"), Local: netip.MustParseAddr(harness.RouterIP),
			Address: netip.MustParseAddr(c.Nodes[name].IP), AS: bgpNodeASN})
	}
	return out
}

// createElasticIPs creates <network>-0 … <network>-(n-1) and returns their addresses.
func createElasticIPs(ctx context.Context, e *env, c *harness.Cluster, network string, n int) []netip.Addr {
	eips := c.CP.Juneau.JuneauV1alpha1().ElasticIPs(bgpBenchNS)
	for i := range n {
		if _, err := eips.Create(ctx, &v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", network, i)},
			Spec: v1alpha1.ElasticIPSpec{ExternalNetwork: network}}, metav1.CreateOptions{}); err != nil {
			e.Fatal(err)
		}
	}
	addrs := make([]netip.Addr, n)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for i := range n {
			eip, err := eips.Get(ctx, fmt.Sprintf("%s-%d", network, i), metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			if addrs[i], err = netip.ParseAddr(eip.Status.Address); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		e.Fatalf("ElasticIPs of %s without an address: %v", network, err)
	}
	return addrs
}

// pollBIRD reads BIRD's table back to back and records when each address's /32 appears.
func pollBIRD(ctx context.Context, bird *bgprouter.BIRD, at *announceTimes, addrs []netip.Addr) {
	idle := time.NewTicker(5 * time.Millisecond)
	defer idle.Stop()
	for ctx.Err() == nil {
		if len(at.pending(addrs)) == 0 {
			// Nothing to look for yet: the Pods come at intervals.
			select {
			case <-ctx.Done():
			case <-idle.C:
			}
			continue
		}
		routes, err := bird.Routes()
		now := time.Now()
		if err != nil {
			continue
		}
		for prefix := range routes {
			if p, err := netip.ParsePrefix(prefix); err == nil && p.Bits() == 32 {
				at.see(p.Addr(), now)
			}
		}
	}
}

func openARPProbe(e *env, client *netns.NS) *pkt.Socket {
	var sock *pkt.Socket
	client.MustDo(func() (err error) { sock, err = pkt.Open("eth0", pkt.EtherTypeARP); return err })
	e.Cleanup(func() { sock.Close() })
	if err := sock.EnableTimestamps(); err != nil {
		e.Fatal(err)
	}
	if err := sock.SetReadTimeout(50 * time.Millisecond); err != nil {
		e.Fatal(err)
	}
	return sock
}

// sendARPRequests asks, every 5 ms, for each address whose Pod exists and that has not
// been answered yet, as a router resolving the ElasticIP would.
func sendARPRequests(ctx context.Context, sock *pkt.Socket, client *netns.NS, at *announceTimes, addrs []netip.Addr) {
	mac := client.MAC("eth0")
	src := netip.MustParseAddr(harness.ClientIP)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, a := range at.pending(addrs) {
			_ = sock.Send(pkt.ARPRequestFrame(mac, src, a))
		}
	}
}

// readARPReplies records the kernel arrival time of the first reply for each address.
func readARPReplies(ctx context.Context, sock *pkt.Socket, at *announceTimes) {
	buf := make([]byte, 1514)
	for ctx.Err() == nil {
		n, when, err := sock.Recv(buf)
		if errors.Is(err, pkt.ErrTimeout) || err != nil {
			continue
		}
		if a, ok := netns.ParseARP(buf[:n]); ok && a.Op == pkt.ARPReply {
			if when.IsZero() {
				when = time.Now()
			}
			at.see(a.SenderIP, when)
		}
	}
}
