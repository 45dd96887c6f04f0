package nft

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loutres/juneau/test/netns"
)

// icmpError is a captured ICMP error with its quote.
type icmpError struct {
	outer, quote *netns.IPv4
	msg          *netns.ICMP
}

// parseICMPError returns the ICMP error in a frame, if it is one.
func parseICMPError(f netns.Frame) (*icmpError, bool) {
	p, ok := netns.ParseFrame(f.Data)
	if !ok || p.Proto != netns.ProtoICMP {
		return nil, false
	}
	m, err := p.ICMP()
	if err != nil || !m.IsError() {
		return nil, false
	}
	q, err := m.Quote()
	if err != nil {
		return nil, false
	}
	return &icmpError{outer: p, quote: q, msg: m}, true
}

// checkChecksums fails the test unless every checksum of the error is valid:
// outer IP header, ICMP, quoted IP header, and the quoted TCP/UDP checksum
// when the quote holds the whole datagram.
func (e *icmpError) checkChecksums(t *testing.T, what string) {
	t.Helper()
	if !e.outer.HeaderChecksumOK {
		t.Errorf("%s: bad outer IP header checksum", what)
	}
	if ok, checked := e.outer.L4ChecksumOK(); !ok || !checked {
		t.Errorf("%s: bad ICMP checksum", what)
	}
	if !e.quote.HeaderChecksumOK {
		t.Errorf("%s: bad quoted IP header checksum", what)
	}
	if ok, checked := e.quote.L4ChecksumOK(); checked && !ok {
		t.Errorf("%s: bad quoted transport checksum (proto %d)", what, e.quote.Proto)
	}
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

// TestPathMTUDiscovery: a router with a small MTU between node and client
// sends "fragmentation needed" to the ElasticIP; the node rewrites it for the
// Pod, whose kernel learns the path MTU, and a large transfer completes.
func TestPathMTUDiscovery(t *testing.T) {
	const mtu = 1280
	tp := newTopology(t, topologyOptions{routerMTU: mtu, masquerade: true})
	tp.sync(t)
	podCap := tp.pod.Capture("eth0")

	if out := tp.pod.MustRun("ip", "route", "get", clientIP); strings.Contains(out, "mtu") {
		t.Fatalf("path MTU known before any traffic: %s", out)
	}
	const size = 2 << 20
	var ln net.Listener
	tp.client.MustDo(func() (err error) {
		ln, err = net.Listen("tcp4", "0.0.0.0:9100")
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
		c, err := net.DialTimeout("tcp4", clientIP+":9100", ioTimeout)
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
	if out := tp.pod.MustRun("ip", "route", "get", clientIP); !regexp.MustCompile(`mtu 1280\b`).MatchString(out) {
		t.Errorf("Pod did not learn the path MTU: %s", out)
	}
	f, err := podCap.WaitFor(ioTimeout, func(f netns.Frame) bool {
		e, ok := parseICMPError(f)
		return ok && e.msg.Type == 3 && e.msg.Code == 4
	})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := parseICMPError(f)
	if e.outer.Src != addr(routerIP) || e.outer.Dst != addr(podIP) || e.quote.Src != addr(podIP) || e.quote.Dst != addr(clientIP) {
		t.Errorf("frag-needed at the Pod: %v→%v quoting %v→%v", e.outer.Src, e.outer.Dst, e.quote.Src, e.quote.Dst)
	}
	e.checkChecksums(t, "frag-needed")
}

// TestTraceroute: UDP and ICMP traceroute from the Pod show the node, the
// router and the client; the errors reaching the Pod carry valid checksums.
func TestTraceroute(t *testing.T) {
	tp := newTopology(t, topologyOptions{routerMTU: 1500})
	tp.sync(t)
	hops := []string{podGW, routerIP, clientIP}
	for _, mode := range []struct{ name, flag string }{{"udp", "-U"}, {"icmp", "-I"}} {
		t.Run(mode.name, func(t *testing.T) {
			podCap := tp.pod.Capture("eth0")
			out := tp.pod.MustRun("traceroute", "-n", mode.flag, "-q", "1", "-w", "2", "-m", "5", clientIP)
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
				e, ok := parseICMPError(f)
				if !ok || f.Outgoing {
					continue
				}
				switch e.outer.Src {
				case addr(routerIP):
					fromRouter = true
				case addr(clientIP):
					fromClient = true
				default:
					continue
				}
				if e.quote.Src != addr(podIP) {
					t.Errorf("error from %v quotes source %v, want the Pod", e.outer.Src, e.quote.Src)
				}
				e.checkChecksums(t, "error from "+e.outer.Src.String())
			}
			if !fromRouter {
				t.Error("no time-exceeded from the router reached the Pod")
			}
			if mode.name == "udp" && !fromClient {
				t.Error("no port-unreachable from the client reached the Pod")
			}
		})
	}
}

// TestPortUnreachable: a UDP probe from the client to a closed port of the
// Pod comes back as port unreachable from the ElasticIP quoting the
// ElasticIP, so the client's socket gets ECONNREFUSED.
func TestPortUnreachable(t *testing.T) {
	tp := newTopology(t, topologyOptions{})
	tp.sync(t)
	cliCap := tp.client.Capture("eth0")
	var conn net.Conn
	tp.client.MustDo(func() (err error) {
		conn, err = net.Dial("udp4", elasticIP+":9999")
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
		e, ok := parseICMPError(f)
		return ok && !f.Outgoing && e.msg.Type == 3 && e.msg.Code == 3
	})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := parseICMPError(f)
	if e.outer.Src != addr(elasticIP) || e.quote.Dst != addr(elasticIP) || e.quote.Src != addr(clientIP) {
		t.Errorf("port unreachable %v→%v quoting %v→%v; want from and quoting the ElasticIP",
			e.outer.Src, e.outer.Dst, e.quote.Src, e.quote.Dst)
	}
	if _, checked := e.quote.L4ChecksumOK(); !checked {
		t.Error("quote too short to verify the UDP checksum")
	}
	e.checkChecksums(t, "port unreachable")
}

// TestForeignQuoteDropped: an ICMP error whose quote names an address other
// than the translated one is dropped, in both directions; a well-formed one
// sent right after passes (and proves the first would have been seen).
func TestForeignQuoteDropped(t *testing.T) {
	tp := newTopology(t, topologyOptions{})
	tp.sync(t)

	t.Run("inbound", func(t *testing.T) {
		podCap := tp.pod.Capture("eth0")
		foreign := netns.BuildUDP(addr("10.225.51.77"), addr(clientIP), 40002, 53, []byte("x"))
		valid := netns.BuildUDP(addr(elasticIP), addr(clientIP), 40001, 53, []byte("x"))
		sendICMP(t, tp.client, elasticIP, netns.BuildICMP(3, 1, [4]byte{}, foreign))
		sendICMP(t, tp.client, elasticIP, netns.BuildICMP(3, 1, [4]byte{}, valid))
		f, err := podCap.WaitFor(ioTimeout, func(f netns.Frame) bool {
			e, ok := parseICMPError(f)
			return ok && quotedSourcePort(e) == 40001
		})
		if err != nil {
			t.Fatal(err)
		}
		e, _ := parseICMPError(f)
		if e.outer.Dst != addr(podIP) || e.quote.Src != addr(podIP) {
			t.Errorf("valid error reached the Pod as %v quoting %v; want both the Pod IP", e.outer.Dst, e.quote.Src)
		}
		e.checkChecksums(t, "crafted inbound error")
		for _, f := range podCap.Frames() {
			if e, ok := parseICMPError(f); ok && quotedSourcePort(e) == 40002 {
				t.Errorf("error quoting a foreign address reached the Pod (quote %v→%v)", e.quote.Src, e.quote.Dst)
			}
		}
		assertDropCounter(t, tp, ChainDNATICMPError, 1)

		// A complete quoted TCP segment: its checksum is fixed too.
		tcp := netns.BuildTCP(addr(elasticIP), addr(clientIP), 40005, 443, 1, []byte("data"))
		sendICMP(t, tp.client, elasticIP, netns.BuildICMP(3, 1, [4]byte{}, tcp))
		f, err = podCap.WaitFor(ioTimeout, func(f netns.Frame) bool {
			e, ok := parseICMPError(f)
			return ok && e.quote.Proto == netns.ProtoTCP && quotedSourcePort(e) == 40005
		})
		if err != nil {
			t.Fatal(err)
		}
		e, _ = parseICMPError(f)
		if _, checked := e.quote.L4ChecksumOK(); !checked || e.quote.Src != addr(podIP) {
			t.Errorf("quoted TCP segment from %v, complete=%v", e.quote.Src, checked)
		}
		e.checkChecksums(t, "error quoting TCP")
	})
	t.Run("outbound", func(t *testing.T) {
		cliCap := tp.client.Capture("eth0")
		foreign := netns.BuildUDP(addr(clientIP), addr("10.244.1.99"), 53, 40004, []byte("x"))
		valid := netns.BuildUDP(addr(clientIP), addr(podIP), 53, 40003, []byte("x"))
		sendICMP(t, tp.pod, clientIP, netns.BuildICMP(3, 3, [4]byte{}, foreign))
		sendICMP(t, tp.pod, clientIP, netns.BuildICMP(3, 3, [4]byte{}, valid))
		f, err := cliCap.WaitFor(ioTimeout, func(f netns.Frame) bool {
			e, ok := parseICMPError(f)
			return ok && quotedDestPort(e) == 40003
		})
		if err != nil {
			t.Fatal(err)
		}
		e, _ := parseICMPError(f)
		if e.outer.Src != addr(elasticIP) || e.quote.Dst != addr(elasticIP) {
			t.Errorf("valid error reached the client from %v quoting %v; want both the ElasticIP", e.outer.Src, e.quote.Dst)
		}
		e.checkChecksums(t, "crafted outbound error")
		for _, f := range cliCap.Frames() {
			if e, ok := parseICMPError(f); ok && quotedDestPort(e) == 40004 {
				t.Errorf("error quoting a foreign address reached the client (quote %v→%v)", e.quote.Src, e.quote.Dst)
			}
		}
		assertDropCounter(t, tp, ChainSNATICMPError, 1)
	})
}

func quotedSourcePort(e *icmpError) uint16 {
	s, _, _ := e.quote.Ports()
	return s
}

func quotedDestPort(e *icmpError) uint16 {
	_, d, _ := e.quote.Ports()
	return d
}

// sendICMP sends a raw ICMP message from ns to dst; the kernel adds the IP
// header with the routed source address.
func sendICMP(t *testing.T, ns *netns.NS, dst string, msg []byte) {
	t.Helper()
	ns.MustDo(func() error {
		c, err := net.ListenPacket("ip4:icmp", "0.0.0.0")
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.WriteTo(msg, &net.IPAddr{IP: net.ParseIP(dst)})
		return err
	})
}

var counterRe = regexp.MustCompile(`counter packets (\d+) bytes \d+ drop`)

// assertDropCounter checks the drop rule of chain counted want packets.
func assertDropCounter(t *testing.T, tp *topology, chain string, want int) {
	t.Helper()
	out := tp.node.MustRun("nft", "list", "chain", "ip", TableName, chain)
	m := counterRe.FindStringSubmatch(out)
	if m == nil || m[1] != strconv.Itoa(want) {
		t.Errorf("drop counter of %s: want %d packets:\n%s", chain, want, out)
	}
}
