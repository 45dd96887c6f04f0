package nft

import (
	"fmt"
	"net"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/loutres/juneau/test/netns"
)

// The direct Pod: its eth0 carries an ElasticIP itself, plumbed the way the
// CNI plugin does it (docs/reference.md#direct-nics).
const (
	directEIP   = "10.225.51.6"
	spoofedIP   = "10.225.51.99" // a second address the Pod adds to itself
	directHost  = "jnab12cd"     // host end of the Pod's veth
	linkLocalGW = "169.254.0.1"
)

// addDirectPod adds to tp a Pod whose eth0 holds directEIP/32 with
// `default via 169.254.0.1 dev eth0 onlink`; the node answers ARP for the
// gateway from the host veth and routes the /32 to it. The node's rp_filter
// is off, so nothing but our rule can drop a spoofed source.
func addDirectPod(t *testing.T, tp *topology) *netns.NS {
	t.Helper()
	pod := netns.New(t, "dpod")
	netns.Veth(tp.node, directHost, pod, "eth0")
	tp.node.Addr(directHost, linkLocalGW+"/32")
	tp.node.Route(directEIP+"/32", "", directHost)
	pod.Addr("eth0", directEIP+"/32")
	pod.Route("default", linkLocalGW, "eth0")
	tp.node.DisableOffload(directHost)
	pod.DisableOffload("eth0")
	tp.node.Sysctl("net/ipv4/conf/all/rp_filter", "0")
	tp.node.Sysctl("net/ipv4/conf/"+directHost+"/rp_filter", "0")
	// The ElasticIP is announced by pkg/node/arp; here the client just knows.
	tp.client.Neigh("eth0", directEIP, tp.node.MAC(extIf))
	tp.state.Direct = []DirectNIC{{HostInterface: directHost, Address: addr(directEIP)}}
	return pod
}

// sendUDPFrom sends one datagram from src (an address of ns) to dst:port.
func sendUDPFrom(t *testing.T, ns *netns.NS, src, dst string, port int, payload string) {
	t.Helper()
	ns.MustDo(func() error {
		c, err := net.ListenPacket(network("udp", src), net.JoinHostPort(src, "0"))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.WriteTo([]byte(payload), &net.UDPAddr{IP: net.ParseIP(dst), Port: port})
		return err
	})
}

// udpFrom matches a captured UDP datagram from src to port.
func udpFrom(src string, port uint16) func(netns.Frame) bool {
	return func(f netns.Frame) bool {
		if p, ok := netns.ParseFrame6(f.Data); ok {
			_, d, ok := p.Ports()
			return ok && p.Src == addr(src) && d == port
		}
		p, ok := netns.ParseFrame(f.Data)
		if !ok || p.Src != addr(src) {
			return false
		}
		_, d, ok := p.Ports()
		return ok && d == port
	}
}

// directDrops reads the packet counter of the anti-spoofing drop rule of
// the ip table.
func directDrops(t *testing.T, ns *netns.NS) uint64 { return directDropsOf(t, ns, fam4) }

// directDropsOf reads the counter of the anti-spoofing drop rule of a
// family's table.
func directDropsOf(t *testing.T, ns *netns.NS, f *family) uint64 {
	t.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(ns.FD()))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := c.GetRules(newTable(f), &nftables.Chain{Name: ChainPrerouting, Table: newTable(f)})
	if err != nil {
		t.Fatalf("list %s: %v", ChainPrerouting, err)
	}
	for _, r := range rules {
		var counter *expr.Counter
		for _, e := range r.Exprs {
			switch e := e.(type) {
			case *expr.Counter:
				counter = e
			case *expr.Verdict:
				if e.Kind == expr.VerdictDrop && counter != nil {
					return counter.Packets
				}
			}
		}
	}
	t.Fatalf("no counted drop rule in %s", ChainPrerouting)
	return 0
}

// TestDirectNICAntiSpoofing: a direct NIC's traffic with its ElasticIP as
// source passes both ways untranslated; a spoofed source is dropped at the
// node and counted; once the NIC is removed from the desired state the same
// spoofed source passes, so the rule is what dropped it. The NAT Pod, whose
// interface is not listed, is unaffected throughout.
func TestDirectNICAntiSpoofing(t *testing.T) {
	tp := newTopology(t, topologyOptions{})
	pod := addDirectPod(t, tp)
	tp.sync(t)

	t.Run("own address passes both ways", func(t *testing.T) {
		ping(t, pod, clientIP, 3)
		ping(t, tp.client, directEIP, 3)
		if saw := tcpExchange(t, tp.client, pod, 9191, clientIP); saw != directEIP {
			t.Errorf("client saw TCP from %s, want %s", saw, directEIP)
		}
		saw, from := udpExchange(t, tp.client, pod, 5391, clientIP)
		if saw != directEIP || from != clientIP {
			t.Errorf("UDP: client saw %s (want %s), Pod got the answer from %s", saw, directEIP, from)
		}
		// Unlisted interface: the NAT Pod still works.
		ping(t, tp.pod, clientIP, 2)
		ping(t, tp.client, elasticIP, 2)
		if n := directDrops(t, tp.node); n != 0 {
			t.Errorf("%d packets dropped, want none", n)
		}
	})

	pod.Addr("eth0", spoofedIP+"/32")
	t.Run("spoofed source dropped", func(t *testing.T) {
		cliCap := tp.client.Capture("eth0")
		sendUDPFrom(t, pod, spoofedIP, clientIP, 5392, "spoofed")
		sendUDPFrom(t, pod, directEIP, clientIP, 5392, "legit") // same path, sent after
		if _, err := cliCap.WaitFor(ioTimeout, udpFrom(directEIP, 5392)); err != nil {
			t.Fatal(err)
		}
		for _, f := range cliCap.Frames() {
			if udpFrom(spoofedIP, 5392)(f) {
				t.Error("datagram with a spoofed source reached the client")
			}
		}
		if n := directDrops(t, tp.node); n != 1 {
			t.Errorf("drop counter = %d, want 1", n)
		}
	})

	t.Run("removed NIC is no longer filtered", func(t *testing.T) {
		tp.state.Direct = nil
		before := generation(t, tp.node)
		tp.sync(t)
		if st := tp.prog.LastSync(); st.Full || st.DirectRemoved != 1 || st.Direct != 0 {
			t.Errorf("stats = %+v, want one direct NIC removed element by element", st)
		}
		if after := generation(t, tp.node); after != before+1 {
			t.Errorf("generation went from %d to %d: not one transaction", before, after)
		}
		for _, set := range []string{SetDirectIfaces, SetDirectAllowed} {
			if e := kernelElements(t, tp.node, set); len(e) != 0 {
				t.Errorf("set %s still holds %d elements", set, len(e))
			}
		}
		cliCap := tp.client.Capture("eth0")
		sendUDPFrom(t, pod, spoofedIP, clientIP, 5393, "spoofed")
		if _, err := cliCap.WaitFor(ioTimeout, udpFrom(spoofedIP, 5393)); err != nil {
			t.Errorf("spoofed source blocked without the rule's elements: %v", err)
		}
		if n := directDrops(t, tp.node); n != 1 {
			t.Errorf("drop counter = %d, want still 1", n)
		}
	})
}

// TestDirectNICsElementLevel: with many direct NICs loaded, moving one NIC to
// another address changes exactly that NIC's pair in the kernel, in one
// transaction, and its traffic follows.
func TestDirectNICsElementLevel(t *testing.T) {
	tp := newTopology(t, topologyOptions{})
	pod := addDirectPod(t, tp)
	tp.state.Direct = append(manyDirect(1000), tp.state.Direct...)
	tp.sync(t)
	if n := len(kernelElements(t, tp.node, SetDirectAllowed)); n != 1001 {
		t.Fatalf("%s holds %d elements, want 1001", SetDirectAllowed, n)
	}
	ping(t, pod, clientIP, 2)

	// The Pod gets a new address; the old one is no longer its own.
	pod.Addr("eth0", spoofedIP+"/32")
	last := len(tp.state.Direct) - 1
	tp.state.Direct[last].Address = addr(spoofedIP)
	before := generation(t, tp.node)
	tp.sync(t)
	if after := generation(t, tp.node); after != before+1 {
		t.Errorf("generation went from %d to %d", before, after)
	}
	if st := tp.prog.LastSync(); st.Full || st.DirectRemoved != 1 || st.DirectAdded != 1 {
		t.Errorf("stats = %+v, want one pair replaced", st)
	}
	pairs := map[string]bool{}
	for _, e := range kernelElements(t, tp.node, SetDirectAllowed) {
		pairs[fmt.Sprintf("%x", e.Key)] = true
	}
	if len(pairs) != 1001 || !pairs[fmt.Sprintf("%x", pairKey(directHost, spoofedIP))] || pairs[fmt.Sprintf("%x", pairKey(directHost, directEIP))] {
		t.Errorf("kernel pairs after the move: %d, new pair present %v, old pair present %v", len(pairs),
			pairs[fmt.Sprintf("%x", pairKey(directHost, spoofedIP))], pairs[fmt.Sprintf("%x", pairKey(directHost, directEIP))])
	}
	for _, nic := range manyDirect(3) { // spot check the untouched ones
		if !pairs[fmt.Sprintf("%x", pairKey(nic.HostInterface, nic.Address.String()))] {
			t.Errorf("pair of %v missing", nic)
		}
	}

	cliCap := tp.client.Capture("eth0")
	sendUDPFrom(t, pod, directEIP, clientIP, 5394, "old")
	sendUDPFrom(t, pod, spoofedIP, clientIP, 5394, "new")
	if _, err := cliCap.WaitFor(ioTimeout, udpFrom(spoofedIP, 5394)); err != nil {
		t.Fatal(err)
	}
	for _, f := range cliCap.Frames() {
		if udpFrom(directEIP, 5394)(f) {
			t.Error("the NIC's former address still passes")
		}
	}
	if n := directDrops(t, tp.node); n != 1 {
		t.Errorf("drop counter = %d, want 1", n)
	}
}

// The direct IPv6 Pod: eth0 carries directEIP6/128 with `default via fe80::1
// dev eth0`, as the CNI plugin plumbs it; the node's end of the veth holds
// fe80::1 and routes the /128 to it.
const (
	directEIP6 = "2001:db8:51::6"
	spoofedIP6 = "2001:db8:51::99"
)

// TestDirectNICAntiSpoofingIPv6: a direct NIC carrying an IPv6 ElasticIP
// reaches the client and is reached from it, resolving its link-local
// gateway through the filtered interface (NDP from fe80:: and :: passes);
// a datagram from another global address is dropped and counted in the ip6
// table; so is IPv4 it sends from an address it picks, in the ip table.
func TestDirectNICAntiSpoofingIPv6(t *testing.T) {
	tp := newTopology(t, topologyOptions{ipv6: true})
	pod := netns.New(t, "dpod6")
	netns.Veth(tp.node, directHost, pod, "eth0")
	tp.node.Addr(directHost, podGW6+"/64")
	tp.node.Route(directEIP6+"/128", "", directHost)
	pod.Addr("eth0", directEIP6+"/128")
	pod.Route("default", podGW6, "eth0")
	tp.client.Neigh("eth0", directEIP6, tp.node.MAC(extIf))
	tp.state.Direct = []DirectNIC{{HostInterface: directHost, Address: addr(directEIP6)}}
	tp.sync(t)

	ping(t, pod, clientIP6, 3)
	ping(t, tp.client, directEIP6, 3)
	// From the Pod's link-local address, as its Neighbor Discovery and router
	// solicitations are: not a listed source, and passes.
	ping(t, pod, podGW6+"%eth0", 2)
	if saw := tcpExchange(t, tp.client, pod, 9192, clientIP6); saw != directEIP6 {
		t.Errorf("client saw TCP from %s, want %s", saw, directEIP6)
	}
	if n := directDropsOf(t, tp.node, fam6); n != 0 {
		t.Errorf("%d packets dropped before any spoofing, want none", n)
	}
	pod.Addr("eth0", spoofedIP6+"/128")
	cliCap := tp.client.Capture("eth0")
	sendUDPFrom(t, pod, spoofedIP6, clientIP6, 5392, "spoofed")
	sendUDPFrom(t, pod, directEIP6, clientIP6, 5392, "legit")
	if _, err := cliCap.WaitFor(ioTimeout, udpFrom(directEIP6, 5392)); err != nil {
		t.Fatal(err)
	}
	for _, f := range cliCap.Frames() {
		if udpFrom(spoofedIP6, 5392)(f) {
			t.Error("datagram with a spoofed IPv6 source reached the client")
		}
	}
	if n := directDropsOf(t, tp.node, fam6); n != 1 {
		t.Errorf("ip6 drop counter = %d, want 1", n)
	}

	// The NIC has no IPv4 address of its own: the ip table filters its interface too,
	// so IPv4 with any source it picks is dropped, without relying on rp_filter.
	if e := kernelElementsOf(t, tp.node, fam4, SetDirectIfaces); len(e) != 1 {
		t.Errorf("the ip table filters %d interfaces, want the NIC's", len(e))
	}
	tp.node.Addr(directHost, linkLocalGW+"/32")
	tp.node.Sysctl("net/ipv4/conf/all/rp_filter", "0")
	tp.node.Sysctl("net/ipv4/conf/"+directHost+"/rp_filter", "0")
	pod.Addr("eth0", spoofedIP+"/32")
	pod.Route("default", linkLocalGW, "eth0")
	cliCap = tp.client.Capture("eth0")
	sendUDPFrom(t, pod, spoofedIP, clientIP, 5395, "spoofed over IPv4")
	sendUDPFrom(t, pod, directEIP6, clientIP6, 5395, "legit")
	if _, err := cliCap.WaitFor(ioTimeout, udpFrom(directEIP6, 5395)); err != nil {
		t.Fatal(err)
	}
	for _, f := range cliCap.Frames() {
		if udpFrom(spoofedIP, 5395)(f) {
			t.Error("an IPv4 datagram from the IPv6-only direct NIC reached the client")
		}
	}
	if n := directDropsOf(t, tp.node, fam4); n != 1 {
		t.Errorf("ip drop counter = %d, want 1", n)
	}
}

// TestIPv4DirectNICSendsNoForeignIPv6: a direct NIC that has only an IPv4 ElasticIP is
// filtered in the ip6 table as well: an IPv6 datagram from a global address it picks is
// dropped at the node and counted, and nothing reaches the client (IPv6 has no
// rp_filter to stop it otherwise); its IPv4 traffic passes.
func TestIPv4DirectNICSendsNoForeignIPv6(t *testing.T) {
	tp := newTopology(t, topologyOptions{ipv6: true})
	pod := addDirectPod(t, tp)
	tp.sync(t)
	if e := kernelElementsOf(t, tp.node, fam6, SetDirectIfaces); len(e) != 1 {
		t.Fatalf("the ip6 table filters %d interfaces, want the IPv4 NIC's", len(e))
	}
	tp.node.Addr(directHost, podGW6+"/64")
	pod.Addr("eth0", spoofedIP6+"/128")
	pod.Route("default", podGW6, "eth0")
	// From the Pod's link-local address, as Neighbor Discovery is: passes.
	ping(t, pod, podGW6+"%eth0", 2)
	cliCap := tp.client.Capture("eth0")
	sendUDPFrom(t, pod, spoofedIP6, clientIP6, 5396, "spoofed over IPv6")
	sendUDPFrom(t, pod, directEIP, clientIP, 5396, "legit")
	if _, err := cliCap.WaitFor(ioTimeout, udpFrom(directEIP, 5396)); err != nil {
		t.Fatal(err)
	}
	for _, f := range cliCap.Frames() {
		if udpFrom(spoofedIP6, 5396)(f) {
			t.Error("an IPv6 datagram from the IPv4-only direct NIC reached the client")
		}
	}
	if n := directDropsOf(t, tp.node, fam6); n != 1 {
		t.Errorf("ip6 drop counter = %d, want 1", n)
	}
	if n := directDropsOf(t, tp.node, fam4); n != 0 {
		t.Errorf("ip drop counter = %d, want 0: its IPv4 traffic is its own", n)
	}
}
