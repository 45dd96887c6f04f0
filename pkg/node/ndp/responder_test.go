package ndp

import (
	"context"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/node/sysctl"
	"github.com/loutres/juneau/test/netns"
	"github.com/loutres/juneau/test/require"
)

// Addresses on the test segment; they exist only in the test's namespaces.
const (
	clientIP = "2001:db8:51::100"
	node1IP  = "2001:db8:51::2"
	node2IP  = "2001:db8:51::3"
	eipA     = "2001:db8:51::5" // owned by node1 first, then by node2
	eipB     = "2001:db8:51::6" // owned by node2
	eipNone  = "2001:db8:51::7" // owned by nobody
)

type lan struct {
	lan, client, node1, node2 *netns.NS
}

// newLAN puts a client and two nodes on one bridge, the external network.
func newLAN(t *testing.T) *lan {
	t.Helper()
	require.Root(t)
	require.Binary(t, "ndisc6")
	s := netns.NewLAN(t, "6", clientIP+"/64", node1IP+"/64", node2IP+"/64")
	l := &lan{lan: s.Bridge, client: s.Client, node1: s.Node1, node2: s.Node2}
	for _, n := range []*netns.NS{l.node1, l.node2} {
		n.MustDo(func() error { return sysctl.New().Apply(sysctl.ExternalInterface("ext0")) })
	}
	return l
}

// startResponder runs a responder for ext0 inside ns until the test ends.
func startResponder(t *testing.T, ns *netns.NS, owned ...string) *Responder {
	t.Helper()
	r := NewResponder("ext0")
	r.SetAddresses(addrs(owned...))
	ns.Serve(r.Run)
	return r
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

var ndiscAnswer = regexp.MustCompile(`(?i)Target link-layer address: ([0-9a-f:]{17})`)

// ndisc asks for ip from the client with multicast solicitations and returns
// every MAC that answered, lower case.
func (l *lan) ndisc(t *testing.T, ip string) []string {
	t.Helper()
	out, _ := l.client.Output("ndisc6", "-n", "-m", "-r", "2", "-w", "300", ip, "eth0")
	var macs []string
	for _, m := range ndiscAnswer.FindAllStringSubmatch(out, -1) {
		macs = append(macs, strings.ToLower(m[1]))
	}
	slices.Sort(macs)
	return slices.Compact(macs)
}

// ndiscAnswered asks until someone answers (a loaded machine may answer
// late) or ten seconds pass.
func (l *lan) ndiscAnswered(t *testing.T, ip string) []string {
	t.Helper()
	var macs []string
	_ = wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) {
			macs = l.ndisc(t, ip)
			return len(macs) > 0, nil
		})
	return macs
}

// TestResponderAnswersOwnedOnly: each node answers for its own addresses
// with its MAC and nothing else; nobody answers for an address no node owns
// (the kernel does not answer for addresses it does not hold); after a move
// only the new owner answers.
func TestResponderAnswersOwnedOnly(t *testing.T) {
	l := newLAN(t)
	r1 := startResponder(t, l.node1, eipA)
	r2 := startResponder(t, l.node2, eipB)
	mac1, mac2 := l.node1.MAC("ext0").String(), l.node2.MAC("ext0").String()

	if got := l.ndiscAnswered(t, eipA); !slices.Equal(got, []string{mac1}) {
		t.Errorf("answers for %s: %v, want node1's %s only", eipA, got, mac1)
	}
	if got := l.ndiscAnswered(t, eipB); !slices.Equal(got, []string{mac2}) {
		t.Errorf("answers for %s: %v, want node2's %s only", eipB, got, mac2)
	}
	if got := l.ndisc(t, eipNone); len(got) != 0 {
		t.Errorf("answers for unowned %s: %v", eipNone, got)
	}
	// The nodes' own addresses are the kernel's, answered as usual.
	if got := l.ndiscAnswered(t, node1IP); !slices.Equal(got, []string{mac1}) {
		t.Errorf("answers for node1's own address: %v", got)
	}

	// The NIC's multicast filter lets the solicited-node group of an owned
	// address in: the socket joined it (a veth passes every group anyway).
	const groupA = "3333ff000005"
	if !joined(t, l.node1, groupA) || joined(t, l.node2, groupA) {
		t.Errorf("group of %s joined on node1 %v, node2 %v; want node1 only", eipA, joined(t, l.node1, groupA), joined(t, l.node2, groupA))
	}

	r1.SetAddresses(nil)
	r2.SetAddresses(addrs(eipA, eipB))
	if got := l.ndiscAnswered(t, eipA); !slices.Equal(got, []string{mac2}) {
		t.Errorf("after the move, answers for %s: %v, want node2's %s only", eipA, got, mac2)
	}
	if joined(t, l.node1, groupA) || !joined(t, l.node2, groupA) {
		t.Errorf("after the move, group joined on node1 %v, node2 %v; want node2 only", joined(t, l.node1, groupA), joined(t, l.node2, groupA))
	}
	if r1.Replies() == 0 || r2.Replies() == 0 || r1.Requests() < r1.Replies() {
		t.Errorf("counters: node1 %d/%d, node2 %d/%d (replies/requests)", r1.Replies(), r1.Requests(), r2.Replies(), r2.Requests())
	}
}

// TestResponderAnswersUnicast: once the client knows the address, its
// reachability checks are unicast solicitations to the node's MAC, which the
// node's own IPv6 stack does not take; they are answered too.
func TestResponderAnswersUnicast(t *testing.T) {
	l := newLAN(t)
	startResponder(t, l.node1, eipA)
	if got := l.ndiscAnswered(t, eipA); len(got) != 1 {
		t.Fatalf("multicast solicitation answered by %v", got)
	}
	l.client.Neigh("eth0", eipA, l.node1.MAC("ext0"))
	cap := l.client.Capture("eth0")
	l.client.SendNeighborSolicitation(eipA)
	f, err := cap.WaitFor(5*time.Second, func(f netns.Frame) bool {
		p, ok := netns.ParseFrame6(f.Data)
		return ok && !f.Outgoing && p.Next == netns.ProtoICMPv6 && len(p.Payload) > 0 && p.Payload[0] == 136 &&
			p.Src == netip.MustParseAddr(eipA) && p.Dst == netip.MustParseAddr(clientIP)
	})
	if err != nil {
		t.Fatalf("no advertisement answered the unicast solicitation: %v", err)
	}
	p, _ := netns.ParseFrame6(f.Data)
	if ok, checked := p.L4ChecksumOK(); !ok || !checked || p.HopLimit != 255 || p.Payload[4]&0x60 != 0x60 {
		t.Errorf("advertisement: checksum %v/%v, hop limit %d, flags %#x (want solicited and override)", ok, checked, p.HopLimit, p.Payload[4])
	}
}

// joined reports whether ext0 in ns is a member of an Ethernet group (hex,
// as /proc/net/dev_mcast lists it).
func joined(t *testing.T, ns *netns.NS, group string) bool {
	t.Helper()
	var out []byte
	ns.MustDo(func() (err error) {
		out, err = os.ReadFile("/proc/thread-self/net/dev_mcast") // this thread is in ns
		return err
	})
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 5 && f[1] == "ext0" && f[4] == group {
			return true
		}
	}
	return false
}

var allMultiCount = regexp.MustCompile(`allmulti (\d+)`)

// TestResponderTakesEveryMulticastFramePastMaxGroups: with more solicited-node groups
// than maxGroups the socket takes every multicast frame (the interface in ALLMULTI, no
// group joined one by one) and still answers; with half as many it joins each group
// again and the interface leaves ALLMULTI.
func TestResponderTakesEveryMulticastFramePastMaxGroups(t *testing.T) {
	// Restored after the responder stops (cleanups run last first).
	was := maxGroups
	t.Cleanup(func() { maxGroups = was })
	maxGroups = 2
	l := newLAN(t)
	const groupA, eipC = "3333ff000005", "2001:db8:51::8"
	r := startResponder(t, l.node1, eipA, eipB, eipC)
	mac1 := l.node1.MAC("ext0").String()
	// The interface's count of all-multicast users (a socket's membership is not in
	// its flags).
	allMulti := func() bool {
		out, err := l.node1.Output("ip", "-d", "link", "show", "ext0")
		if err != nil {
			t.Fatal(err, out)
		}
		m := allMultiCount.FindStringSubmatch(out)
		return m != nil && m[1] != "0"
	}
	wantMode := func(every bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true,
			func(context.Context) (bool, error) {
				return allMulti() == every && joined(t, l.node1, groupA) == !every, nil
			}); err != nil {
			t.Fatalf("ALLMULTI %v and group %s joined %v; want ALLMULTI %v", allMulti(), groupA, joined(t, l.node1, groupA), every)
		}
	}
	wantMode(true)
	for _, ip := range []string{eipA, eipC} {
		if got := l.ndiscAnswered(t, ip); !slices.Equal(got, []string{mac1}) {
			t.Errorf("taking every multicast frame, answers for %s: %v, want node1's %s", ip, got, mac1)
		}
	}
	r.SetAddresses(addrs(eipA))
	wantMode(false)
	if got := l.ndiscAnswered(t, eipA); !slices.Equal(got, []string{mac1}) {
		t.Errorf("back to single groups, answers for %s: %v, want node1's %s", eipA, got, mac1)
	}
	if got := l.ndisc(t, eipC); len(got) != 0 {
		t.Errorf("answers for %s, no longer owned: %v", eipC, got)
	}
}
