package harness

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mdlayher/arp"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"

	"github.com/loutres/juneau/test/netns"
)

// Continuous probes from the external client, for tests that inject a fault and
// must show that traffic and ARP answers never stopped: every interval, for each
// target, a UDP request through the NAT (after deleting the client's neighbour entry
// of the address, so the kernel must ask by ARP first), an ICMP echo request, and an
// ARP request of the prober's own. Each probe waits up to ProbeTimeout for its
// answer; the report lists every probe that got none.

// ProbeTimeout is how long one probe waits for its answer: generous, since the
// machines that run the tests are often loaded.
const ProbeTimeout = 2 * time.Second

// ProbeTarget is an ElasticIP whose Pod runs a UDP server (ServeUDP) named Name on
// Port.
type ProbeTarget struct {
	Addr string
	Port int
	Name string
}

// Prober runs the probes until Stop.
type Prober struct {
	c      *Cluster
	cancel context.CancelFunc
	wg     sync.WaitGroup

	seq atomic.Uint32 // of ICMP echo requests

	mu       sync.Mutex
	sent     map[string]int // by kind and target, "udp 10.225.51.5"
	failures []string
}

// ProbeReport is what a Prober saw.
type ProbeReport struct {
	// Sent counts probes by kind and address ("udp 10.225.51.5", "icmp …", "arp …").
	Sent map[string]int
	// Failures describes every probe that got no (right) answer, with its time.
	Failures []string
}

func (r ProbeReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "probes sent %v, %d failed", r.Sent, len(r.Failures))
	for i, f := range r.Failures {
		if i == 20 {
			fmt.Fprintf(&b, "\n  … %d more", len(r.Failures)-i)
			break
		}
		b.WriteString("\n  " + f)
	}
	return b.String()
}

// StartProbes starts probing every target from the client every interval, until Stop
// (or the end of the test).
func (c *Cluster) StartProbes(interval time.Duration, targets ...ProbeTarget) *Prober {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &Prober{c: c, cancel: cancel, sent: map[string]int{}}
	ifi := c.linkOf(c.Client, "eth0")
	for _, tg := range targets {
		arpc := c.arpClient(ifi)
		icmpc := c.icmpConn()
		// One after the other: deleting a neighbour entry while the kernel resolves it
		// drops the packets waiting for the answer, so no probe of this address may be
		// in flight when the UDP probe deletes it.
		p.loop(ctx, interval, []probe{
			{"udp " + tg.Addr, func() error { return p.udp(tg) }},
			{"icmp " + tg.Addr, func() error { return p.icmpEcho(icmpc, tg.Addr) }},
			{"arp " + tg.Addr, func() error { return arpAsk(arpc, tg.Addr) }},
		})
		c.t.Cleanup(func() { arpc.Close(); icmpc.Close() })
	}
	c.t.Cleanup(func() { p.Stop() })
	return p
}

// Stop ends the probes and reports.
func (p *Prober) Stop() ProbeReport {
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	sent := make(map[string]int, len(p.sent))
	for k, v := range p.sent {
		sent[k] = v
	}
	return ProbeReport{Sent: sent, Failures: append([]string(nil), p.failures...)}
}

// probe is one kind of probe of one address.
type probe struct {
	what string
	run  func() error
}

// loop runs the probes in turn every interval until ctx ends, recording each outcome.
func (p *Prober) loop(ctx context.Context, interval time.Duration, probes []probe) {
	p.wg.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			for _, pr := range probes {
				at := time.Now()
				err := pr.run()
				p.mu.Lock()
				p.sent[pr.what]++
				if err != nil {
					p.failures = append(p.failures, fmt.Sprintf("%s %s: %v", at.Format("15:04:05.000"), pr.what, err))
				}
				p.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
}

// udp asks the target's UDP server through the NAT, the client's neighbour entry of
// the address deleted first, and checks the answer names the server and the client.
func (p *Prober) udp(tg ProbeTarget) error {
	p.c.Client.FlushNeighbour("eth0", tg.Addr)
	answer, from, err := UDPAsk(p.c.Client, tg.Addr, tg.Port)
	if err != nil {
		return err
	}
	if want := tg.Name + " " + ClientIP; answer != want || from != tg.Addr {
		return fmt.Errorf("answer %q from %s, want %q from %s", answer, from, want, tg.Addr)
	}
	return nil
}

func (c *Cluster) linkOf(ns *netns.NS, dev string) *net.Interface {
	c.t.Helper()
	var ifi *net.Interface
	ns.MustDo(func() (err error) {
		ifi, err = net.InterfaceByName(dev)
		return err
	})
	return ifi
}

// arpClient opens an ARP client on the client's interface (its socket stays in the
// client's namespace).
func (c *Cluster) arpClient(ifi *net.Interface) *arp.Client {
	c.t.Helper()
	var cl *arp.Client
	c.Client.MustDo(func() (err error) {
		cl, err = arp.Dial(ifi)
		return err
	})
	return cl
}

// arpAsk sends an ARP request for addr and waits for a reply.
func arpAsk(cl *arp.Client, addr string) error {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return err
	}
	if err := cl.SetDeadline(time.Now().Add(ProbeTimeout)); err != nil {
		return err
	}
	if _, err := cl.Resolve(ip); err != nil {
		return fmt.Errorf("no ARP reply: %w", err)
	}
	return nil
}

// icmpConn opens a raw ICMP socket in the client's namespace.
func (c *Cluster) icmpConn() *icmp.PacketConn {
	c.t.Helper()
	var conn *icmp.PacketConn
	c.Client.MustDo(func() (err error) {
		conn, err = icmp.ListenPacket("ip4:icmp", ClientIP)
		return err
	})
	return conn
}

// icmpEcho sends an echo request to addr and waits for the matching reply from it.
// Each prober goroutine owns its socket; the identifier tells probers apart, the
// sequence number one probe from the next.
func (p *Prober) icmpEcho(conn *icmp.PacketConn, addr string) error {
	dst, err := net.ResolveIPAddr("ip4", addr)
	if err != nil {
		return err
	}
	id := os.Getpid() & 0xffff
	seq := int(p.seq.Add(1) & 0xffff)
	msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("juneau-probe")}}
	b, err := msg.Marshal(nil)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(ProbeTimeout)
	if err := conn.SetDeadline(deadline); err != nil {
		return err
	}
	if _, err := conn.WriteTo(b, dst); err != nil {
		return err
	}
	buf := make([]byte, 1500)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			return fmt.Errorf("no echo reply: %w", err)
		}
		m, err := icmp.ParseMessage(1, buf[:n])
		if err != nil || m.Type != ipv4.ICMPTypeEchoReply || from.String() != addr {
			continue
		}
		if e, ok := m.Body.(*icmp.Echo); ok && e.ID == id && e.Seq == seq {
			return nil
		}
	}
}

// ARPAnswered reports whether anything on the segment answers an ARP request for addr
// from the client within ProbeTimeout.
func (c *Cluster) ARPAnswered(addr string) bool {
	c.t.Helper()
	cl := c.arpClient(c.linkOf(c.Client, "eth0"))
	defer cl.Close()
	return arpAsk(cl, addr) == nil
}
