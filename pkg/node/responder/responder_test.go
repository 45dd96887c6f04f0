package responder

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdlayher/packet"
	"golang.org/x/net/bpf"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/node/responder/respondertest"
	"github.com/loutres/juneau/test/netns"
)

var ours = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}

// toy is a family whose frames are an Ethernet header and one byte saying what
// Decide decides: 'a' answer (if the address in the next four bytes is owned),
// 'm' malformed, anything else "not asked".
var toy = Family{
	Protocol: 0x88b5, // IEEE local experimental EtherType
	Filter:   []bpf.Instruction{bpf.RetConstant{Val: MaxFrame}},
	Accept: func(a netip.Addr) (netip.Addr, bool) {
		a = a.Unmap()
		return a, a.Is4()
	},
	NewReply: func(ours net.HardwareAddr) []byte {
		b := make([]byte, 19)
		copy(b[6:], ours)
		b[12], b[13] = 0x88, 0xb5
		return b
	},
	Decide: func(frame []byte, _ net.HardwareAddr, owns func(netip.Addr) bool, reply []byte) Reason {
		switch {
		case len(frame) < 19 || frame[14] == 'm':
			return "malformed"
		case frame[14] != 'a':
			return "not asked"
		case !owns(netip.AddrFrom4([4]byte(frame[15:]))):
			return "not owned"
		}
		copy(reply, frame[6:12])
		copy(reply[15:], frame[15:19])
		return Answer
	},
	Drops: []Drop{
		{Reason: "malformed", Label: "malformed"},
		{Reason: "not asked", Label: "not_asked"},
		{Reason: "not owned", Label: "not_owned", Request: true},
		{Reason: SendFailed, Label: "send_failed", Request: true},
	},
	LogAnswered: func(logger klog.Logger, reply []byte) {
		logger.V(4).Info("Answered toy request", "address", netip.AddrFrom4([4]byte(reply[15:])))
	},
	Log: Messages{Stopped: "Toy responder stopped", CannotSend: "Cannot send toy reply"},
}

func toyFrame(from byte, what byte, addr string) []byte {
	a := netip.MustParseAddr(addr).As4()
	return slices.Concat(bytes.Repeat([]byte{0xff}, 6), []byte{0x02, 0, 0, 0, 0, from}, []byte{0x88, 0xb5, what}, a[:])
}

func TestServe(t *testing.T) {
	r := New("ext0", &toy, Hooks{})
	r.SetAddresses([]netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("2001:db8::1")})
	conn := &respondertest.Conn{
		In: [][]byte{
			toyFrame(0x10, 'a', "10.0.0.1"),
			toyFrame(0x11, 'a', "10.0.0.2"),
			toyFrame(0x12, 'm', "10.0.0.1"),
			toyFrame(0x13, 'x', "10.0.0.1"),
			toyFrame(0x14, 'a', "10.0.0.1"), // the send fails
			toyFrame(0x15, 'a', "10.0.0.1"),
		},
		Fail: []byte{0x14},
	}
	if err := r.Serve(context.Background(), conn, ours); !errors.Is(err, respondertest.ErrDone) {
		t.Fatalf("Serve ended with %v", err)
	}
	if len(conn.Sent) != 2 || conn.To[0][5] != 0x10 || conn.To[1][5] != 0x15 || !bytes.Equal(conn.Sent[1][:6], conn.To[1]) {
		t.Errorf("replies sent to %v", conn.To)
	}
	if r.Requests() != 4 || r.Replies() != 2 {
		t.Errorf("requests %d, replies %d; want 4 and 2", r.Requests(), r.Replies())
	}
	want := map[string]uint64{"malformed": 1, "not_asked": 1, "not_owned": 1, "send_failed": 1}
	if got := r.Drops(); !mapsEqual(got, want) {
		t.Errorf("drops %v, want %v", got, want)
	}
}

func mapsEqual(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestSetAddresses: only the family's addresses are owned, as Accept gives them,
// and Changed follows every change in order, and nothing else.
func TestSetAddresses(t *testing.T) {
	var seen [][2]int
	var r *Responder
	r = New("ext0", &toy, Hooks{Changed: func(removed, added []netip.Addr) {
		for _, a := range added {
			if !r.Owns(a) {
				t.Error("Changed called before the set changed")
			}
		}
		seen = append(seen, [2]int{len(removed), len(added)})
	}})
	a := netip.MustParseAddr("10.0.0.1")
	r.SetAddresses([]netip.Addr{netip.MustParseAddr("::ffff:10.0.0.1"), netip.MustParseAddr("2001:db8::1")})
	if !r.Owns(a) || !r.Owns(netip.MustParseAddr("::ffff:10.0.0.1")) || r.Owns(netip.MustParseAddr("2001:db8::1")) {
		t.Errorf("owned %v", r.Owned())
	}
	// The same list again (the agent gives one at every sync) tells nobody.
	r.SetAddresses([]netip.Addr{netip.MustParseAddr("::ffff:10.0.0.1"), netip.MustParseAddr("2001:db8::1")})
	r.SetAddresses(nil)
	if r.Owns(a) {
		t.Error("still owned after SetAddresses(nil)")
	}
	r.SetAddresses([]netip.Addr{})
	if !slices.Equal(seen, [][2]int{{0, 1}, {1, 0}}) {
		t.Errorf("Changed saw %v", seen)
	}
}

// TestSetAddressesChanges: over random lists — sorted ones changed a few addresses at
// a time (the agent's), and now and then an unsorted one, duplicates and other
// spellings included — the owned set is always the family's addresses of the last
// list, and the changes told to Changed, applied in order, give that set.
func TestSetAddressesChanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	told := map[netip.Addr]bool{}
	r := New("ext0", &toy, Hooks{Changed: func(removed, added []netip.Addr) {
		for _, a := range removed {
			if !told[a] {
				t.Fatalf("removed %v, which was not owned", a)
			}
			delete(told, a)
		}
		for _, a := range added {
			if told[a] {
				t.Fatalf("added %v, which was owned", a)
			}
			told[a] = true
		}
	}})
	addr := func() netip.Addr {
		if rng.IntN(10) == 0 {
			return netip.MustParseAddr("2001:db8::1")
		}
		return netip.AddrFrom4([4]byte{10, 0, byte(rng.IntN(3)), byte(rng.IntN(256))})
	}
	var list []netip.Addr
	for round := range 3000 {
		switch k := rng.IntN(20); {
		case k == 0: // any list
			list = nil
			for range rng.IntN(50) {
				a := addr()
				if rng.IntN(5) == 0 {
					a = netip.AddrFrom16(a.As16()) // ::ffff:10.0.0.x, or the IPv6 one
				}
				list = append(list, a)
			}
		default: // a few sorted changes
			for range 1 + rng.IntN(3) {
				if len(list) > 0 && rng.IntN(2) == 0 {
					i := rng.IntN(len(list))
					list = slices.Delete(list, i, i+1)
				} else {
					list = append(list, addr())
				}
			}
			slices.SortFunc(list, netip.Addr.Compare)
			list = slices.Compact(list)
		}
		given := slices.Clone(list)
		r.SetAddresses(given)
		want := map[netip.Addr]bool{}
		for _, a := range list {
			if b, ok := toy.Accept(a); ok {
				want[b] = true
			}
		}
		owned := map[netip.Addr]bool{}
		for _, a := range r.Owned() {
			owned[a] = true
		}
		if !maps.Equal(owned, want) || !maps.Equal(told, want) {
			t.Fatalf("round %d: owned %v, told %v, want %v", round, owned, told, want)
		}
	}
}

func TestRunStopsWithoutInterface(t *testing.T) {
	// The interface does not exist: Run keeps retrying until ctx ends, then
	// returns nil.
	r := New("jn-missing0", &toy, Hooks{Open: func(context.Context, *net.Interface) (Session, error) {
		t.Error("Open called without an interface")
		return Session{}, nil
	}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run returned %v after cancel", err)
	}
}

// TestSessions: each socket gets a session of its own; one that fails ends the
// socket, which is opened again, and its Close runs before the next Open. A
// request that arrives is answered on the socket.
func TestSessions(t *testing.T) {
	ns := netns.New(t, "rsp")
	netns.Veth(ns, "ext0", ns, "peer0")
	var mu sync.Mutex
	var events []string
	note := func(e string) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}
	var opens atomic.Int32
	r := New("ext0", &toy, Hooks{Open: func(ctx context.Context, ifi *net.Interface) (Session, error) {
		n := opens.Add(1)
		note("open")
		return Session{
			Run: func(ctx context.Context, c *packet.Conn) error {
				if n == 1 {
					return errors.New("first session fails")
				}
				<-ctx.Done()
				return nil
			},
			Close: func() { note("close") },
		}, nil
	}})
	r.SetAddresses([]netip.Addr{netip.MustParseAddr("10.0.0.1")})
	ns.Serve(r.Run)
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return opens.Load() >= 2, nil }); err != nil {
		t.Fatalf("the socket was opened %d times, want it opened again after its session failed", opens.Load())
	}
	mu.Lock()
	if !slices.Equal(events[:3], []string{"open", "close", "open"}) {
		t.Errorf("events %v", events)
	}
	mu.Unlock()

	// A request sent from the peer is answered back to it.
	ns.MustDo(func() error {
		peer, err := net.InterfaceByName("peer0")
		if err != nil {
			return err
		}
		c, err := packet.Listen(peer, packet.Raw, int(toy.Protocol), nil)
		if err != nil {
			return err
		}
		defer c.Close()
		req := toyFrame(0, 'a', "10.0.0.1")
		copy(req[6:], peer.HardwareAddr)
		return wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true,
			func(context.Context) (bool, error) {
				if err := Send(c, req); err != nil {
					return false, err
				}
				_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
				buf := make([]byte, MaxFrame)
				n, _, err := c.ReadFrom(buf)
				return err == nil && bytes.Equal(buf[:6], peer.HardwareAddr) && n >= 19, nil
			})
	})
	if r.Replies() == 0 {
		t.Error("no reply counted")
	}
}

// TestFamilySorted: a sorted list of the family's addresses as Accept gives them is
// returned as it is; any other gives the family's addresses, accepted, sorted, once each.
func TestFamilySorted(t *testing.T) {
	addrs := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, a := range s {
			out = append(out, netip.MustParseAddr(a))
		}
		return out
	}
	sorted := addrs("10.0.0.1", "10.0.0.2")
	if got := toy.Sorted(sorted); &got[0] != &sorted[0] {
		t.Error("a sorted list of accepted addresses was copied")
	}
	got := toy.Sorted(addrs("10.0.0.3", "::ffff:10.0.0.1", "2001:db8::1", "10.0.0.1", "10.0.0.2"))
	if want := addrs("10.0.0.1", "10.0.0.2", "10.0.0.3"); !slices.Equal(got, want) {
		t.Errorf("Sorted gave %v, want %v", got, want)
	}
}

// BenchmarkSetAddressesOneChange100k: the agent's sync after one change on a Node
// answering for 100,000 addresses hands the responder the whole sorted list with one
// address more or less (docs/performance.md#scale).
func BenchmarkSetAddressesOneChange100k(b *testing.B) {
	const n = 100000
	all := make([]netip.Addr, n)
	for i := range all {
		all[i] = netip.AddrFrom4([4]byte{10, byte(230 + i>>16), byte(i >> 8), byte(i)})
	}
	changes := 0
	r := New("ext0", &toy, Hooks{Changed: func(removed, added []netip.Addr) { changes += len(removed) + len(added) }})
	r.SetAddresses(all)
	without := slices.Delete(slices.Clone(all), n/2, n/2+1)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			r.SetAddresses(without)
		} else {
			r.SetAddresses(all)
		}
		i++
	}
	if changes < n+i {
		b.Fatalf("%d changes told for %d calls", changes, i)
	}
}
