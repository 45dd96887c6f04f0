package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/bgprouter"
	"github.com/loutres/juneau/test/netns"
)

// Tests against real routers: BIRD 2 and FRR's bgpd in a router network namespace, the
// speaker in a process of its own in the Node's namespace (see main_test.go). They
// need root, bird2 and frr (hack/install-test-deps.sh).

var (
	nodeAddr   = netip.MustParseAddr("10.225.51.11")
	routerAddr = netip.MustParseAddr("10.225.51.1")
)

const (
	routerASN   = 64512
	nodeASN     = 64513
	nodeNextHop = "10.225.51.11"
)

type topology struct {
	node, router *netns.NS
}

// newTopology makes two namespaces joined by a veth: the Node (10.225.51.11/24) and
// the router (10.225.51.1/24 plus the extra addresses given, for more sessions).
func newTopology(t *testing.T, extra ...string) topology {
	t.Helper()
	tp := topology{node: netns.New(t, "node"), router: netns.New(t, "rtr")}
	netns.Veth(tp.node, "eth0", tp.router, "eth0")
	tp.node.Addr("eth0", nodeAddr.String()+"/24")
	tp.router.Addr("eth0", routerAddr.String()+"/24")
	for _, a := range extra {
		tp.router.Addr("eth0", a+"/24")
	}
	return tp
}

func speakerConfig() Config {
	return Config{RouterID: nodeAddr, ConnectRetry: 2 * time.Second, RestartTime: 120 * time.Second}
}

func nodePeer(name string, addr netip.Addr) Peer {
	return Peer{Name: name, Address: addr, PeerASN: routerASN, MyASN: nodeASN}
}

// pool is the bgp pool of the tests: routers accept /32s inside it only.
var pool = netip.MustParsePrefix("10.225.53.0/24")

// birdWithNode starts BIRD on 10.225.51.1 accepting the Node as session "node_a", and
// /32s of the pool from it.
func birdWithNode(t *testing.T, tp topology) *bgprouter.BIRD {
	return bgprouter.StartBIRD(t, tp.router, bgprouter.Config{RouterID: routerAddr, AS: routerASN, Accept: pool, Neighbors: []bgprouter.Neighbor{
		{Name: "node_a", Local: routerAddr, Address: nodeAddr, AS: nodeASN},
	}})
}

func viaNode(prefixes ...string) map[string]string {
	out := map[string]string{}
	for _, p := range prefixes {
		out[p] = nodeNextHop
	}
	return out
}

// importStats reads the "Import updates" and "Import withdraws" rows (received column)
// of `show protocols all`.
var importRow = regexp.MustCompile(`Import (updates|withdraws):\s+(\d+)`)

func importStats(t *testing.T, bird *bgprouter.BIRD, protocol string) (updates, withdraws int) {
	t.Helper()
	out, err := bird.Protocol(protocol)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range importRow.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[2])
		if m[1] == "updates" {
			updates = n
		} else {
			withdraws = n
		}
	}
	return updates, withdraws
}

func established(p PeerStatus) bool { return p.State == v1alpha1.BGPSessionEstablished }

// TestBIRDAnnounces: the session comes up, announced /32s appear in BIRD's table via
// the Node (next hop self, AS path of myASN), a changed set moves only the difference,
// and an empty set withdraws everything. BIRD's import filter of docs/bgp.md keeps a /32
// outside the pool out of its table.
func TestBIRDAnnounces(t *testing.T) {
	tp := newTopology(t)
	bird := birdWithNode(t, tp)
	start := time.Now()
	sp := startSpeaker(t, tp.node, speakerSpec{Config: speakerConfig(), Peers: []Peer{nodePeer("tor-a", routerAddr)},
		Prefixes: prefixes("10.225.53.7/32", "10.225.53.8/32", "10.225.54.1/32")})
	bird.WaitRoutes(30*time.Second, viaNode("10.225.53.7/32", "10.225.53.8/32"))
	t.Logf("session up and 2 routes in BIRD %s after the speaker started", time.Since(start).Round(time.Millisecond))
	bird.WaitEstablished("node_a", 10*time.Second)
	p := sp.waitPeer("tor-a", 10*time.Second, func(p PeerStatus) bool { return established(p) && p.PrefixesAnnounced == 3 })
	before := bird.WaitRoutes(time.Second, viaNode("10.225.53.7/32", "10.225.53.8/32"))
	u0, w0 := importStats(t, bird, "node_a")
	if p.Message != "" || p.Since.Before(start) {
		t.Errorf("tor-a: %+v", p)
	}
	out, err := bird.Command("show", "route", "all", "10.225.53.7/32")
	if err != nil || !strings.Contains(out, "BGP.as_path: 64513") || !strings.Contains(out, "BGP.next_hop: 10.225.51.11") {
		t.Errorf("route attributes (want AS path 64513, next hop the Node): %v\n%s", err, out)
	}

	// One prefix goes, one comes, one stays untouched.
	sp.setPrefixes(prefixes("10.225.53.8/32", "10.225.53.9/32", "10.225.54.1/32")...)
	start = time.Now()
	after := bird.WaitRoutes(10*time.Second, viaNode("10.225.53.8/32", "10.225.53.9/32"))
	t.Logf("changed set in BIRD after %s", time.Since(start).Round(time.Millisecond))
	if !bgprouter.SameSince(after["10.225.53.8/32"], before["10.225.53.8/32"]) {
		t.Errorf("the unchanged route was replaced: %v then %v", before["10.225.53.8/32"], after["10.225.53.8/32"])
	}
	if u, w := importStats(t, bird, "node_a"); u != u0+1 || w != w0+1 {
		t.Errorf("BIRD received %d updates and %d withdraws for the change, want 1 and 1: only the difference moves", u-u0, w-w0)
	}
	sp.waitPeer("tor-a", 10*time.Second, func(p PeerStatus) bool { return p.PrefixesAnnounced == 3 })

	sp.setPrefixes()
	start = time.Now()
	bird.WaitRoutes(10*time.Second, nil)
	t.Logf("withdrawn from BIRD after %s", time.Since(start).Round(time.Millisecond))
	if u, w := importStats(t, bird, "node_a"); u != u0+1 || w != w0+4 {
		t.Errorf("BIRD received %d updates and %d withdraws since the first set, want 1 and 4", u-u0, w-w0)
	}
	sp.waitPeer("tor-a", 10*time.Second, func(p PeerStatus) bool { return established(p) && p.PrefixesAnnounced == 0 })
}

// segment is a Node and several routers on one bridge (in a namespace of its own).
type segment struct {
	seg     *netns.NS // holds the bridge br0; the node's port is n0, the routers' r0, r1, ...
	node    *netns.NS
	routers map[string]*netns.NS // by address
}

func newSegment(t *testing.T, routers ...string) segment {
	t.Helper()
	seg := netns.New(t, "seg")
	seg.Bridge("br0")
	sg := segment{seg: seg, node: netns.New(t, "node"), routers: map[string]*netns.NS{}}
	join := func(ns *netns.NS, port, addr string) {
		netns.Veth(seg, port, ns, "eth0")
		seg.SetMaster(port, "br0")
		ns.Addr("eth0", addr+"/24")
	}
	join(sg.node, "n0", nodeAddr.String())
	for i, a := range routers {
		sg.routers[a] = netns.New(t, "rtr")
		join(sg.routers[a], fmt.Sprintf("r%d", i), a)
	}
	return sg
}

// TestBIRDSessionErrors: each kind of misconfiguration shows in the status in its own
// words, and nothing is announced in those sessions. One BIRD per router address,
// each in its own namespace.
func TestBIRDSessionErrors(t *testing.T) {
	sg := newSegment(t, "10.225.51.1", "10.225.51.2", "10.225.51.3", "10.225.51.4", "10.225.51.5", "10.225.51.6", "10.225.51.7")
	addr := netip.MustParseAddr
	bird := func(a string, n ...bgprouter.Neighbor) *bgprouter.BIRD {
		return bgprouter.StartBIRD(t, sg.routers[a], bgprouter.Config{RouterID: addr(a), AS: routerASN, Neighbors: n})
	}
	good := bird("10.225.51.1", bgprouter.Neighbor{Name: "node_a", Local: addr("10.225.51.1"), Address: nodeAddr, AS: nodeASN})
	others := map[string]*bgprouter.BIRD{
		"tor-asn":   bird("10.225.51.2", bgprouter.Neighbor{Name: "node_a", Local: addr("10.225.51.2"), Address: nodeAddr, AS: nodeASN}),
		"tor-myasn": bird("10.225.51.3", bgprouter.Neighbor{Name: "node_a", Local: addr("10.225.51.3"), Address: nodeAddr, AS: 65001}),
		"tor-md5":   bird("10.225.51.4", bgprouter.Neighbor{Name: "node_a", Local: addr("10.225.51.4"), Address: nodeAddr, AS: nodeASN, Password: "right"}),
	}
	signed := bird("10.225.51.7", bgprouter.Neighbor{Name: "node_a", Local: addr("10.225.51.7"), Address: nodeAddr, AS: nodeASN, Password: "right"})
	// A router that has other neighbors, not this Node.
	bird("10.225.51.6", bgprouter.Neighbor{Name: "node_b", Local: addr("10.225.51.6"), Address: addr("10.225.51.200"), AS: nodeASN})
	// Nothing listens on 10.225.51.5; no host has 10.225.51.99.

	wrongPeerASN := nodePeer("tor-asn", addr("10.225.51.2"))
	wrongPeerASN.PeerASN = 65000
	wrongPassword := nodePeer("tor-md5", addr("10.225.51.4"))
	wrongPassword.Password = "wrong"
	rightPassword := nodePeer("tor-md5-ok", addr("10.225.51.7"))
	rightPassword.Password = "right"
	sp := startSpeaker(t, sg.node, speakerSpec{Config: speakerConfig(), Prefixes: prefixes("10.225.53.7/32"), Peers: []Peer{
		nodePeer("tor-good", addr("10.225.51.1")),
		wrongPeerASN,
		nodePeer("tor-myasn", addr("10.225.51.3")),
		wrongPassword,
		rightPassword,
		nodePeer("tor-closed", addr("10.225.51.5")),
		nodePeer("tor-unknown", addr("10.225.51.6")),
		nodePeer("tor-gone", addr("10.225.51.99")),
	}})
	for _, want := range []struct {
		peer    string
		state   v1alpha1.BGPSessionState
		message string
	}{
		{"tor-good", v1alpha1.BGPSessionEstablished, ""},
		{"tor-md5-ok", v1alpha1.BGPSessionEstablished, ""},
		{"tor-asn", v1alpha1.BGPSessionWrongASN, "AS number other than peerASN 65000"},
		{"tor-myasn", v1alpha1.BGPSessionWrongASN, "another AS number than myASN 64513"},
		{"tor-md5", v1alpha1.BGPSessionAuthenticationFailed, "TCP-MD5 password"},
		{"tor-closed", v1alpha1.BGPSessionRefused, "refused the TCP connection to port 179"},
		{"tor-unknown", v1alpha1.BGPSessionRefused, "closed the connection before the session was established"},
		{"tor-gone", v1alpha1.BGPSessionUnreachable, ""},
	} {
		p := sp.waitPeer(want.peer, 60*time.Second, func(p PeerStatus) bool { return p.State == want.state })
		if !strings.Contains(p.Message, want.message) {
			t.Errorf("%s: message %q lacks %q", want.peer, p.Message, want.message)
		}
		t.Logf("%s: %s: %s", p.Name, p.State, p.Message)
	}
	good.WaitRoutes(10*time.Second, viaNode("10.225.53.7/32"))
	signed.WaitRoutes(10*time.Second, viaNode("10.225.53.7/32"))
	for name, b := range others {
		if ok, err := b.Established("node_a"); ok || err != nil {
			t.Errorf("%s: BIRD's session is Established (%v)", name, err)
		}
		if routes, err := b.Routes(); err != nil || len(routes) != 0 {
			t.Errorf("%s: BIRD has routes %v (%v), want none", name, routes, err)
		}
	}
	sp.waitPeer("tor-good", 10*time.Second, func(p PeerStatus) bool { return p.PrefixesAnnounced == 1 })
	sp.waitPeer("tor-md5-ok", 10*time.Second, func(p PeerStatus) bool { return p.PrefixesAnnounced == 1 })
	if st := sp.current(); st.AnnouncedTo(netip.MustParsePrefix("10.225.53.7/32")) != 2 || st.Established() != 2 {
		t.Errorf("announced to %d of %d Established peers, want 2 of 2", st.AnnouncedTo(netip.MustParsePrefix("10.225.53.7/32")), st.Established())
	}
}

// routeWatcher polls BIRD's table as fast as birdc answers and records every poll in
// which a prefix that must stay was missing.
type routeWatcher struct {
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	must   []string
	polls  int
	misses []string
}

func watchRoutes(t *testing.T, bird *bgprouter.BIRD, must ...string) *routeWatcher {
	w := &routeWatcher{stop: make(chan struct{}), done: make(chan struct{}), must: must}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			routes, err := bird.Routes()
			w.mu.Lock()
			w.polls++
			for _, p := range w.must {
				if _, ok := routes[p]; !ok || err != nil {
					w.misses = append(w.misses, fmt.Sprintf("%s missing at %s (%v)", p, time.Now().Format(time.StampMilli), err))
				}
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.finish() })
	return w
}

// finish stops the watcher and returns the number of polls and the misses.
func (w *routeWatcher) finish() (int, []string) {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.polls, w.misses
}

// waitGracefulRestart polls `show protocols all` until BIRD says it keeps the Node's
// routes for a restarting neighbor.
func waitGracefulRestart(t *testing.T, bird *bgprouter.BIRD, protocol string) {
	t.Helper()
	var out string
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		var err error
		out, err = bird.Protocol(protocol)
		return strings.Contains(out, "Neighbor graceful restart active"), err
	})
	if err != nil {
		t.Fatalf("BIRD did not start graceful restart for %s: %v\n%s", protocol, err, out)
	}
}

// waitRecovered polls until the session is Established again, BIRD has left graceful
// restart, and it received the routes again (updates counted since the start).
func waitRecovered(t *testing.T, bird *bgprouter.BIRD, protocol string, updates int) {
	t.Helper()
	var out string
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		var err error
		if out, err = bird.Protocol(protocol); err != nil {
			return false, err
		}
		u, _ := importStats(t, bird, protocol)
		return strings.Contains(out, "BGP state:          Established") && !strings.Contains(out, "graceful restart active") && u >= updates, nil
	})
	if err != nil {
		t.Fatalf("BIRD session %s did not recover: %v\n%s", protocol, err, out)
	}
}

// TestBIRDGracefulRestartAfterKill: the speaker is killed (SIGKILL) and started again,
// announcing one of its two prefixes and a new one. BIRD keeps both old routes while
// the speaker is away; after the restart the kept prefix was never missing, the dropped
// one is gone and the new one is there.
func TestBIRDGracefulRestartAfterKill(t *testing.T) {
	tp := newTopology(t)
	bird := birdWithNode(t, tp)
	spec := speakerSpec{Config: speakerConfig(), Peers: []Peer{nodePeer("tor-a", routerAddr)},
		Prefixes: prefixes("10.225.53.7/32", "10.225.53.8/32")}
	sp := startSpeaker(t, tp.node, spec)
	bird.WaitRoutes(30*time.Second, viaNode("10.225.53.7/32", "10.225.53.8/32"))
	bird.WaitEstablished("node_a", 10*time.Second)

	watch := watchRoutes(t, bird, "10.225.53.7/32")
	sp.stop(syscall.SIGKILL)
	down := time.Now()
	waitGracefulRestart(t, bird, "node_a")
	stale := bird.WaitRoutes(time.Second, viaNode("10.225.53.7/32", "10.225.53.8/32")) // kept, marked stale

	spec.Prefixes = prefixes("10.225.53.7/32", "10.225.53.9/32")
	sp = startSpeaker(t, tp.node, spec)
	waitRecovered(t, bird, "node_a", 4)
	fresh := bird.WaitRoutes(10*time.Second, viaNode("10.225.53.7/32", "10.225.53.9/32"))
	t.Logf("recovered %s after the kill", time.Since(down).Round(time.Millisecond))
	// On the wire: the restarted speaker set the Restart State bit and kept the
	// forwarding state of both families it offers (without it BIRD flushes the stale routes at once and
	// only a quick re-announcement hides the gap).
	if out, err := bird.Protocol("node_a"); err != nil || !regexp.MustCompile(
		`Neighbor capabilities(?s:.*)Graceful restart\s+Restart time: 120\s+Restart recovery\s+AF supported: ipv4 ipv6\s+AF preserved: ipv4 ipv6`).MatchString(out) {
		t.Errorf("the restarted speaker did not declare a restart with preserved forwarding of IPv4 and IPv6: %v\n%s", err, out)
	}
	// BIRD re-timestamps a route it removes and learns again, not one refreshed in place.
	if !bgprouter.SameSince(fresh["10.225.53.7/32"], stale["10.225.53.7/32"]) {
		t.Errorf("BIRD dropped and relearned 10.225.53.7/32 (%s, then %s): the restarted speaker did not keep its forwarding state",
			stale["10.225.53.7/32"].Since, fresh["10.225.53.7/32"].Since)
	}
	sp.waitPeer("tor-a", 10*time.Second, func(p PeerStatus) bool { return established(p) && p.PrefixesAnnounced == 2 })

	polls, misses := watch.finish()
	if len(misses) > 0 {
		t.Errorf("10.225.53.7/32 was missing from BIRD's table in %d of %d polls: %s", len(misses), polls, misses[0])
	}
	if polls < 20 {
		t.Errorf("only %d polls of BIRD's table: the watch proves nothing", polls)
	}
	t.Logf("10.225.53.7/32 present in all %d polls of BIRD's table across the restart", polls)
	// 10.225.53.8/32 went away when the graceful restart ended, not as a withdrawal.
	if _, w := importStats(t, bird, "node_a"); w != 0 {
		t.Errorf("BIRD received %d withdraws, want 0", w)
	}
}

// TestBIRDStop: a normal stop (SIGTERM) keeps the routes in BIRD, as a kill does,
// unless WithdrawOnStop, which withdraws them at once.
func TestBIRDStop(t *testing.T) {
	tp := newTopology(t)
	bird := birdWithNode(t, tp)
	spec := speakerSpec{Config: speakerConfig(), Peers: []Peer{nodePeer("tor-a", routerAddr)}, Prefixes: prefixes("10.225.53.7/32")}
	sp := startSpeaker(t, tp.node, spec)
	bird.WaitRoutes(30*time.Second, viaNode("10.225.53.7/32"))

	watch := watchRoutes(t, bird, "10.225.53.7/32")
	sp.stop(syscall.SIGTERM)
	if !strings.Contains(sp.log(), "BGP speaker stopped") {
		t.Errorf("the speaker did not stop normally:\n%s", sp.log())
	}
	waitGracefulRestart(t, bird, "node_a")
	sp = startSpeaker(t, tp.node, spec)
	waitRecovered(t, bird, "node_a", 2)
	if polls, misses := watch.finish(); len(misses) > 0 {
		t.Errorf("the route was missing in %d of %d polls across a normal restart: %s", len(misses), polls, misses[0])
	}

	// The same Node stopping for good.
	sp.stop(syscall.SIGKILL)
	spec.Config.WithdrawOnStop = true
	sp = startSpeaker(t, tp.node, spec)
	waitRecovered(t, bird, "node_a", 3)
	sp.stop(syscall.SIGTERM)
	start := time.Now()
	bird.WaitRoutes(5*time.Second, nil)
	t.Logf("withdrawn %s after SIGTERM with WithdrawOnStop", time.Since(start).Round(time.Millisecond))
	if out, _ := bird.Protocol("node_a"); strings.Contains(out, "graceful restart active") {
		t.Errorf("BIRD waits for a restart after a withdrawing stop:\n%s", out)
	}

	// Decided only at the stop (SetWithdrawOnStop), as the node agent does when it finds
	// juneau uninstalled.
	spec.Config.WithdrawOnStop = false
	sp = startSpeaker(t, tp.node, spec)
	bird.WaitRoutes(30*time.Second, viaNode("10.225.53.7/32"))
	sp.stop(syscall.SIGUSR1)
	bird.WaitRoutes(5*time.Second, nil)
	if out, _ := bird.Protocol("node_a"); strings.Contains(out, "graceful restart active") {
		t.Errorf("BIRD waits for a restart after a stop that chose to withdraw:\n%s", out)
	}
}

// TestBIRDMultihop: a router one hop away is reached with an eBGP multihop TTL of 2,
// and not without it (the hop drops the TTL 1 connection attempts).
func TestBIRDMultihop(t *testing.T) {
	node, hop, rtr := netns.New(t, "node"), netns.New(t, "hop"), netns.New(t, "rtr")
	netns.Veth(node, "eth0", hop, "eth0")
	netns.Veth(hop, "eth1", rtr, "eth0")
	node.Addr("eth0", nodeAddr.String()+"/24")
	hop.Addr("eth0", "10.225.51.1/24")
	hop.Addr("eth1", "10.225.52.1/24")
	rtr.Addr("eth0", "10.225.52.2/24")
	hop.Sysctl("net/ipv4/ip_forward", "1")
	node.Route("10.225.52.0/24", "10.225.51.1", "")
	rtr.Route("10.225.51.0/24", "10.225.52.1", "")
	far := netip.MustParseAddr("10.225.52.2")
	bird := bgprouter.StartBIRD(t, rtr, bgprouter.Config{RouterID: far, AS: routerASN, Neighbors: []bgprouter.Neighbor{
		{Name: "node_a", Local: far, Address: nodeAddr, AS: nodeASN, Multihop: true},
	}})

	direct := nodePeer("tor-far", far)
	sp := startSpeaker(t, node, speakerSpec{Config: speakerConfig(), Peers: []Peer{direct}, Prefixes: prefixes("10.225.53.7/32")})
	p := sp.waitPeer("tor-far", 30*time.Second, func(p PeerStatus) bool { return p.State == v1alpha1.BGPSessionUnreachable })
	t.Logf("without multihop: %s: %s", p.State, p.Message)

	multihop := direct
	multihop.EBGPMultihopTTL = 2
	sp.setPeers(multihop)
	sp.waitPeer("tor-far", 30*time.Second, func(p PeerStatus) bool { return established(p) && p.PrefixesAnnounced == 1 })
	bird.WaitEstablished("node_a", 10*time.Second)
	out, err := bird.Command("show", "route", "all", "10.225.53.7/32")
	if err != nil || !strings.Contains(out, "BGP.next_hop: 10.225.51.11") {
		t.Errorf("BIRD's route (want next hop the Node): %v\n%s", err, out)
	}
}

// TestBIRDInternal: an iBGP session (peerASN = myASN) carries the /32 with an empty AS
// path and LOCAL_PREF 100, next hop the Node.
func TestBIRDInternal(t *testing.T) {
	tp := newTopology(t)
	bird := bgprouter.StartBIRD(t, tp.router, bgprouter.Config{RouterID: routerAddr, AS: routerASN, Accept: pool, Neighbors: []bgprouter.Neighbor{
		{Name: "node_a", Local: routerAddr, Address: nodeAddr, AS: routerASN},
	}})
	internal := nodePeer("tor-a", routerAddr)
	internal.MyASN = routerASN
	startSpeaker(t, tp.node, speakerSpec{Config: speakerConfig(), Peers: []Peer{internal}, Prefixes: prefixes("10.225.53.7/32")})
	bird.WaitRoutes(30*time.Second, viaNode("10.225.53.7/32"))
	out, err := bird.Command("show", "route", "all", "10.225.53.7/32")
	if err != nil || !regexp.MustCompile(`BGP.as_path: *\n`).MatchString(out) || !strings.Contains(out, "BGP.local_pref: 100") ||
		!strings.Contains(out, "BGP.next_hop: 10.225.51.11") || !strings.Contains(out, "[i]") {
		t.Errorf("iBGP route (want an empty AS path, LOCAL_PREF 100, next hop the Node): %v\n%s", err, out)
	}
}

// TestFRRAnnouncesAndWithdraws: the same speaker against FRR's bgpd.
func TestFRRAnnouncesAndWithdraws(t *testing.T) {
	tp := newTopology(t)
	frr := bgprouter.StartFRR(t, tp.router, bgprouter.Config{RouterID: routerAddr, AS: routerASN, Accept: pool, Neighbors: []bgprouter.Neighbor{
		{Name: "node_a", Local: routerAddr, Address: nodeAddr, AS: nodeASN},
	}})
	sp := startSpeaker(t, tp.node, speakerSpec{Config: speakerConfig(), Peers: []Peer{nodePeer("tor-a", routerAddr)},
		Prefixes: prefixes("10.225.53.7/32", "10.225.53.8/32", "10.225.54.1/32")})
	frr.WaitRoutes(30*time.Second, viaNode("10.225.53.7/32", "10.225.53.8/32"))
	sp.waitPeer("tor-a", 10*time.Second, func(p PeerStatus) bool { return established(p) && p.PrefixesAnnounced == 3 })
	sp.setPrefixes(prefixes("10.225.53.8/32", "10.225.53.9/32")...)
	frr.WaitRoutes(10*time.Second, viaNode("10.225.53.8/32", "10.225.53.9/32"))
	sp.setPrefixes()
	frr.WaitRoutes(10*time.Second, nil)
}

// TestBIRDAnnouncesIPv6: an IPv6 /128 rides the IPv4 session (MP-BGP, BIRD's ipv6
// channel) with the Node's IPv6 address as next hop, beside the IPv4 /32s, and is
// withdrawn on its own.
func TestBIRDAnnouncesIPv6(t *testing.T) {
	tp := newTopology(t)
	tp.node.Addr("eth0", "fd00:225:51::11/64")
	tp.router.Addr("eth0", "fd00:225:51::1/64")
	bird := bgprouter.StartBIRD(t, tp.router, bgprouter.Config{RouterID: routerAddr, AS: routerASN, Accept: pool,
		Accept6: netip.MustParsePrefix("fd00:225:53::/64"), Neighbors: []bgprouter.Neighbor{
			{Name: "node_a", Local: routerAddr, Address: nodeAddr, AS: nodeASN},
		}})
	cfg := speakerConfig()
	cfg.NextHop6 = netip.MustParseAddr("fd00:225:51::11")
	sp := startSpeaker(t, tp.node, speakerSpec{Config: cfg, Peers: []Peer{nodePeer("tor-a", routerAddr)},
		Prefixes: prefixes("10.225.53.7/32", "fd00:225:53::7/128", "fd00:225:54::1/128")})
	bird.WaitRoutes(30*time.Second, map[string]string{"10.225.53.7/32": nodeNextHop, "fd00:225:53::7/128": "fd00:225:51::11"})
	sp.waitPeer("tor-a", 10*time.Second, func(p PeerStatus) bool {
		return established(p) && p.PrefixesAnnounced == 3 && p.IPv6Announced == 2
	})

	sp.setPrefixes(prefixes("10.225.53.7/32")...)
	bird.WaitRoutes(10*time.Second, viaNode("10.225.53.7/32"))
	sp.waitPeer("tor-a", 10*time.Second, func(p PeerStatus) bool { return p.PrefixesAnnounced == 1 && p.IPv6Announced == 0 })
}
