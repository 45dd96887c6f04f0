package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// These tests run the speaker against a second GoBGP on the loopback interface acting
// as the router (listening on a high port, so no root is needed). The tests against
// BIRD and FRR in network namespaces are in datapath_test.go.

const loopback = "127.0.0.1"

var (
	speakerID = netip.MustParseAddr("10.225.51.11")
	localhost = netip.MustParseAddr(loopback)
)

// testRouter is a GoBGP acting as a router: it listens on 127.0.0.1:port, never dials,
// accepts every route and lets the test read them.
type testRouter struct {
	t    *testing.T
	srv  *server.BgpServer
	port uint16
	asn  uint32
}

func freePort(t *testing.T) uint16 {
	t.Helper()
	l, err := net.Listen("tcp", loopback+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return uint16(l.Addr().(*net.TCPAddr).Port)
}

// startRouter starts a router of AS asn on 127.0.0.1 that expects the speaker as AS
// speakerASN.
func startRouter(t *testing.T, asn, speakerASN uint32) *testRouter {
	t.Helper()
	return startRouterAt(t, loopback, freePort(t), asn, speakerASN)
}

// startRouterAt starts a router listening on addr:port. The speaker reaches any
// loopback address from 127.0.0.1.
func startRouterAt(t *testing.T, addr string, port uint16, asn, speakerASN uint32) *testRouter {
	t.Helper()
	return startRouterFamilies(t, addr, port, asn, speakerASN, true)
}

// routerFamilies are the families a test router takes: IPv4 unicast, and IPv6 unicast
// when ipv6.
func routerFamilies(ipv6 bool) []*api.AfiSafi {
	out := []*api.AfiSafi{{Config: &api.AfiSafiConfig{Family: ipv4Unicast(), Enabled: true},
		MpGracefulRestart: &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}}}}
	if ipv6 {
		out = append(out, &api.AfiSafi{Config: &api.AfiSafiConfig{Family: ipv6Unicast(), Enabled: true},
			MpGracefulRestart: &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}}})
	}
	return out
}

// startRouterFamilies starts a router that takes IPv6 routes only when ipv6.
func startRouterFamilies(t *testing.T, addr string, port uint16, asn, speakerASN uint32, ipv6 bool) *testRouter {
	t.Helper()
	r := &testRouter{t: t, asn: asn, port: port,
		srv: server.NewBgpServer(server.LoggerOption(slog.New(slog.DiscardHandler), &slog.LevelVar{}))}
	served := make(chan struct{})
	go func() {
		defer close(served)
		r.srv.Serve()
	}()
	t.Cleanup(func() {
		_ = r.srv.StopBgp(context.Background(), &api.StopBgpRequest{})
		r.srv.Stop()
		<-served
	})
	ctx := context.Background()
	if err := r.srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: asn, RouterId: "10.225.51." + strings.TrimPrefix(addr, "127.0.0."), ListenPort: int32(r.port), ListenAddresses: []string{addr},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := r.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
		Conf:            &api.PeerConf{NeighborAddress: loopback, PeerAsn: speakerASN},
		Transport:       &api.Transport{PassiveMode: true},
		GracefulRestart: &api.GracefulRestart{Enabled: true},
		AfiSafis:        routerFamilies(ipv6),
	}}); err != nil {
		t.Fatal(err)
	}
	return r
}

// routes returns the router's table of both families: prefix → next hop.
func (r *testRouter) routes() map[string]string {
	out := map[string]string{}
	for _, family := range []bgp.Family{bgp.RF_IPv4_UC, bgp.RF_IPv6_UC} {
		err := r.srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: family},
			func(prefix bgp.NLRI, paths []*apiutil.Path) {
				for _, p := range paths {
					for _, a := range p.Attrs {
						switch nh := a.(type) {
						case *bgp.PathAttributeNextHop:
							out[prefix.String()] = nh.Value.String()
						case *bgp.PathAttributeMpReachNLRI:
							out[prefix.String()] = nh.Nexthop.String()
						}
					}
				}
			})
		if err != nil {
			r.t.Fatal(err)
		}
	}
	return out
}

func (r *testRouter) waitRoutes(want ...string) {
	r.t.Helper()
	slices.Sort(want)
	var got []string
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		got = got[:0]
		for prefix, nh := range r.routes() {
			got = append(got, prefix+" via "+nh)
		}
		slices.Sort(got)
		return slices.Equal(got, want), nil
	})
	if err != nil {
		r.t.Fatalf("router routes %q, want %q", got, want)
	}
}

// runSpeaker runs sp until the test ends.
func runSpeaker(t *testing.T, sp *Speaker) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- sp.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// waitPeer polls the speaker's status until the named peer satisfies ok.
func waitPeer(t *testing.T, sp *Speaker, name string, ok func(PeerStatus) bool) PeerStatus {
	t.Helper()
	var last PeerStatus
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 40*time.Second, true, func(context.Context) (bool, error) {
		for _, p := range sp.Status().Peers {
			if p.Name == name {
				last = p
				return ok(p), nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("peer %s: %+v", name, last)
	}
	return last
}

func inState(state v1alpha1.BGPSessionState) func(PeerStatus) bool {
	return func(p PeerStatus) bool { return p.State == state }
}

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

func loopbackPeer(name string, r *testRouter, myASN uint32) Peer {
	return Peer{Name: name, Address: localhost, PeerASN: r.asn, MyASN: myASN}
}

func TestSpeakerAnnounces(t *testing.T) {
	router := startRouter(t, 64512, 64513)
	sp := New(Config{RouterID: speakerID, Port: router.port, ConnectRetry: 2 * time.Second})
	// Desired state before Run, as the agent sets it after its caches synced.
	sp.SetPeers([]Peer{loopbackPeer("tor-a", router, 64513)})
	if err := sp.SetAnnouncements(prefixes("10.225.53.7/32", "10.225.53.8/32"), nil); err != nil {
		t.Fatal(err)
	}
	if st := sp.Status(); len(st.Peers) != 1 || st.Peers[0].State != v1alpha1.BGPSessionConnecting {
		t.Errorf("status before Run: %+v, want tor-a Connecting", st)
	}
	runSpeaker(t, sp)

	router.waitRoutes("10.225.53.7/32 via 127.0.0.1", "10.225.53.8/32 via 127.0.0.1")
	p := waitPeer(t, sp, "tor-a", func(p PeerStatus) bool { return p.State == v1alpha1.BGPSessionEstablished && p.PrefixesAnnounced == 2 })
	if p.Message != "" || p.Since.IsZero() {
		t.Errorf("established peer: %+v", p)
	}
	if n := sp.Status().AnnouncedTo(netip.MustParsePrefix("10.225.53.7/32")); n != 1 {
		t.Errorf("AnnouncedTo = %d, want 1", n)
	}

	// The set changes: only the difference moves.
	if err := sp.SetAnnouncements(prefixes("10.225.53.8/32", "10.225.53.9/32", "10.225.53.0/24"), nil); err == nil ||
		!strings.Contains(err.Error(), "10.225.53.0/24") {
		t.Errorf("a /24 was not refused: %v", err)
	}
	router.waitRoutes("10.225.53.8/32 via 127.0.0.1", "10.225.53.9/32 via 127.0.0.1")
	if got := sp.Status().Announced; !slices.Equal(got, prefixes("10.225.53.8/32", "10.225.53.9/32")) {
		t.Errorf("Announced = %v", got)
	}

	// Withdraw everything.
	if err := sp.SetAnnouncements(nil, nil); err != nil {
		t.Fatal(err)
	}
	router.waitRoutes()
	waitPeer(t, sp, "tor-a", func(p PeerStatus) bool { return p.PrefixesAnnounced == 0 })

	// Removing the peer ends the session; the router drops what it had.
	if err := sp.SetAnnouncements(prefixes("10.225.53.7/32"), nil); err != nil {
		t.Fatal(err)
	}
	router.waitRoutes("10.225.53.7/32 via 127.0.0.1")
	sp.SetPeers(nil)
	router.waitRoutes()
	if st := sp.Status(); len(st.Peers) != 0 {
		t.Errorf("status lists removed peers: %+v", st.Peers)
	}
}

func TestSpeakerReportsErrors(t *testing.T) {
	router := startRouter(t, 64512, 64513)
	closed := freePort(t)
	cases := []struct {
		name  string
		peer  Peer
		port  uint16
		state v1alpha1.BGPSessionState
		want  string
	}{
		{"wrong peer ASN", Peer{Name: "tor-a", Address: localhost, PeerASN: 65000, MyASN: 64513}, router.port,
			v1alpha1.BGPSessionWrongASN, "other than peerASN 65000"},
		{"wrong my ASN", loopbackPeer("tor-a", router, 64999), router.port,
			v1alpha1.BGPSessionWrongASN, "another AS number than myASN 64999"},
		{"nothing listens", loopbackPeer("tor-a", router, 64513), closed,
			v1alpha1.BGPSessionRefused, fmt.Sprintf("refused the TCP connection to port %d", closed)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sp := New(Config{RouterID: speakerID, Port: tc.port, ConnectRetry: 2 * time.Second})
			sp.SetPeers([]Peer{tc.peer})
			if err := sp.SetAnnouncements(prefixes("10.225.53.7/32"), nil); err != nil {
				t.Fatal(err)
			}
			runSpeaker(t, sp)
			p := waitPeer(t, sp, "tor-a", inState(tc.state))
			if !strings.Contains(p.Message, tc.want) {
				t.Errorf("message %q lacks %q", p.Message, tc.want)
			}
			if n := sp.Status().AnnouncedTo(netip.MustParsePrefix("10.225.53.7/32")); n != 0 {
				t.Errorf("AnnouncedTo = %d, want 0", n)
			}
			if routes := router.routes(); len(routes) != 0 {
				t.Errorf("the router got routes: %v", routes)
			}
		})
	}
}

// TestSpeakerOnePeerPerAddress: of two peers for one address, the first by name gets
// the session and the other is reported.
func TestSpeakerOnePeerPerAddress(t *testing.T) {
	router := startRouter(t, 64512, 64513)
	sp := New(Config{RouterID: speakerID, Port: router.port, ConnectRetry: 2 * time.Second})
	runSpeaker(t, sp)
	if err := sp.SetAnnouncements(prefixes("10.225.53.7/32"), nil); err != nil {
		t.Fatal(err)
	}
	sp.SetPeers([]Peer{loopbackPeer("tor-b", router, 64513), loopbackPeer("tor-a", router, 64513)})
	waitPeer(t, sp, "tor-a", inState(v1alpha1.BGPSessionEstablished))
	p := waitPeer(t, sp, "tor-b", inState(v1alpha1.BGPSessionFailed))
	if !strings.Contains(p.Message, `BGPPeer "tor-a" has the same peer address 127.0.0.1`) {
		t.Errorf("duplicate: %+v", p)
	}
	router.waitRoutes("10.225.53.7/32 via 127.0.0.1")
}

// TestSpeakerIgnoresReceivedRoutes: a route one router announces to the speaker never
// reaches another router (GoBGP would pass it on between eBGP peers if it kept it).
func TestSpeakerIgnoresReceivedRoutes(t *testing.T) {
	a := startRouter(t, 64512, 64513)
	b := startRouterAt(t, "127.0.0.2", a.port, 64514, 64513)
	nlri, _ := bgp.NewIPAddrPrefix(netip.MustParsePrefix("10.99.0.0/24"))
	nexthop, _ := bgp.NewPathAttributeNextHop(netip.MustParseAddr("10.225.51.1"))
	if _, err := a.srv.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{{Family: bgp.RF_IPv4_UC, Nlri: nlri,
		Attrs: []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(0), nexthop}}}}); err != nil {
		t.Fatal(err)
	}
	sp := New(Config{RouterID: speakerID, Port: a.port, ConnectRetry: 2 * time.Second})
	if err := sp.SetAnnouncements(prefixes("10.225.53.7/32"), nil); err != nil {
		t.Fatal(err)
	}
	sp.SetPeers([]Peer{loopbackPeer("tor-a", a, 64513), {Name: "tor-b", Address: netip.MustParseAddr("127.0.0.2"), PeerASN: 64514, MyASN: 64513}})
	runSpeaker(t, sp)
	a.waitRoutes("10.225.53.7/32 via 127.0.0.1", "10.99.0.0/24 via 10.225.51.1")
	b.waitRoutes("10.225.53.7/32 via 127.0.0.1")
	waitPeer(t, sp, "tor-a", func(p PeerStatus) bool { return p.PrefixesAnnounced == 1 })
	// Both sessions are up and tor-a's route was sent long ago: b still has only ours.
	if got := b.routes(); len(got) != 1 {
		t.Errorf("router b got %v, want only 10.225.53.7/32", got)
	}
}

func TestSpeakerConfigErrors(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	err := New(Config{}).Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "router ID") {
		t.Errorf("Run without a router ID: %v", err)
	}
}

// TestSetPeersChangedOnlyOnChange: SetPeers tells Changed (and the speaker's loop) when
// the peers changed, and not when it is handed the same peers again, as the agent does
// at every sync; a Changed for that would bring the agent's next sync, forever.
func TestSetPeersChangedOnlyOnChange(t *testing.T) {
	sp := New(Config{RouterID: speakerID})
	changed := func() bool {
		select {
		case <-sp.Changed():
			return true
		default:
			return false
		}
	}
	tor := Peer{Name: "tor-a", Address: netip.MustParseAddr("127.0.0.1"), PeerASN: 64512, MyASN: 64513}
	dup := Peer{Name: "tor-b", Address: tor.Address, PeerASN: 64512, MyASN: 64513}
	steps := []struct {
		peers []Peer
		want  bool
	}{
		{nil, true}, // the first set, even empty
		{nil, false},
		{[]Peer{tor}, true},
		{[]Peer{tor}, false},
		{[]Peer{dup, tor}, true}, // tor-b rejected: same address
		{[]Peer{tor, dup}, false},
		{[]Peer{{Name: "tor-a", Address: tor.Address, PeerASN: 64514, MyASN: 64513}, dup}, true},
		{nil, true},
	}
	for i, s := range steps {
		sp.SetPeers(s.peers)
		if got := changed(); got != s.want {
			t.Errorf("step %d, peers %v: Changed %v, want %v", i, s.peers, got, s.want)
		}
	}
}

// TestSpeakerChanged: Changed fires when the status changes, e.g. a session comes up.
func TestSpeakerChanged(t *testing.T) {
	router := startRouter(t, 64512, 64513)
	sp := New(Config{RouterID: speakerID, Port: router.port, ConnectRetry: 2 * time.Second})
	runSpeaker(t, sp)
	if err := sp.SetAnnouncements(nil, nil); err != nil {
		t.Fatal(err)
	}
	sp.SetPeers([]Peer{loopbackPeer("tor-a", router, 64513)})
	var mu sync.Mutex
	deadline := time.After(40 * time.Second)
	for {
		select {
		case <-sp.Changed():
			mu.Lock()
			st := sp.Status()
			mu.Unlock()
			if st.Established() == 1 {
				return
			}
		case <-deadline:
			t.Fatalf("no change to Established: %+v", sp.Status())
		}
	}
}

func TestSpeakerAnnouncesIPv6(t *testing.T) {
	nextHop := netip.MustParseAddr("fd00:225:51::11")
	router := startRouter(t, 64512, 64513)
	sp := New(Config{RouterID: speakerID, Port: router.port, ConnectRetry: 2 * time.Second, NextHop6: nextHop})
	sp.SetPeers([]Peer{loopbackPeer("tor-a", router, 64513)})
	if err := sp.SetAnnouncements(prefixes("10.225.53.7/32", "fd00:225:53::7/128"), nil); err != nil {
		t.Fatal(err)
	}
	runSpeaker(t, sp)

	// The IPv6 /128 rides the IPv4 session with the Node's IPv6 address as next hop.
	router.waitRoutes("10.225.53.7/32 via 127.0.0.1", "fd00:225:53::7/128 via fd00:225:51::11")
	waitPeer(t, sp, "tor-a", func(p PeerStatus) bool {
		return p.State == v1alpha1.BGPSessionEstablished && p.PrefixesAnnounced == 2 && p.IPv6Announced == 1
	})
	if n := sp.Status().AnnouncedTo(netip.MustParsePrefix("fd00:225:53::7/128")); n != 1 {
		t.Errorf("AnnouncedTo(fd00:225:53::7/128) = %d, want 1", n)
	}

	// Withdrawn alone, the IPv4 route stays.
	if err := sp.SetAnnouncements(prefixes("10.225.53.7/32"), nil); err != nil {
		t.Fatal(err)
	}
	router.waitRoutes("10.225.53.7/32 via 127.0.0.1")
	if n := sp.Status().AnnouncedTo(netip.MustParsePrefix("fd00:225:53::7/128")); n != 0 {
		t.Errorf("AnnouncedTo after the withdrawal = %d, want 0", n)
	}
}

func TestSpeakerIPv6NeedsNextHop(t *testing.T) {
	sp := New(Config{RouterID: speakerID})
	err := sp.SetAnnouncements(prefixes("10.225.53.7/32", "fd00:225:53::7/128", "fd00:225:53::/64"), nil)
	if err == nil || !strings.Contains(err.Error(), "no global IPv6 address on its external interface for the next hop: fd00:225:53::7/128") ||
		!strings.Contains(err.Error(), "not an IPv4 /32 or IPv6 /128: fd00:225:53::/64") {
		t.Errorf("error %v", err)
	}
	if _, err := (Config{RouterID: speakerID, NextHop6: netip.MustParseAddr("fe80::1")}).withDefaults(); err == nil {
		t.Error("a link-local IPv6 next hop was accepted")
	}
}

func TestAnnouncedToCountsFamilies(t *testing.T) {
	st := Status{
		Announced: prefixes("10.225.53.7/32", "fd00:225:53::7/128"),
		Peers: []PeerStatus{
			{Name: "dual", State: v1alpha1.BGPSessionEstablished, PrefixesAnnounced: 2, IPv6Announced: 1},
			{Name: "v4only", State: v1alpha1.BGPSessionEstablished, PrefixesAnnounced: 1},
		},
	}
	if n := st.AnnouncedTo(netip.MustParsePrefix("10.225.53.7/32")); n != 2 {
		t.Errorf("IPv4 announced to %d, want 2", n)
	}
	if n := st.AnnouncedTo(netip.MustParsePrefix("fd00:225:53::7/128")); n != 1 {
		t.Errorf("IPv6 announced to %d, want 1 (the IPv4-only router takes none)", n)
	}
}

// communities are the standard and large communities of the router's route to each
// prefix, as "65000:100 65000:1:2" (standard first, in the order received).
func (r *testRouter) communities() map[string]string {
	out := map[string]string{}
	for _, family := range []bgp.Family{bgp.RF_IPv4_UC, bgp.RF_IPv6_UC} {
		err := r.srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: family},
			func(prefix bgp.NLRI, paths []*apiutil.Path) {
				var list []string
				for _, p := range paths {
					for _, a := range p.Attrs {
						switch c := a.(type) {
						case *bgp.PathAttributeCommunities:
							for _, v := range c.Value {
								list = append(list, fmt.Sprintf("%d:%d", v>>16, v&0xffff))
							}
						case *bgp.PathAttributeLargeCommunities:
							for _, v := range c.Values {
								list = append(list, fmt.Sprintf("%d:%d:%d", v.ASN, v.LocalData1, v.LocalData2))
							}
						}
					}
				}
				out[prefix.String()] = strings.Join(list, " ")
			})
		if err != nil {
			r.t.Fatal(err)
		}
	}
	return out
}

func (r *testRouter) waitCommunities(want map[string]string) {
	r.t.Helper()
	var got map[string]string
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		got = r.communities()
		return maps.Equal(got, want), nil
	})
	if err != nil {
		r.t.Fatalf("router's communities %q, want %q", got, want)
	}
}

// Each prefix goes out with its communities, standard (COMMUNITIES) and large
// (LARGE_COMMUNITY), in both families; a change of them announces the prefix again.
func TestSpeakerCommunities(t *testing.T) {
	router := startRouterFamilies(t, loopback, freePort(t), 64512, 64513, true)
	sp := New(Config{RouterID: speakerID, Port: router.port, ConnectRetry: 2 * time.Second, NextHop6: netip.MustParseAddr("fd00:225:51::11")})
	sp.SetPeers([]Peer{loopbackPeer("tor-a", router, 64513)})
	v4, v6 := netip.MustParsePrefix("10.225.53.7/32"), netip.MustParsePrefix("fd00:225:53::7/128")
	if err := sp.SetAnnouncements([]netip.Prefix{v4, v6, netip.MustParsePrefix("10.225.53.8/32")}, map[netip.Prefix]PathAttributes{
		v4: {Communities: []string{"65000:1:2", "65000:100", "65000:100"}}, v6: {Communities: []string{"4294967295:0:7", "0:1"}},
	}); err != nil {
		t.Fatal(err)
	}
	runSpeaker(t, sp)
	router.waitCommunities(map[string]string{"10.225.53.7/32": "65000:100 65000:1:2", "fd00:225:53::7/128": "0:1 4294967295:0:7",
		"10.225.53.8/32": ""})

	if err := sp.SetAnnouncements([]netip.Prefix{v4, v6}, map[netip.Prefix]PathAttributes{v4: {Communities: []string{"65001:7"}}, v6: {Communities: []string{"65001:7", "bad"}}}); err == nil ||
		!strings.Contains(err.Error(), "fd00:225:53::7/128") || !strings.Contains(err.Error(), `"bad"`) {
		t.Errorf("a malformed community was not reported: %v", err)
	}
	router.waitCommunities(map[string]string{"10.225.53.7/32": "65001:7", "fd00:225:53::7/128": "65001:7"})
	if err := sp.SetAnnouncements([]netip.Prefix{v4}, nil); err != nil {
		t.Fatal(err)
	}
	router.waitCommunities(map[string]string{"10.225.53.7/32": ""})
}

// TestSpeakerPrefixLimit: a router that sends more than MaxReceivedPrefixes routes is
// disconnected and reported Failed; the other router's session and routes stay; once
// the router sends fewer, the speaker connects again after PrefixLimitRetry.
func TestSpeakerPrefixLimit(t *testing.T) {
	a := startRouter(t, 64512, 64513)
	b := startRouterAt(t, "127.0.0.2", a.port, 64514, 64513)
	var flood []*apiutil.Path
	nexthop, _ := bgp.NewPathAttributeNextHop(netip.MustParseAddr("10.225.51.1"))
	for i := range MaxReceivedPrefixes + 1 {
		nlri, _ := bgp.NewIPAddrPrefix(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 99, byte(i >> 8), byte(i)}), 32))
		flood = append(flood, &apiutil.Path{Family: bgp.RF_IPv4_UC, Nlri: nlri, Attrs: []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(0), nexthop}})
	}
	sp := New(Config{RouterID: speakerID, Port: a.port, ConnectRetry: 2 * time.Second, PrefixLimitRetry: 3 * time.Second})
	if err := sp.SetAnnouncements(prefixes("10.225.53.7/32"), nil); err != nil {
		t.Fatal(err)
	}
	sp.SetPeers([]Peer{loopbackPeer("tor-a", a, 64513), {Name: "tor-b", Address: netip.MustParseAddr("127.0.0.2"), PeerASN: 64514, MyASN: 64513}})
	runSpeaker(t, sp)
	waitPeer(t, sp, "tor-a", inState(v1alpha1.BGPSessionEstablished))
	waitPeer(t, sp, "tor-b", inState(v1alpha1.BGPSessionEstablished))

	if _, err := a.srv.AddPath(apiutil.AddPathRequest{Paths: flood}); err != nil {
		t.Fatal(err)
	}
	p := waitPeer(t, sp, "tor-a", inState(v1alpha1.BGPSessionFailed))
	if !strings.Contains(p.Message, fmt.Sprintf("more than %d routes", MaxReceivedPrefixes)) || !strings.Contains(p.Message, "send the Nodes nothing") {
		t.Errorf("tor-a after the flood: %+v", p)
	}
	if q := waitPeer(t, sp, "tor-b", inState(v1alpha1.BGPSessionEstablished)); q.Message != "" {
		t.Errorf("tor-b: %+v", q)
	}
	b.waitRoutes("10.225.53.7/32 via 127.0.0.1")

	// The router now sends a single route: the session comes back.
	if err := a.srv.DeletePath(apiutil.DeletePathRequest{Paths: flood[1:]}); err != nil {
		t.Fatal(err)
	}
	waitPeer(t, sp, "tor-a", inState(v1alpha1.BGPSessionEstablished))
	a.waitRoutes("10.225.53.7/32 via 127.0.0.1", "10.99.0.0/32 via 10.225.51.1")
}
