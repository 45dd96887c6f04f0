package bgp

import (
	"net/netip"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// Defaults of Config.
const (
	// DefaultConnectRetry is how often the speaker dials a peer that is not connected.
	// GoBGP's own default (120s) suits routers that also dial; here only the Node dials.
	DefaultConnectRetry = 5 * time.Second
	// DefaultRestartTime is the graceful restart time the speaker advertises: how long
	// routers keep its routes while it is away.
	DefaultRestartTime = 120 * time.Second
	// DefaultDeferralTime bounds how long a restarted speaker waits for its peers'
	// End-of-RIB before it sends its routes (juneau uses no received route, so waiting
	// only matters for a peer that is down).
	DefaultDeferralTime = 5 * time.Second
	// MaxRestartTime is the largest restart time the capability can carry (12 bits).
	MaxRestartTime = 4095 * time.Second
	// MaxReceivedPrefixes bounds the routes of each address family a router may send
	// in a session (docs/bgp.md#received-routes). juneau uses none of them, but GoBGP
	// stores what it receives before any import policy: a router that sends more (a
	// full table by mistake) is disconnected, so the Node's memory stays bounded.
	MaxReceivedPrefixes = 1000
	// DefaultPrefixLimitRetry is how long the speaker leaves a router that sent more
	// than MaxReceivedPrefixes before it connects again.
	DefaultPrefixLimitRetry = time.Minute
	// MaxPasswordLength is the longest TCP-MD5 key the kernel takes
	// (TCP_MD5SIG_MAXKEYLEN), in bytes.
	MaxPasswordLength = 80
	// DefaultHoldTime is used for a peer without HoldTime.
	DefaultHoldTime = v1alpha1.DefaultBGPHoldTimeSeconds * time.Second
)

// Config configures a Speaker.
type Config struct {
	// RouterID is the BGP identifier of this Node, an IPv4 address of the Node (its
	// InternalIP). Required.
	RouterID netip.Addr
	// NextHop6 is the next hop of the IPv6 /128s: a global IPv6 address of the Node on
	// its external interface. The sessions are IPv4 ones that carry IPv6 routes too
	// (MP-BGP, ipv6-unicast), so the next hop cannot be the session's own address.
	// Unset: this Node announces no IPv6 address (SetAnnouncements reports them).
	NextHop6 netip.Addr
	// ConnectRetry is the interval between connection attempts; each attempt gives up
	// after ConnectRetry - 1s (at least 2s). Default DefaultConnectRetry; at least 2s.
	ConnectRetry time.Duration
	// RestartTime is the graceful restart time advertised to peers. Default
	// DefaultRestartTime; at most MaxRestartTime.
	RestartTime time.Duration
	// DeferralTime: see DefaultDeferralTime.
	DeferralTime time.Duration
	// WithdrawOnStop makes a stop send a Cease NOTIFICATION, so routers withdraw the
	// Node's routes at once instead of keeping them for RestartTime (see the package
	// documentation).
	WithdrawOnStop bool
	// Port is the peers' TCP port; 0 means 179. Tests use other ports.
	Port uint16
	// PrefixLimitRetry: see DefaultPrefixLimitRetry.
	PrefixLimitRetry time.Duration
}

// Peer is one router this Node peers with.
type Peer struct {
	// Name of the BGPPeer, for status.
	Name string
	// Address of the router (IPv4). A Node keeps one session per address.
	Address netip.Addr
	// PeerASN is the router's AS number, MyASN the Node's in this session.
	PeerASN, MyASN uint32
	// HoldTime proposed to the router; 0 means DefaultHoldTime.
	HoldTime time.Duration
	// KeepaliveTime; 0 means a third of the negotiated hold time.
	KeepaliveTime time.Duration
	// Password is the TCP-MD5 password; empty: none.
	Password string
	// EBGPMultihopTTL is the IP TTL of an eBGP session to a router that is not directly
	// connected; 0 means directly connected.
	EBGPMultihopTTL uint8
	// TTLSecurity turns on GTSM (RFC 5082): packets sent with TTL 255, only those
	// received with TTL 255 taken. Directly connected routers only.
	TTLSecurity bool
	// BFD runs BFD beside the session; the zero value: none.
	BFD BFD
	// Problem, when set, says why this peer cannot be configured (its password cannot
	// be read, say): the speaker keeps no session with it and reports it Failed with
	// this message.
	Problem string
}

// BFD are the timers of single-hop BFD (RFC 5880, RFC 5881) with a peer. GoBGP runs it:
// it listens on UDP port 3784, sends from a port of 49152–65535 with TTL 255, and
// resets the BGP session (a NOTIFICATION, Cease, administrative reset) when the
// router's packets stop for the detection time or the router signals Down. BFD does
// not keep a session from coming up; it only takes down one whose BFD was Up.
type BFD struct {
	// Enabled turns BFD on; the other fields are then set.
	Enabled bool
	// MinRx is the Required Min RX Interval, MinTx the Desired Min TX Interval (whole
	// milliseconds), Multiplier the Detect Mult.
	MinRx, MinTx time.Duration
	Multiplier   uint8
}

// PeerStatus is the state of the session with one peer.
type PeerStatus struct {
	Name    string
	Address netip.Addr
	// State is Established, Connecting or the last error.
	State v1alpha1.BGPSessionState
	// Message says what went wrong; empty while Established.
	Message string
	// Since is when the session entered State.
	Since time.Time
	// PrefixesAnnounced is the number of prefixes sent in this session; 0 unless
	// Established and done with the graceful restart exchange.
	PrefixesAnnounced int
	// IPv6Announced is the part of PrefixesAnnounced that is IPv6: 0 as well when the
	// router did not take the ipv6-unicast family in this session.
	IPv6Announced int
	// BFD is the state of the BFD session with the peer; empty when the peer has no
	// BFD.
	BFD v1alpha1.BFDSessionState
}

// Status is a snapshot of the speaker.
type Status struct {
	// Peers, sorted by name.
	Peers []PeerStatus
	// Announced lists the prefixes in the speaker's table (sent to every Established
	// peer), sorted.
	Announced []netip.Prefix
}

// Established is the number of Established sessions.
func (s Status) Established() int {
	n := 0
	for _, p := range s.Peers {
		if p.State == v1alpha1.BGPSessionEstablished {
			n++
		}
	}
	return n
}

// AnnouncedTo is the number of Established peers prefix is announced to. Every prefix
// goes to every peer that speaks its family, so that is the number of Established
// sessions that carry the speaker's routes of that family, or 0 when prefix is not in
// the table.
func (s Status) AnnouncedTo(prefix netip.Prefix) int {
	if _, found := slices.BinarySearchFunc(s.Announced, prefix, comparePrefix); !found {
		return 0
	}
	n := 0
	for _, p := range s.Peers {
		sent := p.PrefixesAnnounced - p.IPv6Announced
		if prefix.Addr().Is6() {
			sent = p.IPv6Announced
		}
		if p.State == v1alpha1.BGPSessionEstablished && sent > 0 {
			n++
		}
	}
	return n
}

// Sessions renders the peers as the entries of a BGPNodeStatus.
func (s Status) Sessions() []v1alpha1.BGPSessionStatus {
	out := make([]v1alpha1.BGPSessionStatus, 0, len(s.Peers))
	for _, p := range s.Peers {
		out = append(out, v1alpha1.BGPSessionStatus{
			Name:              p.Name,
			PeerAddress:       p.Address.String(),
			State:             p.State,
			StateMessage:      p.Message,
			Since:             metav1.NewTime(p.Since.Truncate(time.Second)),
			PrefixesAnnounced: int32(min(p.PrefixesAnnounced, 1<<31-1)),
			StateBFD:          p.BFD,
		})
	}
	return out
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}
