package bgp

import (
	"math"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"google.golang.org/protobuf/testing/protocmp"
)

var (
	routerA = netip.MustParseAddr("10.225.51.1")
	routerB = netip.MustParseAddr("10.225.51.2")
)

// equateAddr lets cmp compare netip values.
var equateAddr = cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})

func testPeer(name string, addr netip.Addr) Peer {
	return Peer{Name: name, Address: addr, PeerASN: 64512, MyASN: 64513}
}

func TestConfigDefaults(t *testing.T) {
	c, err := Config{RouterID: netip.MustParseAddr("10.225.51.11")}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.ConnectRetry != DefaultConnectRetry || c.RestartTime != DefaultRestartTime || c.DeferralTime != DefaultDeferralTime {
		t.Errorf("defaults = %+v", c)
	}
	if c.dialTimeout() != 4*time.Second {
		t.Errorf("dial timeout = %s, want 4s", c.dialTimeout())
	}
	if d := (Config{ConnectRetry: 2 * time.Second}).dialTimeout(); d != 2*time.Second {
		t.Errorf("dial timeout with a 2s retry = %s, want GoBGP's minimum 2s", d)
	}
	_, err = Config{RouterID: netip.MustParseAddr("fd00::1"), ConnectRetry: time.Second, RestartTime: 2 * time.Hour}.withDefaults()
	for _, want := range []string{"router ID fd00::1", "connect retry 1s", "restart time 2h0m0s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

func TestPeerRequest(t *testing.T) {
	cfg := Config{RouterID: netip.MustParseAddr("10.225.51.11"), ConnectRetry: 5 * time.Second,
		RestartTime: 120 * time.Second, DeferralTime: 5 * time.Second}
	p := Peer{Name: "tor-a", Address: routerA, PeerASN: 64512, MyASN: 4200000001, Password: "s3cret", EBGPMultihopTTL: 3}
	want := &api.Peer{
		Conf:            &api.PeerConf{NeighborAddress: "10.225.51.1", PeerAsn: 64512, LocalAsn: 4200000001, AuthPassword: "s3cret", Description: "tor-a"},
		Timers:          &api.Timers{Config: &api.TimersConfig{ConnectRetry: 5, HoldTime: 90, KeepaliveInterval: 30, IdleHoldTimeAfterReset: 5}},
		GracefulRestart: &api.GracefulRestart{Enabled: true, RestartTime: 120, DeferralTime: 5, LocalRestarting: true},
		AfiSafis: []*api.AfiSafi{{
			Config:            &api.AfiSafiConfig{Family: &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}, Enabled: true},
			MpGracefulRestart: &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}},
			PrefixLimits:      &api.PrefixLimit{Family: &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}, MaxPrefixes: 1000},
		}, {
			Config:            &api.AfiSafiConfig{Family: &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}, Enabled: true},
			MpGracefulRestart: &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}},
			PrefixLimits:      &api.PrefixLimit{Family: &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}, MaxPrefixes: 1000},
		}},
		Transport:    &api.Transport{},
		EbgpMultihop: &api.EbgpMultihop{Enabled: true, MultihopTtl: 3},
	}
	if diff := cmp.Diff(want, peerRequest(p, cfg, true), protocmp.Transform()); diff != "" {
		t.Errorf("peerRequest (-want +got):\n%s", diff)
	}

	p = Peer{Name: "tor-b", Address: routerB, PeerASN: 64512, MyASN: 64512, HoldTime: 9 * time.Second, KeepaliveTime: 2 * time.Second}
	got := peerRequest(p, Config{Port: 1790, ConnectRetry: 2 * time.Second, RestartTime: 30 * time.Second, DeferralTime: time.Second}, false)
	if got.EbgpMultihop != nil || got.Conf.AuthPassword != "" || got.GracefulRestart.LocalRestarting ||
		got.Timers.Config.HoldTime != 9 || got.Timers.Config.KeepaliveInterval != 2 || got.Transport.RemotePort != 1790 {
		t.Errorf("iBGP peer with timers: %v", got)
	}
	// BFD: GoBGP takes microseconds, and the single-hop port by default.
	p.BFD = BFD{Enabled: true, MinRx: 300 * time.Millisecond, MinTx: 50 * time.Millisecond, Multiplier: 5}
	wantBFD := &api.BfdPeerConfig{Enabled: true, RequiredMinimumReceive: 300000, DesiredMinimumTxInterval: 50000, DetectionMultiplier: 5}
	if diff := cmp.Diff(wantBFD, peerRequest(p, cfg, false).Bfd, protocmp.Transform()); diff != "" {
		t.Errorf("BFD of the peer (-want +got):\n%s", diff)
	}
	// A third of an odd hold time rounds down to whole seconds.
	if k := (Peer{HoldTime: 10 * time.Second}).keepaliveTime(); k != 3*time.Second {
		t.Errorf("keepalive for a 10s hold time = %s, want 3s", k)
	}
}

func TestPathFor(t *testing.T) {
	path, err := pathFor(netip.MustParsePrefix("10.225.53.7/32"), netip.Addr{}, attrs{med: 7})
	if err != nil {
		t.Fatal(err)
	}
	if path.Family != bgp.RF_IPv4_UC || path.Nlri.String() != "10.225.53.7/32" {
		t.Errorf("path %v for %s", path.Nlri, path.Family)
	}
	var origin, nexthop, med bool
	for _, a := range path.Attrs {
		switch a := a.(type) {
		case *bgp.PathAttributeOrigin:
			origin = a.Value == bgp.BGP_ORIGIN_ATTR_TYPE_IGP
		case *bgp.PathAttributeNextHop:
			nexthop = a.Value == netip.IPv4Unspecified() // replaced by the session's address: next hop self
		case *bgp.PathAttributeMultiExitDisc:
			med = a.Value == 7
		}
	}
	if !origin || !nexthop || !med || len(path.Attrs) != 3 {
		t.Errorf("attributes %v, want ORIGIN IGP, NEXT_HOP 0.0.0.0 and MULTI_EXIT_DISC 7", path.Attrs)
	}
	for _, bad := range []string{"10.225.53.0/24", "fd00::/64"} {
		if _, err := pathFor(netip.MustParsePrefix(bad), netip.MustParseAddr("fd00:225:51::11"), attrs{}); err == nil {
			t.Errorf("pathFor(%s) succeeded", bad)
		}
	}
	if _, err := pathFor(netip.MustParsePrefix("fd00::7/128"), netip.Addr{}, attrs{}); err == nil {
		t.Error("an IPv6 /128 without a next hop got a path")
	}
	six, err := pathFor(netip.MustParsePrefix("fd00:225:53::7/128"), netip.MustParseAddr("fd00:225:51::11"), attrs{})
	if err != nil {
		t.Fatal(err)
	}
	var reach *bgp.PathAttributeMpReachNLRI
	for _, a := range six.Attrs {
		if r, ok := a.(*bgp.PathAttributeMpReachNLRI); ok {
			reach = r
		}
	}
	if six.Family != bgp.RF_IPv6_UC || six.Nlri.String() != "fd00:225:53::7/128" || reach == nil || reach.Nexthop.String() != "fd00:225:51::11" {
		t.Errorf("IPv6 path %v for %s, MP_REACH_NLRI %v", six.Nlri, six.Family, reach)
	}
}

func TestPeerChanges(t *testing.T) {
	a, b, c := testPeer("a", routerA), testPeer("b", routerB), testPeer("c", netip.MustParseAddr("10.225.51.3"))
	d, e := testPeer("d", netip.MustParseAddr("10.225.51.4")), testPeer("e", netip.MustParseAddr("10.225.51.5"))
	bNewASN := b
	bNewASN.PeerASN = 65000
	// BFD turned on (d), or turned on along with another change (e): only e needs a new
	// session.
	dBFD, eBFD := d, e
	dBFD.BFD = BFD{Enabled: true, MinRx: 300 * time.Millisecond, MinTx: 300 * time.Millisecond, Multiplier: 3}
	eBFD.BFD, eBFD.HoldTime = dBFD.BFD, 30*time.Second
	remove, add, retune := peerChanges(
		map[netip.Addr]Peer{a.Address: a, b.Address: bNewASN, c.Address: c, d.Address: dBFD, e.Address: eBFD},
		map[netip.Addr]Peer{a.Address: a, b.Address: b, d.Address: d, e.Address: e,
			netip.MustParseAddr("10.225.51.9"): testPeer("gone", netip.MustParseAddr("10.225.51.9"))},
	)
	names := func(ps []Peer) (out []string) {
		for _, p := range ps {
			out = append(out, p.Name+"/"+p.Address.String())
		}
		return out
	}
	if diff := cmp.Diff([]string{"b/10.225.51.2", "e/10.225.51.5", "gone/10.225.51.9"}, names(remove)); diff != "" {
		t.Errorf("remove (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b/10.225.51.2", "c/10.225.51.3", "e/10.225.51.5"}, names(add)); diff != "" {
		t.Errorf("add (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"d/10.225.51.4"}, names(retune)); diff != "" {
		t.Errorf("retune (-want +got):\n%s", diff)
	}
	if len(retune) == 1 && retune[0] != dBFD {
		t.Errorf("the retuned peer carries its new BFD: %+v", retune[0])
	}
	// Back without BFD: retuned again.
	if _, _, retune := peerChanges(map[netip.Addr]Peer{d.Address: d}, map[netip.Addr]Peer{d.Address: dBFD}); len(retune) != 1 || retune[0] != d {
		t.Errorf("BFD turned off: retune %+v", retune)
	}
	if add[0].PeerASN != 65000 {
		t.Errorf("the changed peer is added with its new configuration: %+v", add[0])
	}
}

func TestPrefixChanges(t *testing.T) {
	p := func(s string) netip.Prefix { return netip.MustParsePrefix(s) }
	withdraw, announce := prefixChanges(
		map[netip.Prefix]attrs{p("10.225.53.7/32"): {}, p("10.225.53.10/32"): {}, p("10.225.53.9/32"): {}},
		map[netip.Prefix]attrs{p("10.225.53.7/32"): {}, p("10.225.53.8/32"): {}},
	)
	if diff := cmp.Diff([]netip.Prefix{p("10.225.53.8/32")}, withdraw, equateAddr); diff != "" {
		t.Errorf("withdraw (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]netip.Prefix{p("10.225.53.9/32"), p("10.225.53.10/32")}, announce, equateAddr); diff != "" {
		t.Errorf("announce (-want +got):\n%s", diff)
	}
}

func TestDesiredPeers(t *testing.T) {
	dup := testPeer("b-same-router", routerA)
	bad := testPeer("c-bad", routerB)
	bad.KeepaliveTime = 90 * time.Second
	ibgpMultihop := Peer{Name: "d-ibgp", Address: netip.MustParseAddr("10.225.51.4"), PeerASN: 1, MyASN: 1, EBGPMultihopTTL: 2}
	unreadable := testPeer("e-password", netip.MustParseAddr("10.225.51.5"))
	unreadable.Problem = `cannot read the password: Secret "juneau-system/other" is forbidden`
	peers, rejected := desiredPeers([]Peer{dup, bad, testPeer("a-first", routerA), ibgpMultihop, unreadable})
	if len(peers) != 1 || peers[routerA].Name != "a-first" {
		t.Errorf("peers = %v, want only a-first (first by name for %s)", peers, routerA)
	}
	got := map[string]string{}
	for _, r := range rejected {
		got[r.peer.Name] = r.reason
	}
	for name, want := range map[string]string{
		"b-same-router": `BGPPeer "a-first" has the same peer address 10.225.51.1`,
		"c-bad":         "keepalive time 1m30s",
		"d-ibgp":        "eBGP multihop on an iBGP session",
		"e-password":    unreadable.Problem,
	} {
		if !strings.Contains(got[name], want) {
			t.Errorf("rejection of %s = %q, want it to mention %q", name, got[name], want)
		}
	}
}

func TestNextHop6(t *testing.T) {
	addrs := []netip.Prefix{
		netip.MustParsePrefix("10.225.51.11/24"),
		netip.MustParsePrefix("fe80::1/64"),
		netip.MustParsePrefix("fd00:225:53::7/128"), // an ElasticIP or host route
		netip.MustParsePrefix("fd00:225:51::12/64"),
		netip.MustParsePrefix("fd00:225:51::11/64"),
		netip.MustParsePrefix("fd00:225:51::5/64"), // tentative
	}
	usable := func(p netip.Prefix) bool { return p.Addr() != netip.MustParseAddr("fd00:225:51::5") }
	if got := NextHop6(addrs, usable); got != netip.MustParseAddr("fd00:225:51::11") {
		t.Errorf("NextHop6 = %v, want fd00:225:51::11", got)
	}
	if got := NextHop6(addrs[:3], nil); got.IsValid() {
		t.Errorf("NextHop6 without a global on-link IPv6 address = %v", got)
	}
}

func TestMEDOf(t *testing.T) {
	if got := MEDOf(medEpoch.Add(-time.Hour), 0); got != math.MaxUint32 {
		t.Errorf("before the epoch: %d, want the top of the range", got)
	}
	if got := MEDOf(medEpoch.Add(100*365*24*time.Hour), 3); got != 0 {
		t.Errorf("a century later: %d, want 0", got)
	}
	created := time.Date(2026, time.December, 3, 4, 5, 6, 0, time.UTC)
	first := MEDOf(created, 1)
	for _, c := range []struct {
		what string
		med  uint32
	}{
		{"moved once (generation 2)", MEDOf(created, 2)},
		{"created a second later", MEDOf(created.Add(time.Second), 1)},
	} {
		if c.med >= first {
			t.Errorf("%s: MED %d, want below %d", c.what, c.med, first)
		}
	}
	if MEDOf(created, 16) != MEDOf(created, 15) || MEDOf(created.Add(time.Second), 1) >= MEDOf(created, 40) {
		t.Error("generations past 15 are not capped below the next second")
	}
}

func TestPrefixChangesAttributes(t *testing.T) {
	p := netip.MustParsePrefix("10.225.53.7/32")
	a, err := attrsOf([]string{"65000:1:2", "65000:100", "65000:100"})
	if err != nil || a.communities != "65000:100 65000:1:2" {
		t.Fatalf("attrsOf = %+v, %v", a, err)
	}
	if _, announce := prefixChanges(map[netip.Prefix]attrs{p: a}, map[netip.Prefix]attrs{p: {}}); len(announce) != 1 {
		t.Errorf("changed communities: announce %v, want %s again", announce, p)
	}
	if w, announce := prefixChanges(map[netip.Prefix]attrs{p: a}, map[netip.Prefix]attrs{p: a}); len(w)+len(announce) != 0 {
		t.Errorf("nothing changed: withdraw %v, announce %v", w, announce)
	}
	if _, err := attrsOf([]string{"65000:100", "65536:1"}); err == nil {
		t.Error("65536:1 accepted")
	}
	path, err := pathFor(p, netip.Addr{}, a)
	if err != nil {
		t.Fatal(err)
	}
	var standard []uint32
	var large []*bgp.LargeCommunity
	for _, attr := range path.Attrs {
		switch c := attr.(type) {
		case *bgp.PathAttributeCommunities:
			standard = c.Value
		case *bgp.PathAttributeLargeCommunities:
			large = c.Values
		}
	}
	if !slices.Equal(standard, []uint32{65000<<16 | 100}) || len(large) != 1 || *large[0] != (bgp.LargeCommunity{ASN: 65000, LocalData1: 1, LocalData2: 2}) {
		t.Errorf("COMMUNITIES %v, LARGE_COMMUNITY %v", standard, large)
	}
}
