package nft

import (
	"context"
	"errors"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/ipv6"

	"github.com/loutres/juneau/test/netns"
)

// icmp6Error is a captured ICMPv6 error with its quote.
type icmp6Error struct {
	outer, quote *netns.IPv6
	msg          *netns.ICMP
}

// parseICMP6Error returns the ICMPv6 error in a frame, if it is one.
func parseICMP6Error(f netns.Frame) (*icmp6Error, bool) {
	p, ok := netns.ParseFrame6(f.Data)
	if !ok || p.Next != netns.ProtoICMPv6 {
		return nil, false
	}
	m, err := p.ICMP()
	if err != nil || !m.IsError6() {
		return nil, false
	}
	q, err := m.Quote6()
	if err != nil {
		return nil, false
	}
	return &icmp6Error{outer: p, quote: q, msg: m}, true
}

// checkChecksums fails the test unless the ICMPv6 checksum is valid and, when
// the quote holds the whole datagram, the quoted TCP, UDP or ICMPv6 one.
func (e *icmp6Error) checkChecksums(t *testing.T, what string) {
	t.Helper()
	if ok, checked := e.outer.L4ChecksumOK(); !ok || !checked {
		t.Errorf("%s: bad ICMPv6 checksum", what)
	}
	if ok, checked := e.quote.L4ChecksumOK(); checked && !ok {
		t.Errorf("%s: bad quoted checksum (next header %d)", what, e.quote.Next)
	}
}

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

// TestPathMTUDiscoveryIPv6: a router with a 1280-byte link between node and
// client sends "packet too big" to the ElasticIP; the node rewrites it for
// the Pod (quoted source, checksums), whose kernel lowers its path MTU, and
// a large transfer completes.
func TestPathMTUDiscoveryIPv6(t *testing.T) {
	tp := newTopology(t, topologyOptions{routerMTU: 1280, masquerade: true, ipv6: true})
	tp.sync(t)
	podCap := tp.pod.Capture("eth0")
	const size = 2 << 20
	var ln net.Listener
	tp.client.MustDo(func() (err error) {
		ln, err = net.Listen("tcp6", "[::]:9100")
		return err
	})
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		n, _ := io.Copy(io.Discard, c)
		got <- n
	}()
	tp.pod.MustDo(func() error {
		c, err := net.DialTimeout("tcp6", "["+clientIP6+"]:9100", ioTimeout)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		_, err = c.Write(make([]byte, size))
		return err
	})
	if n := <-got; n != size {
		t.Fatalf("client received %d of %d bytes", n, size)
	}
	if out := tp.pod.MustRun("ip", "-6", "route", "get", clientIP6); !regexp.MustCompile(`mtu 1280\b`).MatchString(out) {
		t.Errorf("Pod did not learn the path MTU: %s", out)
	}
	f, err := podCap.WaitFor(ioTimeout, func(f netns.Frame) bool {
		e, ok := parseICMP6Error(f)
		return ok && e.msg.Type == 2
	})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := parseICMP6Error(f)
	if e.outer.Src != addr(routerIP6) || e.outer.Dst != addr(podIP6) || e.quote.Src != addr(podIP6) || e.quote.Dst != addr(clientIP6) {
		t.Errorf("packet too big at the Pod: %v→%v quoting %v→%v", e.outer.Src, e.outer.Dst, e.quote.Src, e.quote.Dst)
	}
	e.checkChecksums(t, "packet too big")
}

// TestTracerouteIPv6: UDP and ICMPv6 traceroute from the Pod show the node,
// the router and the client; the errors reaching the Pod quote the Pod IP
// and carry valid checksums.
func TestTracerouteIPv6(t *testing.T) {
	tp := newTopology(t, topologyOptions{routerMTU: 1500, ipv6: true})
	tp.sync(t)
	hops := []string{nodeIP6, routerIP6, clientIP6}
	for _, mode := range []struct{ name, flag string }{{"udp", "-U"}, {"icmp", "-I"}} {
		t.Run(mode.name, func(t *testing.T) {
			podCap := tp.pod.Capture("eth0")
			out := tp.pod.MustRun("traceroute", "-6", "-n", mode.flag, "-q", "1", "-w", "2", "-m", "5", clientIP6)
			ls := lines(out)
			if len(ls) != 1+len(hops) {
				t.Fatalf("traceroute %s: want %d hops:\n%s", mode.name, len(hops), out)
			}
			for i, h := range hops {
				if f := strings.Fields(ls[i+1]); len(f) < 2 || f[1] != h {
					t.Errorf("hop %d = %q, want %s", i+1, ls[i+1], h)
				}
			}
			podCap.Stop()
			var fromRouter, fromClient bool
			for _, f := range podCap.Frames() {
				e, ok := parseICMP6Error(f)
				if !ok || f.Outgoing {
					continue
				}
				switch e.outer.Src {
				case addr(routerIP6):
					fromRouter = true
				case addr(clientIP6):
					fromClient = true
				default:
					continue
				}
				if e.quote.Src != addr(podIP6) {
					t.Errorf("error from %v quotes source %v, want the Pod", e.outer.Src, e.quote.Src)
				}
				e.checkChecksums(t, "error from "+e.outer.Src.String())
			}
			if !fromRouter {
				t.Error("no time exceeded from the router reached the Pod")
			}
			if mode.name == "udp" && !fromClient {
				t.Error("no port unreachable from the client reached the Pod")
			}
		})
	}
}

// TestPortUnreachableIPv6: a UDP probe to a closed port of the Pod comes back
// as port unreachable from the ElasticIP quoting the ElasticIP (outbound
// quote rewrite), so the client's socket gets ECONNREFUSED; the quoted UDP
// checksum stays valid.
func TestPortUnreachableIPv6(t *testing.T) {
	tp := newTopology(t, topologyOptions{ipv6: true})
	tp.sync(t)
	cliCap := tp.client.Capture("eth0")
	var conn net.Conn
	tp.client.MustDo(func() (err error) {
		conn, err = net.Dial("udp6", "["+elasticIP6+"]:9999")
		return err
	})
	defer conn.Close()
	if _, err := conn.Write([]byte("anyone there?")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(ioTimeout))
	if _, err := conn.Read(make([]byte, 100)); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("read after probing a closed port: %v, want ECONNREFUSED", err)
	}
	f, err := cliCap.WaitFor(ioTimeout, func(f netns.Frame) bool {
		e, ok := parseICMP6Error(f)
		return ok && !f.Outgoing && e.msg.Type == 1 && e.msg.Code == 4
	})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := parseICMP6Error(f)
	if e.outer.Src != addr(elasticIP6) || e.quote.Dst != addr(elasticIP6) || e.quote.Src != addr(clientIP6) {
		t.Errorf("port unreachable %v→%v quoting %v→%v; want from and quoting the ElasticIP",
			e.outer.Src, e.outer.Dst, e.quote.Src, e.quote.Dst)
	}
	if _, checked := e.quote.L4ChecksumOK(); !checked {
		t.Error("quote too short to verify the UDP checksum")
	}
	e.checkChecksums(t, "port unreachable")
}

// TestForeignQuoteDroppedIPv6: an ICMPv6 error whose quote names another
// address is dropped in both directions; well-formed ones pass with every
// checksum valid, for quoted UDP, TCP, and a quote without a transport
// checksum (cut short), whose change goes into the ICMPv6 checksum.
func TestForeignQuoteDroppedIPv6(t *testing.T) {
	tp := newTopology(t, topologyOptions{ipv6: true})
	tp.sync(t)

	t.Run("inbound", func(t *testing.T) {
		podCap := tp.pod.Capture("eth0")
		foreign := netns.BuildUDP6(addr("2001:db8:51::77"), addr(clientIP6), 40002, 53, []byte("x"))
		valid := netns.BuildUDP6(addr(elasticIP6), addr(clientIP6), 40001, 53, []byte("x"))
		sendICMP6(t, tp.client, elasticIP6, buildICMP6(1, 0, foreign))
		sendICMP6(t, tp.client, elasticIP6, buildICMP6(1, 0, valid))
		e := waitICMP6Error(t, podCap, func(e *icmp6Error) bool { s, _, _ := e.quote.Ports(); return s == 40001 })
		if e.outer.Dst != addr(podIP6) || e.quote.Src != addr(podIP6) {
			t.Errorf("valid error reached the Pod as %v quoting %v; want both the Pod IP", e.outer.Dst, e.quote.Src)
		}
		e.checkChecksums(t, "crafted inbound error")
		for _, f := range podCap.Frames() {
			if e, ok := parseICMP6Error(f); ok {
				if s, _, _ := e.quote.Ports(); s == 40002 {
					t.Errorf("error quoting a foreign address reached the Pod (quote %v→%v)", e.quote.Src, e.quote.Dst)
				}
			}
		}
		assertDropCounter6(t, tp, ChainDNATICMPError, 1)

		tcp := netns.BuildTCP6(addr(elasticIP6), addr(clientIP6), 40005, 443, 1, []byte("data"))
		sendICMP6(t, tp.client, elasticIP6, buildICMP6(1, 0, tcp))
		e = waitICMP6Error(t, podCap, func(e *icmp6Error) bool { s, _, _ := e.quote.Ports(); return s == 40005 })
		if _, checked := e.quote.L4ChecksumOK(); !checked || e.quote.Src != addr(podIP6) {
			t.Errorf("quoted TCP segment from %v, complete=%v", e.quote.Src, checked)
		}
		e.checkChecksums(t, "error quoting TCP")

		// Cut inside the quoted IPv6 header's payload: no transport checksum
		// to fix, the ICMPv6 one takes the change.
		short := netns.BuildUDP6(addr(elasticIP6), addr(clientIP6), 40006, 53, []byte("x"))[:44]
		sendICMP6(t, tp.client, elasticIP6, buildICMP6(3, 0, short))
		e = waitICMP6Error(t, podCap, func(e *icmp6Error) bool { s, _, _ := e.quote.Ports(); return s == 40006 })
		if e.quote.Src != addr(podIP6) {
			t.Errorf("short quote names %v, want the Pod IP", e.quote.Src)
		}
		e.checkChecksums(t, "error with a short quote")
	})
	t.Run("outbound", func(t *testing.T) {
		cliCap := tp.client.Capture("eth0")
		foreign := netns.BuildUDP6(addr(clientIP6), addr("fd00:10:244:1::99"), 53, 40004, []byte("x"))
		valid := netns.BuildUDP6(addr(clientIP6), addr(podIP6), 53, 40003, []byte("x"))
		sendICMP6(t, tp.pod, clientIP6, buildICMP6(1, 4, foreign))
		sendICMP6(t, tp.pod, clientIP6, buildICMP6(1, 4, valid))
		e := waitICMP6Error(t, cliCap, func(e *icmp6Error) bool { _, d, _ := e.quote.Ports(); return d == 40003 })
		if e.outer.Src != addr(elasticIP6) || e.quote.Dst != addr(elasticIP6) {
			t.Errorf("valid error reached the client from %v quoting %v; want both the ElasticIP", e.outer.Src, e.quote.Dst)
		}
		e.checkChecksums(t, "crafted outbound error")
		for _, f := range cliCap.Frames() {
			if e, ok := parseICMP6Error(f); ok {
				if _, d, _ := e.quote.Ports(); d == 40004 {
					t.Errorf("error quoting a foreign address reached the client (quote %v→%v)", e.quote.Src, e.quote.Dst)
				}
			}
		}
		assertDropCounter6(t, tp, ChainSNATICMPError, 1)
	})
}

// TestNeighborDiscoveryNotTranslated: a neighbor solicitation the client
// sends to the ElasticIP itself (a reachability check) is not translated to
// the Pod: it is counted and dropped at the node, while an echo request right
// after it reaches the Pod.
func TestNeighborDiscoveryNotTranslated(t *testing.T) {
	tp := newTopology(t, topologyOptions{ipv6: true})
	tp.sync(t)
	podCap := tp.pod.Capture("eth0")
	ns := []byte{135, 0, 0, 0, 0, 0, 0, 0}
	eip := addr(elasticIP6).As16()
	ns = append(ns, eip[:]...)
	tp.client.MustDo(func() error {
		c, err := net.ListenPacket("ip6:ipv6-icmp", "::")
		if err != nil {
			return err
		}
		defer c.Close()
		pc := ipv6.NewPacketConn(c)
		if err := pc.SetHopLimit(255); err != nil {
			return err
		}
		_, err = pc.WriteTo(ns, nil, &net.IPAddr{IP: net.ParseIP(elasticIP6)})
		return err
	})
	ping(t, tp.client, elasticIP6, 1)
	podCap.Stop()
	for _, f := range podCap.Frames() {
		if p, ok := netns.ParseFrame6(f.Data); ok && p.Next == netns.ProtoICMPv6 && len(p.Payload) > 0 && p.Payload[0] == 135 &&
			!f.Outgoing && p.Src == addr(clientIP6) {
			t.Errorf("the client's neighbor solicitation reached the Pod: %v → %v", p.Src, p.Dst)
		}
	}
	// "dnat" is a keyword to nft: read the counter from the whole table.
	out, _ := tp.node.Output("nft", "list", "table", "ip6", TableName)
	if m := regexp.MustCompile(`icmpv6 type 133-137 counter packets (\d+)`).FindStringSubmatch(out); m == nil || m[1] != "1" {
		t.Errorf("NDP drop counter: want 1 packet:\n%s", out)
	}
}

func waitICMP6Error(t *testing.T, c *netns.Capture, match func(*icmp6Error) bool) *icmp6Error {
	t.Helper()
	f, err := c.WaitFor(ioTimeout, func(f netns.Frame) bool {
		e, ok := parseICMP6Error(f)
		return ok && match(e)
	})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := parseICMP6Error(f)
	return e
}

// buildICMP6 returns an ICMPv6 error message quoting q; the kernel fills in
// the checksum when it is sent from a raw ICMPv6 socket.
func buildICMP6(typ, code uint8, q []byte) []byte {
	return append([]byte{typ, code, 0, 0, 0, 0, 0, 0}, q...)
}

// sendICMP6 sends a raw ICMPv6 message from ns to dst.
func sendICMP6(t *testing.T, ns *netns.NS, dst string, msg []byte) {
	t.Helper()
	ns.MustDo(func() error {
		c, err := net.ListenPacket("ip6:ipv6-icmp", "::")
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.WriteTo(msg, &net.IPAddr{IP: net.ParseIP(dst)})
		return err
	})
}

// assertDropCounter6 checks the drop rule of a chain of the ip6 table counted
// want packets.
func assertDropCounter6(t *testing.T, tp *topology, chain string, want int) {
	t.Helper()
	out := tp.node.MustRun("nft", "list", "chain", "ip6", TableName, chain)
	m := counterRe.FindAllStringSubmatch(out, -1)
	if len(m) == 0 || m[len(m)-1][1] != strconv.Itoa(want) {
		t.Errorf("drop counter of %s: want %d packets:\n%s", chain, want, out)
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
