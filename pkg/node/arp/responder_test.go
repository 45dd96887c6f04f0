package arp

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"regexp"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/node/sysctl"
	"github.com/loutres/juneau/test/netns"
	"github.com/loutres/juneau/test/require"
)

const (
	clientIP = "10.225.51.100"
	node1IP  = "10.225.51.2"
	node2IP  = "10.225.51.3"
	eipA     = "10.225.51.5" // the ElasticIP under test
	eipB     = "10.225.51.6" // owned by node2, the positive control
)

type lan struct {
	lan, client, node1, node2 *netns.NS
	captures                  map[string]*netns.Capture
}

// newLAN puts a client and two nodes on one bridge ("the external network")
// and captures every frame on every bridge port.
func newLAN(t *testing.T) *lan {
	t.Helper()
	require.Root(t)
	s := netns.NewLAN(t, "", clientIP+"/24", node1IP+"/24", node2IP+"/24")
	l := &lan{lan: s.Bridge, client: s.Client, node1: s.Node1, node2: s.Node2, captures: map[string]*netns.Capture{}}
	for _, port := range []string{"pcli", "pn1", "pn2"} {
		l.captures[port] = l.lan.Capture(port)
	}
	for _, n := range []*netns.NS{l.node1, l.node2} {
		n.MustDo(func() error { return sysctl.New().Apply(sysctl.ExternalInterface("ext0")) })
	}
	return l
}

// startResponder runs a responder for ext0 inside ns until the test ends.
func startResponder(t *testing.T, ns *netns.NS, owned ...string) *Responder {
	t.Helper()
	return startResponderWith(t, ns, nil, owned...)
}

// startResponderWith is startResponder with options; it returns once the
// responder answers, from the kernel unless opts say otherwise.
func startResponderWith(t *testing.T, ns *netns.NS, opts []Option, owned ...string) *Responder {
	t.Helper()
	r := NewResponder("ext0", opts...)
	var addrs []netip.Addr
	for _, a := range owned {
		addrs = append(addrs, netip.MustParseAddr(a))
	}
	r.SetAddresses(addrs)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	// The packet socket is opened inside the node's namespace; Run stays on
	// Do's locked thread, so a reopen after an error also happens there.
	go func() { done <- ns.Do(func() error { return r.Run(ctx) }) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("responder in %s: %v", ns.Name, err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("responder in %s did not stop", ns.Name)
		}
	})
	want := PathKernel
	if len(opts) > 0 {
		want = PathSocket
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return r.Path() == want, nil }); err != nil {
		t.Fatalf("responder in %s answers from %q, want %q", ns.Name, r.Path(), want)
	}
	return r
}

var arpingReply = regexp.MustCompile(`bytes from ([0-9a-f:]{17}) \(([0-9.]+)\)`)

// arping asks for ip from the client and returns the MACs that answered.
func (l *lan) arping(t *testing.T, ip string) []string {
	t.Helper()
	// Two requests 200 ms apart, then at most a second for late answers.
	out, _ := l.client.Output("arping", "-c", "2", "-W", "0.2", "-w", "1", "-i", "eth0", ip)
	var macs []string
	for _, m := range arpingReply.FindAllStringSubmatch(out, -1) {
		if m[2] == ip {
			macs = append(macs, m[1])
		}
	}
	return macs
}

// arpingAnswered asks for ip until someone answers (a loaded machine may delay a
// reply past arping's own deadline) or ten seconds pass, and returns the MACs of
// the first round that got an answer.
func (l *lan) arpingAnswered(t *testing.T, ip string) []string {
	t.Helper()
	var macs []string
	_ = wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) {
			macs = l.arping(t, ip)
			return len(macs) > 0, nil
		})
	return macs
}

func allEqual(macs []string, want net.HardwareAddr) bool {
	for _, m := range macs {
		if m != want.String() {
			return false
		}
	}
	return len(macs) > 0
}

func TestResponderOnTheWire(t *testing.T) {
	l := newLAN(t)
	r1 := startResponder(t, l.node1)
	r2 := startResponder(t, l.node2, eipB)
	mac1, mac2 := l.node1.MAC("ext0"), l.node2.MAC("ext0")

	t.Run("silent while not owned", func(t *testing.T) {
		if macs := l.arping(t, eipA); len(macs) != 0 {
			t.Errorf("%s answered by %v while nobody owns it", eipA, macs)
		}
		if r1.Requests() == 0 {
			t.Error("node1's responder saw no request")
		}
		if r1.Replies() != 0 {
			t.Errorf("node1 sent %d replies", r1.Replies())
		}
	})

	t.Run("answered by the owner only", func(t *testing.T) {
		r1.SetAddresses([]netip.Addr{netip.MustParseAddr(eipA)})
		if macs := l.arpingAnswered(t, eipA); !allEqual(macs, mac1) {
			t.Errorf("%s answered by %v, want only node1 %v", eipA, macs, mac1)
		}
		// The client's kernel resolves it the same way.
		l.client.FlushNeighbour("eth0", eipA)
		if got := l.resolve(t, eipA); !bytes.Equal(got, mac1) {
			t.Errorf("client neighbour entry for %s = %v, want node1 %v", eipA, got, mac1)
		}
		// node2 is alive and answers for what it owns.
		if macs := l.arpingAnswered(t, eipB); !allEqual(macs, mac2) {
			t.Errorf("%s answered by %v, want node2 %v", eipB, macs, mac2)
		}
	})

	var repliesAtRelease uint64
	t.Run("silent again after release", func(t *testing.T) {
		r1.SetAddresses(nil)
		repliesAtRelease = r1.Replies()
		if macs := l.arping(t, eipA); len(macs) != 0 {
			t.Errorf("%s still answered by %v after release", eipA, macs)
		}
	})

	if r2.Replies() == 0 {
		t.Error("node2 never replied")
	}
	l.checkWire(t, mac1, mac2) // also drains what is still in flight
	if n := r1.Replies(); n != repliesAtRelease {
		t.Errorf("node1 sent %d replies after releasing the address", n-repliesAtRelease)
	}
}

// resolve makes the client's kernel resolve ip (by sending it a datagram) and
// returns the hardware address it learnt.
func (l *lan) resolve(t *testing.T, ip string) net.HardwareAddr {
	t.Helper()
	var mac net.HardwareAddr
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 5*time.Second, true,
		func(context.Context) (bool, error) {
			l.client.MustDo(func() error {
				c, err := net.Dial("udp4", ip+":9")
				if err != nil {
					return err
				}
				defer c.Close()
				_, _ = c.Write([]byte("x"))
				return nil
			})
			m, ok := l.client.Neighbour("eth0", ip)
			mac = m
			return ok, nil
		})
	if err != nil {
		t.Fatalf("client never resolved %s: %v", ip, err)
	}
	return mac
}

// checkWire inspects everything captured on the bridge: no gratuitous ARP at
// all, every reply for the ElasticIP came from node1 and was unicast to the
// client.
func (l *lan) checkWire(t *testing.T, mac1, mac2 net.HardwareAddr) {
	t.Helper()
	clientMAC := l.client.MAC("eth0")
	repliesA := 0
	for port, c := range l.captures {
		c.Stop()
		for _, f := range c.Frames() {
			a, ok := netns.ParseARP(f.Data)
			if !ok {
				continue
			}
			if a.Gratuitous() {
				t.Errorf("gratuitous ARP on %s: op %d from %v for %v", port, a.Op, net.HardwareAddr(a.SenderMAC), a.SenderIP)
			}
			if a.Op != 2 || a.SenderIP.String() != eipA {
				continue
			}
			repliesA++
			if !bytes.Equal(a.SenderMAC, mac1) || bytes.Equal(a.SenderMAC, mac2) {
				t.Errorf("reply for %s from %v on %s", eipA, net.HardwareAddr(a.SenderMAC), port)
			}
			if !bytes.Equal(a.EtherDst, clientMAC) {
				t.Errorf("reply for %s sent to %v, not unicast to the client", eipA, net.HardwareAddr(a.EtherDst))
			}
		}
	}
	if repliesA == 0 {
		t.Error("no reply for the ElasticIP captured")
	}
}
