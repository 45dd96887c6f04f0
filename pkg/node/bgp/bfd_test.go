package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/bgprouter"
)

// BFD against real routers (BIRD's protocol bfd, FRR's bfdd), on a segment whose bridge
// ports the tests take down: a port down is a Node (or router) that drops off the
// network without a word, which only BFD notices quickly.

const (
	// bfdPrefix is the route the Node announces in these tests.
	bfdPrefix = "10.225.53.7/32"
	// maxDetection bounds the time from a failure to the route gone from the router:
	// with 300ms × 3 on both sides BFD declares the peer down 600–900ms after its last
	// packet; the bound leaves room for a loaded machine (the figures are logged).
	maxDetection = 2 * time.Second
)

// fastBFD is BFD at the API's defaults: 300ms, 300ms, 3.
var fastBFD = BFD{Enabled: true, MinRx: 300 * time.Millisecond, MinTx: 300 * time.Millisecond, Multiplier: 3}

func bfdPeer(name string, addr netip.Addr) Peer { return nodePeer(name, addr).withBFD(fastBFD) }

func bfdUp(p PeerStatus) bool {
	return established(p) && p.BFD == v1alpha1.BFDUp && p.PrefixesAnnounced == 1
}

// setPort sets a port of the segment's bridge up or down: the device behind it loses
// its carrier, the others on the bridge notice nothing.
func (sg segment) setPort(t *testing.T, port string, up bool) {
	t.Helper()
	nl, link := sg.seg.Netlink(), sg.seg.Link(port)
	set := nl.LinkSetDown
	if up {
		set = nl.LinkSetUp
	}
	if err := set(link); err != nil {
		t.Fatalf("setting %s up=%v: %v", port, up, err)
	}
}

// routerTable reads a router's table: prefix → next hop.
type routerTable func() (map[string]string, error)

func birdTable(b *bgprouter.BIRD) routerTable {
	return func() (map[string]string, error) {
		routes, err := b.Routes()
		out := map[string]string{}
		for p, r := range routes {
			out[p] = r.Via
		}
		return out, err
	}
}

// timeUntilGone polls the table until prefix is gone from it and returns how long
// after start that was (at the poll that found it gone).
func timeUntilGone(t *testing.T, table routerTable, prefix string, start time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	var at time.Time
	var last map[string]string
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		routes, err := table()
		if err != nil {
			return false, nil
		}
		last, at = routes, time.Now()
		_, present := routes[prefix]
		return !present, nil
	})
	if err != nil {
		t.Fatalf("%s still in the router's table %s after the failure: %v (%v)", prefix, timeout, err, last)
	}
	return at.Sub(start)
}

// tableWatch polls a router's table as fast as it answers until finish, and records
// when prefix was first missing.
type tableWatch struct {
	stop, done chan struct{}
	mu         sync.Mutex
	polls      int
	missing    time.Time
}

func watchTable(t *testing.T, table routerTable, prefix string) *tableWatch {
	w := &tableWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			routes, err := table()
			if err != nil {
				continue
			}
			w.mu.Lock()
			w.polls++
			if _, ok := routes[prefix]; !ok && w.missing.IsZero() {
				w.missing = time.Now()
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.finish() })
	return w
}

// finish stops the watch: the number of polls, and when the prefix was first missing
// (zero: never).
func (w *tableWatch) finish() (int, time.Time) {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.polls, w.missing
}

// restartSpeaker kills the speaker (SIGKILL: its TCP connections are closed by the
// kernel, the link stays up) and starts it again at once; it returns the new speaker
// once its session is back with BFD Up, and the time of the kill.
func restartSpeaker(t *testing.T, sp *speakerProcess, sg segment, spec speakerSpec) (*speakerProcess, time.Time) {
	t.Helper()
	sp.stop(syscall.SIGKILL)
	killed := time.Now()
	sp = startSpeaker(t, sg.node, spec)
	sp.waitPeer("tor-a", time.Minute, bfdUp)
	return sp, killed
}

// killNode takes the Node off the network and then kills its speaker, so nothing it
// sends reaches the router any more (no TCP FIN or RST either); it returns the time
// the port went down.
func killNode(t *testing.T, sp *speakerProcess, sg segment) time.Time {
	t.Helper()
	sg.setPort(t, "n0", false)
	failed := time.Now()
	sp.stop(syscall.SIGKILL)
	return failed
}

// TestBIRDBFD: BIRD with `bfd on`. BFD turned on under a running session comes up
// without touching it. The Node notices the router gone within the detection time and
// says so; the router drops a dead Node's route within about a second although the
// session negotiated graceful restart. The price: an agent restart drops the route
// too (BIRD ends even a session in graceful restart when BFD goes down), until the
// restarted Node announces it again.
func TestBIRDBFD(t *testing.T) {
	sg := newSegment(t, routerAddr.String())
	bird := bgprouter.StartBIRD(t, sg.routers[routerAddr.String()], bgprouter.Config{RouterID: routerAddr, AS: routerASN, Accept: pool,
		Neighbors: []bgprouter.Neighbor{{Name: "node_a", Local: routerAddr, Address: nodeAddr, AS: nodeASN, BFD: true}}})
	spec := speakerSpec{Config: speakerConfig(), Peers: []Peer{nodePeer("tor-a", routerAddr)}, Prefixes: prefixes(bfdPrefix)}
	sp := startSpeaker(t, sg.node, spec)
	before := bird.WaitRoutes(30*time.Second, viaNode(bfdPrefix))
	sp.waitPeer("tor-a", 10*time.Second, func(p PeerStatus) bool { return established(p) && p.BFD == "" })

	// BFD on, under the running session.
	spec.Peers = []Peer{bfdPeer("tor-a", routerAddr)}
	sp.setPeers(spec.Peers...)
	bird.WaitBFD(nodeAddr.String(), "Up", 30*time.Second)
	p := sp.waitPeer("tor-a", 10*time.Second, bfdUp)
	if after := bird.WaitRoutes(time.Second, viaNode(bfdPrefix)); !bgprouter.SameSince(before[bfdPrefix], after[bfdPrefix]) {
		t.Errorf("turning BFD on replaced the session: BIRD relearned the route (%s, then %s)", before[bfdPrefix].Since, after[bfdPrefix].Since)
	}
	out, _ := bird.Command("show", "bfd", "sessions")
	t.Logf("tor-a: %s, BFD %s; birdc show bfd sessions:\n%s", p.State, p.BFD, out)

	// The router drops off the network: the Node notices through BFD.
	sg.setPort(t, "r0", false)
	failed := time.Now()
	p = sp.waitPeer("tor-a", 10*time.Second, func(p PeerStatus) bool { return !established(p) })
	noticed := time.Since(failed)
	if p.State != v1alpha1.BGPSessionUnreachable || !strings.Contains(p.Message, "no BFD packet from the router") || p.BFD != v1alpha1.BFDDown {
		t.Errorf("status once the router is gone: %+v, want Unreachable, BFD Down, with BFD's reason", p)
	}
	if noticed > maxDetection {
		t.Errorf("the Node noticed the router gone after %s, want within %s", noticed, maxDetection)
	}
	t.Logf("the Node noticed the router gone %s after its port went down: %s", noticed.Round(time.Millisecond), p.Message)
	sg.setPort(t, "r0", true)
	sp.waitPeer("tor-a", time.Minute, bfdUp)
	bird.WaitRoutes(30*time.Second, viaNode(bfdPrefix))

	// An agent restart, the link up: BIRD keeps the route for graceful restart when
	// the connection closes, then drops it when BFD goes down.
	watch := watchTable(t, birdTable(bird), bfdPrefix)
	sp, killed := restartSpeaker(t, sp, sg, spec)
	back := timeUntilPresent(t, birdTable(bird), bfdPrefix, killed)
	polls, missing := watch.finish()
	if missing.IsZero() {
		t.Errorf("BIRD kept the route across an agent restart (%d polls); with `bfd on` it drops it when BFD goes down (docs/bgp.md#bfd)", polls)
	} else {
		t.Logf("agent restart: BIRD dropped the route %s after the kill and had it again %s after the kill",
			missing.Sub(killed).Round(time.Millisecond), back.Round(time.Millisecond))
	}

	// The Node dies.
	failed = killNode(t, sp, sg)
	gone := timeUntilGone(t, birdTable(bird), bfdPrefix, failed, time.Minute)
	if gone > maxDetection {
		t.Errorf("BIRD dropped the dead Node's route %s after the failure, want within %s", gone, maxDetection)
	}
	t.Logf("Node death: the route left BIRD's table %s after the Node's port went down", gone.Round(time.Millisecond))
	if out, _ := bird.Protocol("node_a"); !strings.Contains(out, "BFD session down") {
		t.Errorf("BIRD's session did not end by BFD:\n%s", out)
	}
}

// timeUntilPresent polls the table until prefix is in it and returns how long after
// start that was.
func timeUntilPresent(t *testing.T, table routerTable, prefix string, start time.Time) time.Duration {
	t.Helper()
	var at time.Time
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		routes, err := table()
		at = time.Now()
		_, ok := routes[prefix]
		return err == nil && ok, nil
	})
	if err != nil {
		t.Fatalf("%s not in the router's table: %v", prefix, err)
	}
	return at.Sub(start)
}

// TestBIRDBFDGraceful: BIRD with `bfd graceful` takes a BFD failure for a graceful
// restart: an agent restart keeps the route throughout, and so does a dead Node's
// session, for the restart time, as without BFD.
func TestBIRDBFDGraceful(t *testing.T) {
	sg := newSegment(t, routerAddr.String())
	bird := bgprouter.StartBIRD(t, sg.routers[routerAddr.String()], bgprouter.Config{RouterID: routerAddr, AS: routerASN, Accept: pool,
		BFD:       bgprouter.BFD{Graceful: true},
		Neighbors: []bgprouter.Neighbor{{Name: "node_a", Local: routerAddr, Address: nodeAddr, AS: nodeASN, BFD: true}}})
	spec := speakerSpec{Config: speakerConfig(), Peers: []Peer{bfdPeer("tor-a", routerAddr)}, Prefixes: prefixes(bfdPrefix)}
	sp := startSpeaker(t, sg.node, spec)
	bird.WaitRoutes(30*time.Second, viaNode(bfdPrefix))
	bird.WaitBFD(nodeAddr.String(), "Up", 30*time.Second)
	sp.waitPeer("tor-a", 10*time.Second, bfdUp)

	watch := watchTable(t, birdTable(bird), bfdPrefix)
	sp, _ = restartSpeaker(t, sp, sg, spec)
	bird.WaitBFD(nodeAddr.String(), "Up", 30*time.Second)
	if polls, missing := watch.finish(); !missing.IsZero() || polls < 20 {
		t.Errorf("across an agent restart BIRD lacked the route from %v (%d polls)", missing, polls)
	} else {
		t.Logf("agent restart: the route was in each of %d polls of BIRD's table", polls)
	}

	failed := killNode(t, sp, sg)
	bird.WaitBFD(nodeAddr.String(), "Down", 10*time.Second)
	t.Logf("BIRD's BFD declared the Node down %s after its port went down", time.Since(failed).Round(time.Millisecond))
	waitGracefulRestart(t, bird, "node_a")
	bird.WaitRoutes(time.Second, viaNode(bfdPrefix)) // kept, stale, for the restart time
}

// TestFRRBFD: FRR (bgpd, bfdd, zebra) with graceful restart on, as docs/bgp.md
// configures it. FRR ends a session whose BFD goes down without graceful restart, so a
// dead Node's route goes within about a second; an agent restart closes the connection
// first, which FRR takes for a graceful restart, and BFD going down afterwards no
// longer matters: the route stays. With `neighbor X bfd check-control-plane-failure`,
// once the Node went through one graceful restart, FRR ignores its BFD failures (the
// Node clears the C bit: its BFD shares fate with its control plane): a dead Node keeps
// its route until the hold time expires. docs/bgp.md tells not to set it.
func TestFRRBFD(t *testing.T) {
	for _, check := range []bool{false, true} {
		t.Run(fmt.Sprintf("check-control-plane-failure=%v", check), func(t *testing.T) { testFRRBFD(t, check) })
	}
}

func testFRRBFD(t *testing.T, checkControlPlane bool) {
	sg := newSegment(t, routerAddr.String())
	frr := bgprouter.StartFRR(t, sg.routers[routerAddr.String()], bgprouter.Config{RouterID: routerAddr, AS: routerASN, Accept: pool,
		Neighbors: []bgprouter.Neighbor{{Name: "node_a", Local: routerAddr, Address: nodeAddr, AS: nodeASN, BFD: true,
			CheckControlPlane: checkControlPlane}}})
	spec := speakerSpec{Config: speakerConfig(), Peers: []Peer{bfdPeer("tor-a", routerAddr)}, Prefixes: prefixes(bfdPrefix)}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("FRR's log:\n%s", frr.Log())
		}
	})
	sp := startSpeaker(t, sg.node, spec)
	frr.WaitRoutes(30*time.Second, viaNode(bfdPrefix))
	frr.WaitBFD(nodeAddr.String(), "Up", 30*time.Second)
	p := sp.waitPeer("tor-a", 10*time.Second, bfdUp)
	out, _ := frr.Command("show bgp neighbors " + nodeAddr.String())
	if _, bfd, ok := strings.Cut(out, "BFD:"); !ok || !strings.Contains(bfd, "Status: Up") {
		t.Errorf("bgpd does not show BFD Up for the Node:\n%s", out)
	}
	t.Logf("tor-a: %s, BFD %s", p.State, p.BFD)

	watch := watchTable(t, frr.Routes, bfdPrefix)
	sp, _ = restartSpeaker(t, sp, sg, spec)
	frr.WaitBFD(nodeAddr.String(), "Up", 30*time.Second)
	if polls, missing := watch.finish(); !missing.IsZero() || polls < 10 {
		t.Errorf("across an agent restart FRR lacked the route from %v (%d polls)", missing, polls)
	} else {
		t.Logf("agent restart: the route was in each of %d polls of FRR's table", polls)
	}

	if checkControlPlane {
		// What FRR makes of the failure depends on the Node's last packet: not the
		// answer to bfdd's poll after the restart (test/bgprouter: WaitBFDPackets).
		frr.WaitBFDPackets(nodeAddr.String(), 3, 10*time.Second)
	}
	failed := killNode(t, sp, sg)
	if checkControlPlane {
		frr.WaitBFD(nodeAddr.String(), "Down", 10*time.Second)
		if state, err := frr.NeighborState(nodeAddr.String()); err != nil || state != "Established" {
			t.Errorf("with check-control-plane-failure the session is %q (%v) after BFD went down, want still Established", state, err)
		}
		frr.WaitRoutes(time.Second, viaNode(bfdPrefix))
		t.Logf("Node death: FRR's BFD declared the Node down %s after its port went down; FRR ignored it and keeps the route",
			time.Since(failed).Round(time.Millisecond))
		return
	}
	gone := timeUntilGone(t, frr.Routes, bfdPrefix, failed, time.Minute)
	if gone > maxDetection {
		t.Errorf("FRR dropped the dead Node's route %s after the failure, want within %s", gone, maxDetection)
	}
	t.Logf("Node death: the route left FRR's table %s after the Node's port went down", gone.Round(time.Millisecond))
}
