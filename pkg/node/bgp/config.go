package bgp

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/loutres/juneau/pkg/apis/juneau/community"
)

// globalASN is the AS of GoBGP's global configuration. It is never sent: every peer
// carries its own local AS (Peer.MyASN), which GoBGP uses in the OPEN message, in
// AS_PATH and to tell eBGP from iBGP. GoBGP needs a non-zero one to start.
const globalASN = 64512

// withDefaults fills the zero fields of a Config and checks it.
func (c Config) withDefaults() (Config, error) {
	if c.ConnectRetry == 0 {
		c.ConnectRetry = DefaultConnectRetry
	}
	if c.RestartTime == 0 {
		c.RestartTime = DefaultRestartTime
	}
	if c.DeferralTime == 0 {
		c.DeferralTime = DefaultDeferralTime
	}
	if c.PrefixLimitRetry == 0 {
		c.PrefixLimitRetry = DefaultPrefixLimitRetry
	}
	var errs []error
	if !c.RouterID.Is4() || c.RouterID.IsUnspecified() {
		errs = append(errs, fmt.Errorf("router ID %v is not an IPv4 address of this Node", c.RouterID))
	}
	if c.NextHop6.IsValid() && (!c.NextHop6.Is6() || c.NextHop6.Is4In6() || !c.NextHop6.IsGlobalUnicast() || c.NextHop6.Zone() != "") {
		errs = append(errs, fmt.Errorf("IPv6 next hop %v is not a global IPv6 address", c.NextHop6))
	}
	if c.ConnectRetry < 2*time.Second {
		errs = append(errs, fmt.Errorf("connect retry %s is shorter than 2s", c.ConnectRetry))
	}
	if c.RestartTime < time.Second || c.RestartTime > MaxRestartTime {
		errs = append(errs, fmt.Errorf("restart time %s is not between 1s and %s", c.RestartTime, MaxRestartTime))
	}
	if c.DeferralTime < time.Second {
		errs = append(errs, fmt.Errorf("deferral time %s is shorter than 1s", c.DeferralTime))
	}
	return c, errors.Join(errs...)
}

// dialTimeout is how long GoBGP waits for one connection attempt: a second less than
// the retry interval, at least 2s.
func (c Config) dialTimeout() time.Duration { return max(c.ConnectRetry-time.Second, 2*time.Second) }

// validate checks a Peer before it reaches GoBGP.
func (p Peer) validate() error {
	var errs []error
	if !p.Address.Is4() || p.Address.IsUnspecified() {
		errs = append(errs, fmt.Errorf("address %v is not an IPv4 unicast address", p.Address))
	}
	if p.PeerASN == 0 || p.MyASN == 0 {
		errs = append(errs, errors.New("AS numbers must not be 0"))
	}
	hold := p.holdTime()
	if hold < 3*time.Second || hold > 65535*time.Second || hold%time.Second != 0 {
		errs = append(errs, fmt.Errorf("hold time %s is not a whole number of seconds from 3s to 65535s", hold))
	}
	if k := p.KeepaliveTime; k != 0 && (k < time.Second || k%time.Second != 0 || k >= hold) {
		errs = append(errs, fmt.Errorf("keepalive time %s is not a whole number of seconds shorter than the hold time %s", k, hold))
	}
	if p.EBGPMultihopTTL != 0 && p.PeerASN == p.MyASN {
		errs = append(errs, errors.New("eBGP multihop on an iBGP session"))
	}
	if p.EBGPMultihopTTL != 0 && p.TTLSecurity {
		errs = append(errs, errors.New("TTL security with eBGP multihop (GTSM needs a directly connected router)"))
	}
	if b := p.BFD; b.Enabled {
		if p.EBGPMultihopTTL != 0 {
			errs = append(errs, errors.New("BFD with eBGP multihop (juneau speaks single-hop BFD only)"))
		}
		for _, iv := range []time.Duration{b.MinRx, b.MinTx} {
			if iv < time.Millisecond || iv%time.Millisecond != 0 || iv > maxBFDInterval {
				errs = append(errs, fmt.Errorf("BFD interval %s is not a whole number of milliseconds up to %s", iv, maxBFDInterval))
			}
		}
		if b.Multiplier < 2 {
			errs = append(errs, fmt.Errorf("BFD multiplier %d is less than 2", b.Multiplier))
		}
	}
	if len(p.Password) > MaxPasswordLength {
		errs = append(errs, fmt.Errorf("the TCP-MD5 password is %d bytes long, more than the kernel's %d", len(p.Password), MaxPasswordLength))
	}
	return errors.Join(errs...)
}

func (p Peer) holdTime() time.Duration {
	if p.HoldTime == 0 {
		return DefaultHoldTime
	}
	return p.HoldTime
}

// keepaliveTime is the configured interval, a third of the hold time when unset (the
// speaker shortens it further when the router proposes a smaller hold time).
func (p Peer) keepaliveTime() time.Duration {
	if p.KeepaliveTime == 0 {
		return (p.holdTime() / 3).Truncate(time.Second)
	}
	return p.KeepaliveTime
}

// ipv4Unicast and ipv6Unicast are the address families juneau speaks, both in every
// session (MP-BGP): a router that does not take IPv6 simply gets none.
func ipv4Unicast() *api.Family {
	return &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
}

func ipv6Unicast() *api.Family {
	return &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}
}

// peerRequest is the GoBGP neighbor configuration of p. restarting declares this
// speaker restarting to the peer (graceful restart, see the package documentation).
func peerRequest(p Peer, c Config, restarting bool) *api.Peer {
	req := &api.Peer{
		Conf: &api.PeerConf{
			NeighborAddress: p.Address.String(),
			PeerAsn:         p.PeerASN,
			LocalAsn:        p.MyASN,
			AuthPassword:    p.Password,
			Description:     p.Name,
		},
		Timers: &api.Timers{Config: &api.TimersConfig{
			ConnectRetry:      uint64(c.ConnectRetry / time.Second),
			HoldTime:          uint64(p.holdTime() / time.Second),
			KeepaliveInterval: uint64(p.keepaliveTime() / time.Second),
			// After a reset of its own (only BFD resets sessions), GoBGP waits this long
			// before it dials again; its default is 30s. Dial as after any other failure.
			IdleHoldTimeAfterReset: uint64(c.ConnectRetry / time.Second),
		}},
		GracefulRestart: &api.GracefulRestart{
			Enabled:         true,
			RestartTime:     uint32(c.RestartTime / time.Second),
			DeferralTime:    uint32(c.DeferralTime / time.Second),
			LocalRestarting: restarting,
		},
		AfiSafis: []*api.AfiSafi{{
			Config:            &api.AfiSafiConfig{Family: ipv4Unicast(), Enabled: true},
			MpGracefulRestart: &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}},
			PrefixLimits:      &api.PrefixLimit{Family: ipv4Unicast(), MaxPrefixes: MaxReceivedPrefixes},
		}, {
			Config:            &api.AfiSafiConfig{Family: ipv6Unicast(), Enabled: true},
			MpGracefulRestart: &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}},
			PrefixLimits:      &api.PrefixLimit{Family: ipv6Unicast(), MaxPrefixes: MaxReceivedPrefixes},
		}},
		Transport: &api.Transport{RemotePort: uint32(c.Port)},
	}
	if p.EBGPMultihopTTL != 0 {
		req.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: uint32(p.EBGPMultihopTTL)}
	}
	if p.TTLSecurity {
		req.TtlSecurity = &api.TtlSecurity{Enabled: true, TtlMin: 255}
	}
	if b := p.BFD; b.Enabled {
		// GoBGP counts BFD intervals in microseconds, as they go on the wire; port 0 is
		// the single-hop port 3784 (RFC 5881).
		req.Bfd = &api.BfdPeerConfig{
			Enabled:                  true,
			DesiredMinimumTxInterval: uint32(b.MinTx / time.Microsecond),
			RequiredMinimumReceive:   uint32(b.MinRx / time.Microsecond),
			DetectionMultiplier:      uint32(b.Multiplier),
		}
	}
	return req
}

// maxBFDInterval bounds the BFD intervals: the wire carries microseconds in 32 bits
// (about 71 minutes); the API allows 60s.
const maxBFDInterval = time.Hour

// importPolicyName names the policy that keeps received routes out of the table.
const importPolicyName = "juneau-local-only"

// importPolicy accepts only the paths this speaker originates: routes received from
// peers are rejected on import (juneau announces; it never uses what it learns). The
// global import policy applies to locally added paths too, so a plain "reject by
// default" would reject the announcements as well.
func importPolicy() (*api.Policy, *api.PolicyAssignment) {
	policy := &api.Policy{Name: importPolicyName, Statements: []*api.Statement{{
		Name:       importPolicyName + "-accept",
		Conditions: &api.Conditions{RouteType: api.Conditions_ROUTE_TYPE_LOCAL},
		Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT},
	}}}
	return policy, &api.PolicyAssignment{
		Direction:     api.PolicyDirection_POLICY_DIRECTION_IMPORT,
		Policies:      []*api.Policy{{Name: importPolicyName}},
		DefaultAction: api.RouteAction_ROUTE_ACTION_REJECT,
	}
}

// attrs are the path attributes of one announcement besides ORIGIN and the next hop:
// its communities, in their canonical order (community.Compare), space separated, so
// that the value is comparable, and its MULTI_EXIT_DISC (MEDOf).
type attrs struct {
	communities string
	med         uint32
}

// PathAttributes are what a prefix is announced with besides ORIGIN and the next hop.
type PathAttributes struct {
	// Communities: standard "65000:100" or large "65000:1:2" (docs/bgp.md#communities).
	Communities []string
	// MED is the MULTI_EXIT_DISC (MEDOf).
	MED uint32
}

// medEpoch: MEDOf counts from it.
var medEpoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// MEDOf is the MULTI_EXIT_DISC of the address of an advertisement created at created
// whose spec is at generation generation: the later its creation, and for one
// advertisement the more often it moved, the lower, so that among the paths of the
// Nodes (one neighbour AS, whose MEDs routers compare) the path of the Node the address
// went to last wins, while the path of a dead Node that had it before lingers until
// its session ends (docs/bgp.md#the-newest-path-wins). It is the top of the range less
// 16 for each second since medEpoch and one for each generation up to 15; it reaches 0
// about 8 years after medEpoch and stays there. Every Node derives the same value from
// the same object, across restarts of its agent.
func MEDOf(created time.Time, generation int64) uint32 {
	seconds := int64(created.Sub(medEpoch) / time.Second)
	gen := min(max(generation, 0), 15)
	switch {
	case seconds < 0:
		seconds = 0
	case seconds >= math.MaxUint32>>4:
		return 0
	}
	return math.MaxUint32 - uint32(seconds<<4|gen)
}

// attrsOf is the attrs of a list of communities (docs/bgp.md#communities), each once,
// ordered; malformed ones are left out and reported.
func attrsOf(list []string) (attrs, error) {
	var parsed []community.Community
	var errs []error
	for _, c := range list {
		p, err := community.Parse(c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		parsed = append(parsed, p)
	}
	slices.SortFunc(parsed, community.Compare)
	parsed = slices.Compact(parsed)
	text := make([]string, len(parsed))
	for i, c := range parsed {
		text[i] = c.String()
	}
	return attrs{communities: strings.Join(text, " ")}, errors.Join(errs...)
}

// pathAttributes are the MULTI_EXIT_DISC, COMMUNITIES (RFC 1997) and LARGE_COMMUNITY
// (RFC 8092) attributes of a, the last two only when it has such communities.
func (a attrs) pathAttributes() []bgp.PathAttributeInterface {
	var standard []uint32
	var large []*bgp.LargeCommunity
	for _, text := range strings.Fields(a.communities) {
		c, err := community.Parse(text)
		switch {
		case err != nil:
		case c.Large:
			large = append(large, bgp.NewLargeCommunity(c.A, c.B, c.C))
		default:
			standard = append(standard, c.Standard())
		}
	}
	out := []bgp.PathAttributeInterface{bgp.NewPathAttributeMultiExitDisc(a.med)}
	if len(standard) > 0 {
		out = append(out, bgp.NewPathAttributeCommunities(standard))
	}
	if len(large) > 0 {
		out = append(out, bgp.NewPathAttributeLargeCommunities(large))
	}
	return out
}

// pathFor is the announcement of one prefix, ORIGIN IGP, with the communities of a. An
// IPv4 /32 gets an unspecified next hop, which GoBGP replaces with the session's local
// address (next hop self); an IPv6 /128 goes in MP_REACH_NLRI with nextHop6, the
// Node's global IPv6 address (the sessions are IPv4 ones, so their own address cannot
// serve).
func pathFor(prefix netip.Prefix, nextHop6 netip.Addr, a attrs) (*apiutil.Path, error) {
	if prefix.Addr().Is6() && !prefix.Addr().Is4In6() && prefix.Bits() == 128 {
		if !nextHop6.Is6() {
			return nil, fmt.Errorf("%s: no IPv6 next hop", prefix)
		}
		nlri, err := bgp.NewIPAddrPrefix(prefix)
		if err != nil {
			return nil, err
		}
		reach, err := bgp.NewPathAttributeMpReachNLRI(bgp.RF_IPv6_UC, []bgp.PathNLRI{{NLRI: nlri}}, nextHop6)
		if err != nil {
			return nil, err
		}
		return &apiutil.Path{
			Family: bgp.RF_IPv6_UC,
			Nlri:   nlri,
			Attrs:  append([]bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(bgp.BGP_ORIGIN_ATTR_TYPE_IGP), reach}, a.pathAttributes()...),
		}, nil
	}
	if !prefix.Addr().Is4() || prefix.Bits() != 32 {
		return nil, fmt.Errorf("%s is not an IPv4 /32 or IPv6 /128", prefix)
	}
	nlri, err := bgp.NewIPAddrPrefix(prefix)
	if err != nil {
		return nil, err
	}
	nexthop, err := bgp.NewPathAttributeNextHop(netip.IPv4Unspecified())
	if err != nil {
		return nil, err
	}
	return &apiutil.Path{
		Family: bgp.RF_IPv4_UC,
		Nlri:   nlri,
		Attrs:  append([]bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(bgp.BGP_ORIGIN_ATTR_TYPE_IGP), nexthop}, a.pathAttributes()...),
	}, nil
}

// peerChanges compares the desired peers with the applied ones: peers to remove
// (gone, or changed in a way GoBGP takes only with a new session) and to add, and
// peers whose BFD alone changed, which GoBGP updates under the running session
// (turning BFD on or retuning it costs no route); each list sorted by address.
func peerChanges(desired, applied map[netip.Addr]Peer) (remove, add, retune []Peer) {
	for addr, a := range applied {
		if d, ok := desired[addr]; !ok || !sameSession(d, a) {
			remove = append(remove, a)
		}
	}
	for addr, d := range desired {
		a, ok := applied[addr]
		switch {
		case !ok || !sameSession(d, a):
			add = append(add, d)
		case d != a:
			retune = append(retune, d)
		}
	}
	byAddress := func(a, b Peer) int { return a.Address.Compare(b.Address) }
	slices.SortFunc(remove, byAddress)
	slices.SortFunc(add, byAddress)
	slices.SortFunc(retune, byAddress)
	return remove, add, retune
}

// sameSession reports whether two configurations of a peer differ in BFD at most.
func sameSession(a, b Peer) bool {
	a.BFD, b.BFD = BFD{}, BFD{}
	return a == b
}

// prefixChanges compares desired and applied prefixes: those to withdraw, and those to
// announce (new, or with other attributes), each sorted.
func prefixChanges(desired, applied map[netip.Prefix]attrs) (withdraw, announce []netip.Prefix) {
	for p := range applied {
		if _, ok := desired[p]; !ok {
			withdraw = append(withdraw, p)
		}
	}
	for p, d := range desired {
		if a, ok := applied[p]; !ok || a != d {
			announce = append(announce, p)
		}
	}
	slices.SortFunc(withdraw, comparePrefix)
	slices.SortFunc(announce, comparePrefix)
	return withdraw, announce
}

// rejection is a peer the speaker does not configure, and why.
type rejection struct {
	peer   Peer
	reason string
}

// desiredPeers keys peers by address. Invalid peers are rejected, and when several
// share an address (which the webhook refuses, but which may slip through) the first
// by name wins and the others are rejected.
func desiredPeers(peers []Peer) (map[netip.Addr]Peer, []rejection) {
	sorted := slices.Clone(peers)
	slices.SortFunc(sorted, func(a, b Peer) int { return strings.Compare(a.Name, b.Name) })
	out := map[netip.Addr]Peer{}
	var rejected []rejection
	for _, p := range sorted {
		if p.Problem != "" {
			rejected = append(rejected, rejection{p, p.Problem})
			continue
		}
		if err := p.validate(); err != nil {
			rejected = append(rejected, rejection{p, "invalid peer: " + err.Error()})
			continue
		}
		if other, ok := out[p.Address]; ok {
			rejected = append(rejected, rejection{p, fmt.Sprintf(
				"BGPPeer %q has the same peer address %s and selects this Node too; a Node keeps one session per router address",
				other.Name, p.Address)})
			continue
		}
		out[p.Address] = p
	}
	return out, rejected
}

// NextHop6 chooses the next hop of the IPv6 /128s among the addresses of the Node's
// external interface: the lowest global one (ULA included) of an on-link subnet (not a
// /128, which may be an ElasticIP or another host route), usable (usable reports
// whether it is neither tentative, failed nor deprecated). Invalid when none fits.
func NextHop6(addrs []netip.Prefix, usable func(netip.Prefix) bool) netip.Addr {
	var best netip.Addr
	for _, p := range addrs {
		a := p.Addr()
		if !a.Is6() || a.Is4In6() || !a.IsGlobalUnicast() || p.Bits() >= 128 || (usable != nil && !usable(p)) {
			continue
		}
		if !best.IsValid() || a.Less(best) {
			best = a
		}
	}
	return best
}
