package bgp

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func TestDialErrorState(t *testing.T) {
	cfg := Config{ConnectRetry: 5 * time.Second}
	plain := testPeer("tor-a", routerA)
	signed := plain
	signed.Password = "s3cret"
	tests := []struct {
		name    string
		err     string
		peer    Peer
		state   v1alpha1.BGPSessionState
		message []string
	}{
		{"refused", "dial tcp 10.225.51.11:0->10.225.51.1:179: connect: connection refused", plain,
			v1alpha1.BGPSessionRefused, []string{"refused the TCP connection to port 179"}},
		{"no route", "dial tcp 10.225.51.11:0->10.225.51.1:179: connect: no route to host", plain,
			v1alpha1.BGPSessionUnreachable, []string{"cannot reach the router: no route to host"}},
		{"network unreachable", "dial tcp 10.225.51.1:179: connect: network is unreachable", signed,
			v1alpha1.BGPSessionUnreachable, []string{"network is unreachable"}},
		{"timeout without password", "dial tcp 10.225.51.11:0->10.225.51.1:179: i/o timeout", plain,
			v1alpha1.BGPSessionUnreachable, []string{"no answer within 4s", "requires a TCP-MD5 password"}},
		{"timeout with password", "dial tcp 10.225.51.11:0->10.225.51.1:179: i/o timeout", signed,
			v1alpha1.BGPSessionAuthenticationFailed, []string{"TCP-MD5 password", "differs"}},
		{"kernel timeout with password", "dial tcp 10.225.51.1:179: connect: connection timed out", signed,
			v1alpha1.BGPSessionAuthenticationFailed, []string{"TCP-MD5"}},
		{"other", "dial tcp 10.225.51.1:179: setsockopt: protocol not available", signed,
			v1alpha1.BGPSessionFailed, []string{"connecting to the router failed", "protocol not available"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state, message := dialErrorState(tt.err, tt.peer, cfg)
			if state != tt.state {
				t.Errorf("state = %s, want %s (%s)", state, tt.state, message)
			}
			for _, m := range tt.message {
				if !strings.Contains(message, m) {
					t.Errorf("message %q lacks %q", message, m)
				}
			}
		})
	}
	if _, msg := dialErrorState("connect: connection refused", plain, Config{Port: 1790, ConnectRetry: 2 * time.Second}); !strings.Contains(msg, "port 1790") {
		t.Errorf("message %q does not name the configured port", msg)
	}
}

func TestDisconnectState(t *testing.T) {
	p := testPeer("tor-a", routerA)
	received := func(code, sub uint8) string { return "notification-received " + notificationText(code, sub) }
	sent := func(code, sub uint8) string { return "notification-sent " + notificationText(code, sub) }
	R := api.PeerState_DISCONNECT_REASON_NOTIFICATION_RECEIVED
	tests := []struct {
		name    string
		reason  api.PeerState_DisconnectReason
		detail  string
		prev    bgp.FSMState
		state   v1alpha1.BGPSessionState
		message string // "" means: not an error
	}{
		{"router's AS is not peerASN", api.PeerState_DISCONNECT_REASON_BAD_PEER_AS, "bad-peer-as", bgp.BGP_FSM_OPENSENT,
			v1alpha1.BGPSessionWrongASN, "other than peerASN 64512"},
		{"router refuses myASN", R, received(bgp.BGP_ERROR_OPEN_MESSAGE_ERROR, bgp.BGP_ERROR_SUB_BAD_PEER_AS), bgp.BGP_FSM_OPENSENT,
			v1alpha1.BGPSessionWrongASN, `rejected this Node's AS number 64513 (myASN): it expects another one (notification "open: bad peer as")`},
		{"bad peer AS sent", api.PeerState_DISCONNECT_REASON_NOTIFICATION_SENT, sent(bgp.BGP_ERROR_OPEN_MESSAGE_ERROR, bgp.BGP_ERROR_SUB_BAD_PEER_AS),
			bgp.BGP_FSM_OPENSENT, v1alpha1.BGPSessionWrongASN, "peerASN 64512"},
		{"authentication failure", R, received(bgp.BGP_ERROR_OPEN_MESSAGE_ERROR, bgp.BGP_ERROR_SUB_DEPRECATED_AUTHENTICATION_FAILURE),
			bgp.BGP_FSM_OPENSENT, v1alpha1.BGPSessionAuthenticationFailed, "authentication failure"},
		{"cease rejected", R, received(bgp.BGP_ERROR_CEASE, bgp.BGP_ERROR_SUB_CONNECTION_REJECTED), bgp.BGP_FSM_OPENSENT,
			v1alpha1.BGPSessionRefused, "connection rejected"},
		{"cease shutdown", R, received(bgp.BGP_ERROR_CEASE, bgp.BGP_ERROR_SUB_ADMINISTRATIVE_SHUTDOWN), bgp.BGP_FSM_ESTABLISHED,
			v1alpha1.BGPSessionRefused, "ended the session"},
		{"router's hold timer", R, received(bgp.BGP_ERROR_HOLD_TIMER_EXPIRED, 0), bgp.BGP_FSM_ESTABLISHED,
			v1alpha1.BGPSessionUnreachable, "heard nothing from this Node"},
		{"our hold timer", api.PeerState_DISCONNECT_REASON_HOLD_TIMER_EXPIRED, "hold-timer-expired", bgp.BGP_FSM_ESTABLISHED,
			v1alpha1.BGPSessionUnreachable, "within the hold time"},
		{"other notification", R, received(bgp.BGP_ERROR_OPEN_MESSAGE_ERROR, bgp.BGP_ERROR_SUB_UNACCEPTABLE_HOLD_TIME), bgp.BGP_FSM_OPENSENT,
			v1alpha1.BGPSessionFailed, "unacceptable hold time"},
		{"router answered the OPEN with a NOTIFICATION", api.PeerState_DISCONNECT_REASON_INVALID_MSG, "invalid-msg", bgp.BGP_FSM_OPENCONFIRM,
			v1alpha1.BGPSessionWrongASN, "rejected this Node's OPEN message: most likely it expects another AS number than myASN 64513"},
		{"FSM error sent while opening", api.PeerState_DISCONNECT_REASON_NOTIFICATION_SENT, sent(bgp.BGP_ERROR_FSM_ERROR, 1), bgp.BGP_FSM_ACTIVE,
			v1alpha1.BGPSessionWrongASN, "myASN 64513"},
		{"invalid message while established", api.PeerState_DISCONNECT_REASON_INVALID_MSG, "invalid-msg", bgp.BGP_FSM_ESTABLISHED,
			v1alpha1.BGPSessionFailed, "cannot accept"},
		{"our own cease", api.PeerState_DISCONNECT_REASON_NOTIFICATION_SENT, sent(bgp.BGP_ERROR_CEASE, bgp.BGP_ERROR_SUB_PEER_DECONFIGURED),
			bgp.BGP_FSM_ESTABLISHED, "", ""},
		{"closed before established", api.PeerState_DISCONNECT_REASON_READ_FAILED, "read-failed", bgp.BGP_FSM_OPENSENT,
			v1alpha1.BGPSessionRefused, "configured as a neighbor"},
		{"closed while established", api.PeerState_DISCONNECT_REASON_READ_FAILED, "read-failed", bgp.BGP_FSM_ESTABLISHED,
			v1alpha1.BGPSessionFailed, "closed the connection"},
		{"removed by us", api.PeerState_DISCONNECT_REASON_DECONFIGURED, "deconfigured", bgp.BGP_FSM_ESTABLISHED, "", ""},
		{"idle hold timer", api.PeerState_DISCONNECT_REASON_IDLE_TIMER_EXPIRED, "idle-hold-timer-expired", bgp.BGP_FSM_IDLE, "", ""},
		{"router restarting", api.PeerState_DISCONNECT_REASON_GRACEFUL_RESTART, "graceful-restart", bgp.BGP_FSM_ESTABLISHED, "", ""},
		{"no reason", api.PeerState_DISCONNECT_REASON_UNSPECIFIED, "", bgp.BGP_FSM_ACTIVE, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state, message, ok := disconnectState(tt.reason, tt.detail, tt.prev, p)
			if tt.message == "" {
				if ok {
					t.Errorf("not an error, got %s %q", state, message)
				}
				return
			}
			if !ok || state != tt.state || !strings.Contains(message, tt.message) {
				t.Errorf("got %s %q (%v), want %s mentioning %q", state, message, ok, tt.state, tt.message)
			}
		})
	}
}

func TestSessionTransitions(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	p := testPeer("tor-a", routerA)
	p.Password = "s3cret"
	cfg := Config{ConnectRetry: 5 * time.Second}
	s := newSession(p, t0)
	expect := func(step string, state v1alpha1.BGPSessionState, since time.Time, announced int) {
		t.Helper()
		st := s.status()
		if st.State != state || !st.Since.Equal(since) || st.PrefixesAnnounced != announced {
			t.Errorf("%s: %s since %s, %d announced (%q); want %s since %s, %d", step, st.State, st.Since.Format(time.TimeOnly),
				st.PrefixesAnnounced, st.Message, state, since.Format(time.TimeOnly), announced)
		}
	}
	expect("new", v1alpha1.BGPSessionConnecting, t0, 0)

	if !s.dialFailed("dial tcp 10.225.51.1:179: i/o timeout", cfg, at(5)) {
		t.Error("a first timeout changes nothing")
	}
	s.dialFailed("dial tcp 10.225.51.1:179: i/o timeout", cfg, at(10))
	expect("timeouts with a password", v1alpha1.BGPSessionAuthenticationFailed, at(5), 0)

	s.peerEvent(bgp.BGP_FSM_ACTIVE, api.PeerState_DISCONNECT_REASON_IDLE_TIMER_EXPIRED, "", at(12))
	expect("FSM steps keep the last error", v1alpha1.BGPSessionAuthenticationFailed, at(5), 0)

	s.peerEvent(bgp.BGP_FSM_ESTABLISHED, api.PeerState_DISCONNECT_REASON_UNSPECIFIED, "", at(20))
	s.announced, s.syncing = 3, true
	expect("established, restarted speaker still syncing", v1alpha1.BGPSessionEstablished, at(20), 0)
	s.syncing = false
	expect("established and synced", v1alpha1.BGPSessionEstablished, at(20), 3)
	if s.status().Message != "" {
		t.Errorf("an Established session keeps the message %q", s.status().Message)
	}
	if s.dialFailed("dial tcp 10.225.51.1:179: connect: connection refused", cfg, at(21)) {
		t.Error("a late dial failure changed an Established session")
	}

	s.peerEvent(bgp.BGP_FSM_IDLE, api.PeerState_DISCONNECT_REASON_HOLD_TIMER_EXPIRED, "hold-timer-expired", at(30))
	expect("hold timer expired", v1alpha1.BGPSessionUnreachable, at(30), 0)
	if s.announced != 0 {
		t.Errorf("a down session keeps %d prefixes announced", s.announced)
	}

	if !s.setupFailed("read-failed", at(32)) {
		t.Error("a connection closed by the router changed nothing")
	}
	expect("closed by the router", v1alpha1.BGPSessionRefused, at(32), 0)
	if !s.notificationSent(bgp.BGP_ERROR_OPEN_MESSAGE_ERROR, bgp.BGP_ERROR_SUB_BAD_PEER_AS, at(35)) {
		t.Error("a bad peer AS sent while connecting changed nothing")
	}
	expect("bad peer AS sent", v1alpha1.BGPSessionWrongASN, at(35), 0)
	if s.setupFailed("read-failed", at(36)) {
		t.Error("the router closing connections after rejecting the AS replaced WrongASN")
	}
	s.peerEvent(bgp.BGP_FSM_ESTABLISHED, api.PeerState_DISCONNECT_REASON_UNSPECIFIED, "", at(40))
	if s.notificationSent(bgp.BGP_ERROR_HOLD_TIMER_EXPIRED, 0, at(45)) {
		t.Error("a logged notification changed an Established session (its event reports it)")
	}
	s.peerEvent(bgp.BGP_FSM_IDLE, api.PeerState_DISCONNECT_REASON_UNSPECIFIED, "", at(50))
	expect("down without a reason", v1alpha1.BGPSessionConnecting, at(50), 0)
}

func TestStatusHelpers(t *testing.T) {
	since := time.Date(2030, 1, 2, 3, 4, 5, 600_000_000, time.UTC)
	st := Status{
		Peers: []PeerStatus{
			{Name: "tor-a", Address: routerA, State: v1alpha1.BGPSessionEstablished, Since: since, PrefixesAnnounced: 2, BFD: v1alpha1.BFDUp},
			{Name: "tor-b", Address: routerB, State: v1alpha1.BGPSessionWrongASN, Since: since, Message: "wrong"},
			{Name: "tor-c", Address: netip.MustParseAddr("10.225.51.3"), State: v1alpha1.BGPSessionEstablished, Since: since},
		},
		Announced: []netip.Prefix{netip.MustParsePrefix("10.225.53.7/32"), netip.MustParsePrefix("10.225.53.10/32")},
	}
	if st.Established() != 2 {
		t.Errorf("Established() = %d, want 2", st.Established())
	}
	if n := st.AnnouncedTo(netip.MustParsePrefix("10.225.53.10/32")); n != 1 {
		t.Errorf("AnnouncedTo(announced) = %d, want 1 (tor-c has not got the routes yet)", n)
	}
	if n := st.AnnouncedTo(netip.MustParsePrefix("10.225.53.8/32")); n != 0 {
		t.Errorf("AnnouncedTo(not announced) = %d, want 0", n)
	}
	sessions := st.Sessions()
	if len(sessions) != 3 || sessions[1].Name != "tor-b" || sessions[1].PeerAddress != "10.225.51.2" || sessions[1].State != v1alpha1.BGPSessionWrongASN ||
		sessions[1].StateMessage != "wrong" || sessions[0].PrefixesAnnounced != 2 || !sessions[0].Since.Time.Equal(since.Truncate(time.Second)) ||
		sessions[0].StateBFD != v1alpha1.BFDUp || sessions[1].StateBFD != "" {
		t.Errorf("Sessions() = %+v", sessions)
	}
}

// BFD: the state shows only for a peer with BFD, Down until GoBGP reports another; a
// BFD failure makes the reset that follows (GoBGP's Cease, administrative reset) an
// Unreachable session with BFD's reason, which the next Established clears.
func TestSessionBFD(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	plain := newSession(testPeer("tor-a", routerA), t0)
	if st := plain.status(); st.BFD != "" {
		t.Errorf("a peer without BFD shows BFD %q", st.BFD)
	}
	s := newSession(testPeer("tor-a", routerA).withBFD(BFD{Enabled: true, MinRx: time.Second, MinTx: time.Second, Multiplier: 3}), t0)
	if st := s.status(); st.BFD != v1alpha1.BFDDown {
		t.Errorf("BFD before any report: %q, want Down", st.BFD)
	}
	s.peerEvent(bgp.BGP_FSM_ESTABLISHED, api.PeerState_DISCONNECT_REASON_UNSPECIFIED, "", t0.Add(time.Second))
	s.bfd = v1alpha1.BFDUp
	if !s.bfdDown(false) || s.status().BFD != v1alpha1.BFDDown {
		t.Errorf("BFD expiry: %+v", s.status())
	}
	// A read-back taken before the reset still shows GoBGP's BFD Up.
	sp := &Speaker{}
	sp.refreshBFD(klog.Background(), s, api.BfdSessionState_BFD_SESSION_STATE_UP)
	s.peerEvent(bgp.BGP_FSM_IDLE, api.PeerState_DISCONNECT_REASON_NOTIFICATION_SENT,
		"notification-sent code 6(cease) subcode 4(administrative reset)", t0.Add(2*time.Second))
	if st := s.status(); st.State != v1alpha1.BGPSessionUnreachable || !strings.Contains(st.Message, "no BFD packet from the router") ||
		st.BFD != v1alpha1.BFDDown {
		t.Errorf("after BFD reset the session: %+v, want Unreachable, BFD Down, with BFD's reason", st)
	}
	if sp.refreshBFD(klog.Background(), s, api.BfdSessionState_BFD_SESSION_STATE_UP) || s.status().BFD != v1alpha1.BFDDown {
		t.Errorf("a stale read-back of BFD Up for a session that is down: %+v, want BFD Down", s.status())
	}
	s.peerEvent(bgp.BGP_FSM_ESTABLISHED, api.PeerState_DISCONNECT_REASON_UNSPECIFIED, "", t0.Add(3*time.Second))
	s.bfdDown(true)
	s.peerEvent(bgp.BGP_FSM_IDLE, api.PeerState_DISCONNECT_REASON_NOTIFICATION_SENT,
		"notification-sent code 6(cease) subcode 4(administrative reset)", t0.Add(4*time.Second))
	if st := s.status(); st.State != v1alpha1.BGPSessionUnreachable || !strings.Contains(st.Message, "the router declared its BFD session") {
		t.Errorf("after the router declared BFD down: %+v", st)
	}
	s.peerEvent(bgp.BGP_FSM_ESTABLISHED, api.PeerState_DISCONNECT_REASON_UNSPECIFIED, "", t0.Add(5*time.Second))
	s.peerEvent(bgp.BGP_FSM_IDLE, api.PeerState_DISCONNECT_REASON_NOTIFICATION_SENT,
		"notification-sent code 6(cease) subcode 4(administrative reset)", t0.Add(6*time.Second))
	if st := s.status(); st.State != v1alpha1.BGPSessionConnecting {
		t.Errorf("a reset without BFD failure took BFD's reason: %+v", st)
	}
	for gobgp, want := range map[api.BfdSessionState]v1alpha1.BFDSessionState{
		api.BfdSessionState_BFD_SESSION_STATE_UP: v1alpha1.BFDUp, api.BfdSessionState_BFD_SESSION_STATE_INIT: v1alpha1.BFDInit,
		api.BfdSessionState_BFD_SESSION_STATE_DOWN: v1alpha1.BFDDown, api.BfdSessionState_BFD_SESSION_STATE_ADMIN_DOWN: v1alpha1.BFDAdminDown,
		api.BfdSessionState_BFD_SESSION_STATE_UNSPECIFIED: "",
	} {
		if got := bfdStateOf(gobgp); got != want {
			t.Errorf("bfdStateOf(%v) = %q, want %q", gobgp, got, want)
		}
	}
}
