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

// icmpError is a captured ICMP or ICMPv6 error with its quote.
type icmpError struct {
	outerSrc, outerDst, quoteSrc, quoteDst netip.Addr
	typ, code                              uint8
	quoteProto                             uint8
	sport, dport                           uint16 // of the quoted datagram, when it holds them
	// quoteComplete is true when the quote holds the whole datagram, so its
	// transport checksum can be verified.
	quoteComplete bool
	// bad lists the checksums that are wrong: outer IP header, ICMP,
	// quoted IP header, quoted transport (when complete).
	bad []string
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

// parseICMPError returns the ICMP (IPv4) or ICMPv6 error in a frame, if it is
// one.
func parseICMPError(f netns.Frame) (*icmpError, bool) {
	if p, ok := netns.ParseFrame(f.Data); ok && p.Proto == netns.ProtoICMP {
		return icmp4Error(p)
	}
	if p, ok := netns.ParseFrame6(f.Data); ok && p.Next == netns.ProtoICMPv6 {
		return icmp6Error(p)
	}
	return nil, false
}

func icmp4Error(p *netns.IPv4) (*icmpError, bool) {
	m, err := p.ICMP()
	if err != nil || !m.IsError() {
		return nil, false
	}
	q, err := m.Quote()
	if err != nil {
		return nil, false
	}
	e := &icmpError{outerSrc: p.Src, outerDst: p.Dst, quoteSrc: q.Src, quoteDst: q.Dst, typ: m.Type, code: m.Code, quoteProto: q.Proto}
	e.sport, e.dport, _ = q.Ports()
	if !p.HeaderChecksumOK {
		e.bad = append(e.bad, "outer IP header")
	}
	if ok, checked := p.L4ChecksumOK(); !ok || !checked {
		e.bad = append(e.bad, "ICMP")
	}
	if !q.HeaderChecksumOK {
		e.bad = append(e.bad, "quoted IP header")
	}
	ok, checked := q.L4ChecksumOK()
	if e.quoteComplete = checked; checked && !ok {
		e.bad = append(e.bad, "quoted transport")
	}
	return e, true
}

func icmp6Error(p *netns.IPv6) (*icmpError, bool) {
	m, err := p.ICMP()
	if err != nil || !m.IsError6() {
		return nil, false
	}
	q, err := m.Quote6()
	if err != nil {
		return nil, false
	}
	e := &icmpError{outerSrc: p.Src, outerDst: p.Dst, quoteSrc: q.Src, quoteDst: q.Dst, typ: m.Type, code: m.Code, quoteProto: q.Next}
	e.sport, e.dport, _ = q.Ports()
	if ok, checked := p.L4ChecksumOK(); !ok || !checked {
		e.bad = append(e.bad, "ICMPv6")
	}
	ok, checked := q.L4ChecksumOK()
	if e.quoteComplete = checked; checked && !ok {
		e.bad = append(e.bad, "quoted transport")
	}
	return e, true
}

// checkChecksums fails the test unless every checksum of the error is valid.
func (e *icmpError) checkChecksums(t *testing.T, what string) {
	t.Helper()
	for _, b := range e.bad {
		t.Errorf("%s: bad %s checksum", what, b)
	}
}

// fam is what the ICMP tests need of one family: the topology's addresses
// and how errors and tools differ.
type fam struct {
	name                                                string
	ipv6                                                bool
	client, node, router, routerC, eip, pod, podGW, gw1 string
	// foreignEIP and foreignPod are addresses a crafted quote names instead.
	foreignEIP, foreignPod string
	// tooBig and portUnreachable match the errors of those kinds.
	tooBig, portUnreachable func(*icmpError) bool
	// destUnreachable is the type and code crafted errors use.
	unreachType, unreachCode uint8
	// ip is the ip(8) family flag, tracerouteFlag traceroute's.
	ip, traceroute []string
}

var (
	famIPv4 = fam{
		name: "ip", client: clientIP, node: nodeIP, router: routerIP, routerC: routerCIP, eip: elasticIP, pod: podIP, podGW: podGW,
		gw1: podGW, foreignEIP: "10.225.51.77", foreignPod: "10.244.1.99",
		tooBig:          func(e *icmpError) bool { return e.typ == 3 && e.code == 4 },
		portUnreachable: func(e *icmpError) bool { return e.typ == 3 && e.code == 3 },
		unreachType:     3, unreachCode: 1,
	}
	famIPv6 = fam{
		name: "ip6", ipv6: true, client: clientIP6, node: nodeIP6, router: routerIP6, routerC: routerCIP6, eip: elasticIP6, pod: podIP6, podGW: podGW6,
		gw1: nodeIP6, foreignEIP: "2001:db8:51::77", foreignPod: "fd00:10:244:1::99",
		tooBig:          func(e *icmpError) bool { return e.typ == 2 },
		portUnreachable: func(e *icmpError) bool { return e.typ == 1 && e.code == 4 },
		unreachType:     1, unreachCode: 0,
		ip: []string{"-6"}, traceroute: []string{"-6"},
	}
	bothFamilies = []fam{famIPv4, famIPv6}
)

func (f fam) network(proto string) string { return network(proto, f.client) }

// udp and tcp build a datagram of the family for a crafted quote.
func (f fam) udp(src, dst string, sport, dport uint16) []byte {
	if f.ipv6 {
		return netns.BuildUDP6(addr(src), addr(dst), sport, dport, []byte("x"))
	}
	return netns.BuildUDP(addr(src), addr(dst), sport, dport, []byte("x"))
}

func (f fam) tcp(src, dst string, sport, dport uint16) []byte {
	if f.ipv6 {
		return netns.BuildTCP6(addr(src), addr(dst), sport, dport, 1, []byte("data"))
	}
	return netns.BuildTCP(addr(src), addr(dst), sport, dport, 1, []byte("data"))
}

// errorQuoting is a destination unreachable quoting q, with the given code.
func (f fam) errorQuoting(code uint8, q []byte) []byte {
	if f.ipv6 {
		return append([]byte{f.unreachType, code, 0, 0, 0, 0, 0, 0}, q...) // the kernel fills the checksum
	}
	return netns.BuildICMP(f.unreachType, code, [4]byte{}, q)
}

// TestPathMTUDiscovery: a router with a small MTU between node and client
// sends "fragmentation needed" (IPv6: packet too big) to the ElasticIP; the
// node rewrites it for the Pod, whose kernel learns the path MTU, and a large
// transfer completes.
func TestPathMTUDiscovery(t *testing.T) {
	for _, f := range bothFamilies {
		t.Run(f.name, func(t *testing.T) { testPathMTUDiscovery(t, f) })
	}
}

func testPathMTUDiscovery(t *testing.T, f fam) {
	const mtu = 1280
	tp := newTopology(t, topologyOptions{routerMTU: mtu, masquerade: true, ipv6: f.ipv6})
	tp.sync(t)
	podCap := tp.pod.Capture("eth0")

	routeGet := append(append([]string{"ip"}, f.ip...), "route", "get", f.client)
	if out := tp.pod.MustRun(routeGet[0], routeGet[1:]...); strings.Contains(out, "mtu") {
		t.Fatalf("path MTU known before any traffic: %s", out)
	}
	const size = 2 << 20
	var ln net.Listener
	tp.client.MustDo(func() (err error) {
		ln, err = net.Listen(f.network("tcp"), anyAddr(f.client, 9100))
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
		c, err := net.DialTimeout(f.network("tcp"), net.JoinHostPort(f.client, "9100"), ioTimeout)
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
	if out := tp.pod.MustRun(routeGet[0], routeGet[1:]...); !regexp.MustCompile(`mtu 1280\b`).MatchString(out) {
		t.Errorf("Pod did not learn the path MTU: %s", out)
	}
	e := waitICMPError(t, podCap, f.tooBig)
	if e.outerSrc != addr(f.router) || e.outerDst != addr(f.pod) || e.quoteSrc != addr(f.pod) || e.quoteDst != addr(f.client) {
		t.Errorf("too big at the Pod: %v→%v quoting %v→%v", e.outerSrc, e.outerDst, e.quoteSrc, e.quoteDst)
	}
	e.checkChecksums(t, "too big")
}

// TestTraceroute: UDP and ICMP traceroute from the Pod show the node, the
// router and the client; the errors reaching the Pod quote the Pod IP and
// carry valid checksums.
func TestTraceroute(t *testing.T) {
	for _, f := range bothFamilies {
		tp := newTopology(t, topologyOptions{routerMTU: 1500, ipv6: f.ipv6})
		tp.sync(t)
		hops := []string{f.gw1, f.router, f.client}
		for _, mode := range []struct{ name, flag string }{{"udp", "-U"}, {"icmp", "-I"}} {
			t.Run(f.name+"/"+mode.name, func(t *testing.T) {
				podCap := tp.pod.Capture("eth0")
				args := append(append([]string{}, f.traceroute...), "-n", mode.flag, "-q", "1", "-w", "2", "-m", "5", f.client)
				out := tp.pod.MustRun("traceroute", args...)
				ls := lines(out)
				if len(ls) != 1+len(hops) {
					t.Fatalf("traceroute %s: want %d hops:\n%s", mode.name, len(hops), out)
				}
				for i, h := range hops {
					if fs := strings.Fields(ls[i+1]); len(fs) < 2 || fs[1] != h {
						t.Errorf("hop %d = %q, want %s", i+1, ls[i+1], h)
					}
				}
				podCap.Stop()
				var fromRouter, fromClient bool
				for _, fr := range podCap.Frames() {
					e, ok := parseICMPError(fr)
					if !ok || fr.Outgoing {
						continue
					}
					switch e.outerSrc {
					case addr(f.router):
						fromRouter = true
					case addr(f.client):
						fromClient = true
					default:
						continue
					}
					if e.quoteSrc != addr(f.pod) {
						t.Errorf("error from %v quotes source %v, want the Pod", e.outerSrc, e.quoteSrc)
					}
					e.checkChecksums(t, "error from "+e.outerSrc.String())
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
}

// TestPortUnreachable: a UDP probe from the client to a closed port of the
// Pod comes back as port unreachable from the ElasticIP quoting the
// ElasticIP, so the client's socket gets ECONNREFUSED.
func TestPortUnreachable(t *testing.T) {
	for _, f := range bothFamilies {
		t.Run(f.name, func(t *testing.T) {
			tp := newTopology(t, topologyOptions{ipv6: f.ipv6})
			tp.sync(t)
			cliCap := tp.client.Capture("eth0")
			var conn net.Conn
			tp.client.MustDo(func() (err error) {
				conn, err = net.Dial(f.network("udp"), net.JoinHostPort(f.eip, "9999"))
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
			e := waitICMPError(t, cliCap, f.portUnreachable)
			if e.outerSrc != addr(f.eip) || e.quoteDst != addr(f.eip) || e.quoteSrc != addr(f.client) {
				t.Errorf("port unreachable %v→%v quoting %v→%v; want from and quoting the ElasticIP",
					e.outerSrc, e.outerDst, e.quoteSrc, e.quoteDst)
			}
			if !e.quoteComplete {
				t.Error("quote too short to verify the UDP checksum")
			}
			e.checkChecksums(t, "port unreachable")
		})
	}
}

// TestForeignQuoteDropped: an ICMP error whose quote names an address other
// than the translated one is dropped, in both directions; a well-formed one
// sent right after passes (and proves the first would have been seen), with
// every checksum valid for quoted UDP, TCP and quotes cut short inside the
// transport header.
func TestForeignQuoteDropped(t *testing.T) {
	for _, f := range bothFamilies {
		t.Run(f.name, func(t *testing.T) { testForeignQuoteDropped(t, f) })
	}
}

func testForeignQuoteDropped(t *testing.T, f fam) {
	tp := newTopology(t, topologyOptions{ipv6: f.ipv6})
	tp.sync(t)
	bySport := func(p uint16) func(*icmpError) bool { return func(e *icmpError) bool { return e.sport == p } }
	byDport := func(p uint16) func(*icmpError) bool { return func(e *icmpError) bool { return e.dport == p } }

	t.Run("inbound", func(t *testing.T) {
		podCap := tp.pod.Capture("eth0")
		sendICMP(t, tp.client, f.eip, f.errorQuoting(f.unreachCode, f.udp(f.foreignEIP, f.client, 40002, 53)))
		sendICMP(t, tp.client, f.eip, f.errorQuoting(f.unreachCode, f.udp(f.eip, f.client, 40001, 53)))
		e := waitICMPError(t, podCap, bySport(40001))
		if e.outerDst != addr(f.pod) || e.quoteSrc != addr(f.pod) {
			t.Errorf("valid error reached the Pod as %v quoting %v; want both the Pod IP", e.outerDst, e.quoteSrc)
		}
		e.checkChecksums(t, "crafted inbound error")
		for _, fr := range podCap.Frames() {
			if e, ok := parseICMPError(fr); ok && e.sport == 40002 {
				t.Errorf("error quoting a foreign address reached the Pod (quote %v→%v)", e.quoteSrc, e.quoteDst)
			}
		}
		assertDropCounter(t, tp, f, ChainDNATICMPError, 1)

		// A complete quoted TCP segment: its checksum is fixed too.
		sendICMP(t, tp.client, f.eip, f.errorQuoting(f.unreachCode, f.tcp(f.eip, f.client, 40005, 443)))
		e = waitICMPError(t, podCap, bySport(40005))
		if !e.quoteComplete || e.quoteProto != netns.ProtoTCP || e.quoteSrc != addr(f.pod) {
			t.Errorf("quoted TCP segment from %v, complete=%v", e.quoteSrc, e.quoteComplete)
		}
		e.checkChecksums(t, "error quoting TCP")

		// Cut inside the quoted UDP header, before its checksum: only the
		// quoted address (and, for IPv4, the quoted header checksum) change.
		short := f.udp(f.eip, f.client, 40006, 53)
		short = short[:len(short)-len("x")-4]
		sendICMP(t, tp.client, f.eip, f.errorQuoting(f.unreachCode, short))
		e = waitICMPError(t, podCap, bySport(40006))
		if e.quoteSrc != addr(f.pod) || e.quoteComplete {
			t.Errorf("short quote names %v (complete %v), want the Pod IP", e.quoteSrc, e.quoteComplete)
		}
		e.checkChecksums(t, "error with a short quote")

		// Cut after the first 8 bytes of the quoted TCP header, the least a
		// router quotes: the TCP checksum is not there, so only the quoted
		// address (and, for IPv4, the quoted header checksum) change.
		shortTCP := f.tcp(f.eip, f.client, 40007, 443)
		shortTCP = shortTCP[:len(shortTCP)-len("data")-12]
		sendICMP(t, tp.client, f.eip, f.errorQuoting(f.unreachCode, shortTCP))
		e = waitICMPError(t, podCap, bySport(40007))
		if e.quoteSrc != addr(f.pod) || e.quoteComplete || e.quoteProto != netns.ProtoTCP {
			t.Errorf("short TCP quote names %v (complete %v, protocol %d), want the Pod IP", e.quoteSrc, e.quoteComplete, e.quoteProto)
		}
		e.checkChecksums(t, "error with a short TCP quote")
	})
	t.Run("outbound", func(t *testing.T) {
		cliCap := tp.client.Capture("eth0")
		portUnreachableCode := uint8(3)
		if f.ipv6 {
			portUnreachableCode = 4
		}
		sendICMP(t, tp.pod, f.client, f.errorQuoting(portUnreachableCode, f.udp(f.client, f.foreignPod, 53, 40004)))
		sendICMP(t, tp.pod, f.client, f.errorQuoting(portUnreachableCode, f.udp(f.client, f.pod, 53, 40003)))
		e := waitICMPError(t, cliCap, byDport(40003))
		if e.outerSrc != addr(f.eip) || e.quoteDst != addr(f.eip) {
			t.Errorf("valid error reached the client from %v quoting %v; want both the ElasticIP", e.outerSrc, e.quoteDst)
		}
		e.checkChecksums(t, "crafted outbound error")
		for _, fr := range cliCap.Frames() {
			if e, ok := parseICMPError(fr); ok && e.dport == 40004 {
				t.Errorf("error quoting a foreign address reached the client (quote %v→%v)", e.quoteSrc, e.quoteDst)
			}
		}
		assertDropCounter(t, tp, f, ChainSNATICMPError, 1)
	})
}

// waitICMPError waits for an ICMP error that match selects.
func waitICMPError(t *testing.T, c *netns.Capture, match func(*icmpError) bool) *icmpError {
	t.Helper()
	fr, err := c.WaitFor(ioTimeout, func(fr netns.Frame) bool {
		e, ok := parseICMPError(fr)
		return ok && !fr.Outgoing && match(e)
	})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := parseICMPError(fr)
	return e
}

// sendICMP sends a raw ICMP (ICMPv6) message from ns to dst; the kernel adds
// the IP header with the routed source address (and, for ICMPv6, the
// checksum).
func sendICMP(t *testing.T, ns *netns.NS, dst string, msg []byte) {
	t.Helper()
	proto, any := "ip4:icmp", "0.0.0.0"
	if addr(dst).Is6() {
		proto, any = "ip6:ipv6-icmp", "::"
	}
	ns.MustDo(func() error {
		c, err := net.ListenPacket(proto, any)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.WriteTo(msg, &net.IPAddr{IP: net.ParseIP(dst)})
		return err
	})
}

var counterRe = regexp.MustCompile(`counter packets (\d+) bytes \d+ drop`)

// assertDropCounter checks the drop rule of chain in the family's table
// counted want packets.
func assertDropCounter(t *testing.T, tp *topology, f fam, chain string, want int) {
	t.Helper()
	out := tp.node.MustRun("nft", "list", "chain", f.name, TableName, chain)
	m := counterRe.FindAllStringSubmatch(out, -1)
	if len(m) == 0 || m[len(m)-1][1] != strconv.Itoa(want) {
		t.Errorf("drop counter of %s %s: want %d packets:\n%s", f.name, chain, want, out)
	}
}
