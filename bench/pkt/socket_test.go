package pkt

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/loutres/juneau/test/netns"
)

// TestBlastAndRecv sends a bounded burst over a veth pair between two fresh namespaces
// and receives it with kernel timestamps on the other side.
func TestBlastAndRecv(t *testing.T) {
	a, b := netns.New(t, "pkta"), netns.New(t, "pktb")
	netns.Veth(a, "eth0", b, "eth0")
	var tx, rx *Socket
	a.MustDo(func() (err error) { tx, err = Open("eth0", 0); return err })
	t.Cleanup(func() { tx.Close() })
	b.MustDo(func() (err error) { rx, err = Open("eth0", EtherTypeARP); return err })
	t.Cleanup(func() { rx.Close() })
	if err := rx.EnableTimestamps(); err != nil {
		t.Fatal(err)
	}
	if err := rx.SetReadTimeout(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	mac := a.MAC("eth0")
	self := netip.MustParseAddr("10.225.51.100")
	frames := make([][]byte, 10)
	for i := range frames {
		frames[i] = ARPRequestFrame(mac, self, netip.AddrFrom4([4]byte{10, 225, 51, byte(i + 1)}))
	}
	before := time.Now()
	sent, _, err := tx.Blast(func(i int) []byte { return frames[i%len(frames)] }, time.Minute, 200)
	if err != nil || sent != 200 {
		t.Fatalf("sent %d: %v", sent, err)
	}
	buf := make([]byte, 1514)
	for i := range 200 {
		n, at, err := rx.Recv(buf)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		got, ok := netns.ParseARP(buf[:n])
		if want := netip.AddrFrom4([4]byte{10, 225, 51, byte(i%10 + 1)}); !ok || got.TargetIP != want {
			t.Fatalf("frame %d asks for %v, want %v (in order)", i, got, want)
		}
		if at.Before(before) || at.After(time.Now()) {
			t.Fatalf("frame %d stamped %v, outside the test's window", i, at)
		}
	}
	if err := rx.SetReadTimeout(50 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, _, err := rx.Recv(buf); !errors.Is(err, ErrTimeout) {
		t.Errorf("after the burst Recv returned %v, want ErrTimeout", err)
	}
}

// TestBlastStopsAtDeadline: an unbounded count ends when the duration has passed.
func TestBlastStopsAtDeadline(t *testing.T) {
	a, b := netns.New(t, "pkta"), netns.New(t, "pktb")
	netns.Veth(a, "eth0", b, "eth0")
	var tx *Socket
	a.MustDo(func() (err error) { tx, err = Open("eth0", 0); return err })
	t.Cleanup(func() { tx.Close() })
	f := ARPRequestFrame(a.MAC("eth0"), netip.MustParseAddr("10.225.51.100"), netip.MustParseAddr("10.225.51.1"))
	sent, elapsed, err := tx.Blast(func(int) []byte { return f }, 100*time.Millisecond, 1<<40)
	if err != nil || sent == 0 {
		t.Fatalf("sent %d: %v", sent, err)
	}
	if elapsed < 100*time.Millisecond || elapsed > 5*time.Second {
		t.Errorf("blast took %v for a 100ms budget", elapsed)
	}
}
