package arp

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/node/responder/respondertest"
	"github.com/loutres/juneau/test/netns"
)

func TestGratuitousReply(t *testing.T) {
	var f ethernet.Frame
	var p arp.Packet
	if err := f.UnmarshalBinary(GratuitousReply(ourMAC, eip)); err != nil {
		t.Fatal(err)
	}
	if err := p.UnmarshalBinary(f.Payload); err != nil {
		t.Fatal(err)
	}
	// Linux takes a reply as gratuitous (and lets it override a neighbour entry) only
	// when sender and target address are equal and so are the hardware addresses.
	if !bytes.Equal(f.Destination, ethernet.Broadcast) || !bytes.Equal(f.Source, ourMAC) || p.Operation != arp.OperationReply ||
		p.SenderIP != eip || p.TargetIP != eip || !bytes.Equal(p.SenderHardwareAddr, ourMAC) || !bytes.Equal(p.TargetHardwareAddr, ourMAC) {
		t.Errorf("frame %+v packet %+v", f, p)
	}
}

// TestGratuitousSchedule: an address named by SetGratuitous is announced GratuitousCount
// times, GratuitousInterval apart, when the responder starts answering for it; nothing
// for other addresses, for addresses it already answered, or once it no longer owns it.
func TestGratuitousSchedule(t *testing.T) {
	other := netip.MustParseAddr("10.225.51.6")
	r := NewResponder("ext0")
	conn := &respondertest.Conn{}
	now := time.Unix(1000, 0)
	send := func() (time.Duration, bool) { return r.sendDue(klog.Background(), conn, ourMAC, now) }

	r.SetAddresses([]netip.Addr{other}) // answered before gratuitous ARP was asked for
	r.SetGratuitous([]netip.Addr{eip, other})
	if _, due := send(); due || len(conn.Sent) != 0 {
		t.Fatalf("sent %d frames for an address answered before", len(conn.Sent))
	}
	r.SetAddresses([]netip.Addr{other, eip})
	for i := range GratuitousCount {
		next, due := send()
		if len(conn.Sent) != i+1 {
			t.Fatalf("round %d: %d frames sent", i, len(conn.Sent))
		}
		if i < GratuitousCount-1 && (!due || next != GratuitousInterval) {
			t.Fatalf("round %d: next in %v (%v), want %v", i, next, due, GratuitousInterval)
		}
		if i == GratuitousCount-1 && due {
			t.Fatalf("another announcement due after %d", GratuitousCount)
		}
		if again, _ := send(); i < GratuitousCount-1 && again != GratuitousInterval {
			t.Fatalf("a frame was due again before the interval: %v", again)
		}
		now = now.Add(GratuitousInterval)
	}
	for _, f := range conn.Sent {
		a, ok := netns.ParseARP(f)
		if !ok || !a.Gratuitous() || a.SenderIP != eip || a.Op != 2 {
			t.Errorf("sent %+v", a)
		}
	}
	if r.Gratuitous() != GratuitousCount {
		t.Errorf("counted %d", r.Gratuitous())
	}

	// Released before the announcements are done: the rest is dropped.
	r.SetAddresses([]netip.Addr{other})
	r.SetAddresses([]netip.Addr{other, eip})
	r.SetAddresses([]netip.Addr{other})
	if _, due := send(); due || len(conn.Sent) != GratuitousCount {
		t.Errorf("sent %d frames for an address released before its turn", len(conn.Sent)-GratuitousCount)
	}
}

// TestGratuitousARPAfterAMove: the address moves from node1 to node2. Without
// gratuitous ARP nothing is sent and the client keeps node1's MAC; with it, node2
// sends GratuitousCount gratuitous replies and the client's neighbour entry points at
// node2 at once, without a flush and without the client sending anything.
func TestGratuitousARPAfterAMove(t *testing.T) {
	l := newLAN(t)
	r1 := startResponder(t, l.node1, eipA)
	r2 := startResponder(t, l.node2, eipB)
	mac1, mac2 := l.node1.MAC("ext0"), l.node2.MAC("ext0")
	a, b := netip.MustParseAddr(eipA), netip.MustParseAddr(eipB)
	if got := l.resolve(t, eipA); !bytes.Equal(got, mac1) {
		t.Fatalf("client resolved %s to %v, want node1 %v", eipA, got, mac1)
	}

	t.Run("off: nothing sent, the client keeps the old MAC", func(t *testing.T) {
		r1.SetAddresses(nil)
		r2.SetAddresses([]netip.Addr{b, a})
		r2.mu.Lock()
		pending := len(r2.pending)
		r2.mu.Unlock()
		if pending != 0 {
			t.Fatalf("%d announcements scheduled without gratuitous ARP", pending)
		}
		// node2 answers now (asked for the other address, so that the client's entry
		// for eipA is left alone).
		if macs := l.arpingAnswered(t, eipB); !allEqual(macs, mac2) {
			t.Fatalf("%s answered by %v", eipB, macs)
		}
		if got, _ := l.client.Neighbour("eth0", eipA); !bytes.Equal(got, mac1) {
			t.Errorf("client's entry for %s is %v, want still node1's %v", eipA, got, mac1)
		}
		for port, c := range l.captures {
			for _, f := range c.Frames() {
				if p, ok := netns.ParseARP(f.Data); ok && p.Gratuitous() {
					t.Errorf("gratuitous ARP on %s for %v", port, p.SenderIP)
				}
			}
		}
		if r1.Gratuitous()+r2.Gratuitous() != 0 {
			t.Errorf("responders counted %d gratuitous replies", r1.Gratuitous()+r2.Gratuitous())
		}
	})

	t.Run("on: node2 announces, the client follows at once", func(t *testing.T) {
		r2.SetAddresses([]netip.Addr{b}) // node2 stops answering, then starts again: a move to it
		r2.SetGratuitous([]netip.Addr{a})
		r2.SetAddresses([]netip.Addr{b, a})
		var got net.HardwareAddr
		err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			got, _ = l.client.Neighbour("eth0", eipA)
			return bytes.Equal(got, mac2), nil
		})
		if err != nil {
			t.Fatalf("client's entry for %s is %v, want node2's %v after its gratuitous ARP", eipA, got, mac2)
		}
		if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return r2.Gratuitous() == GratuitousCount, nil
		}); err != nil {
			t.Fatalf("node2 sent %d gratuitous replies, want %d", r2.Gratuitous(), GratuitousCount)
		}
		c := l.captures["pcli"]
		c.Stop()
		seen := 0
		for _, f := range c.Frames() {
			p, ok := netns.ParseARP(f.Data)
			if !ok || !p.Gratuitous() {
				continue
			}
			seen++
			if p.SenderIP != a || p.Op != 2 || !bytes.Equal(p.SenderMAC, mac2) || !bytes.Equal(p.EtherDst, ethernet.Broadcast) {
				t.Errorf("gratuitous frame %+v", p)
			}
		}
		if seen != GratuitousCount {
			t.Errorf("the client received %d gratuitous replies, want %d", seen, GratuitousCount)
		}
	})
}
