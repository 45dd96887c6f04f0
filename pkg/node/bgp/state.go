package bgp

import (
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// session is what the speaker knows about one configured peer.
type session struct {
	peer    Peer
	state   v1alpha1.BGPSessionState
	message string
	since   time.Time
	// fsm is GoBGP's last reported state of the session.
	fsm bgp.FSMState
	// announced counts the prefixes sent; syncing is set while a restarted speaker
	// holds its routes back (graceful restart), so nothing is sent yet.
	announced int
	// announced6 is the part of announced that is IPv6 (/128s).
	announced6 int
	syncing    bool
	// limitedAt is when GoBGP shut the session down because the router sent more than
	// MaxReceivedPrefixes routes; zero otherwise.
	limitedAt time.Time
	// bfd is GoBGP's last reported state of the BFD session; empty until known.
	bfd v1alpha1.BFDSessionState
	// bfdReset says why BFD declared the router down, from the moment GoBGP logged it
	// until the session it resets is reported down (GoBGP reports that reset only as a
	// NOTIFICATION this speaker sent, a Cease).
	bfdReset string
}

func newSession(p Peer, now time.Time) *session {
	return &session{peer: p, state: v1alpha1.BGPSessionConnecting, since: now, fsm: bgp.BGP_FSM_IDLE}
}

// set moves the session to state with message and reports whether anything changed.
// since only moves when the state does, so a repeated error keeps its first time.
func (s *session) set(state v1alpha1.BGPSessionState, message string, now time.Time) bool {
	if s.state == state && s.message == message {
		return false
	}
	if s.state != state {
		s.since = now
	}
	s.state, s.message = state, message
	return true
}

// dialFailed records a failed connection attempt (errText is the dialer's error).
func (s *session) dialFailed(errText string, c Config, now time.Time) bool {
	if s.fsm == bgp.BGP_FSM_ESTABLISHED {
		return false // a late report of an attempt that lost against the session
	}
	state, message := dialErrorState(errText, s.peer, c)
	return s.set(state, message, now)
}

// notificationSent records a NOTIFICATION this speaker sent while setting up a
// session (from GoBGP's log; an Established session reports it as an event).
func (s *session) notificationSent(code, subcode uint8, now time.Time) bool {
	if s.fsm == bgp.BGP_FSM_ESTABLISHED {
		return false
	}
	detail := "notification-sent " + notificationText(code, subcode)
	state, message, ok := disconnectState(api.PeerState_DISCONNECT_REASON_NOTIFICATION_SENT, detail, s.fsm, s.peer)
	return ok && s.set(state, message, now)
}

// setupFailed records that a connection this speaker dialed broke before the router's
// OPEN arrived (reason "read-failed" or "write-failed"): the router accepted the TCP
// connection and closed it. A router does that when it has no neighbor for this Node,
// but also for a while after it rejected this Node (BIRD's "error wait time"), so this
// does not replace a WrongASN found before.
func (s *session) setupFailed(reason string, now time.Time) bool {
	if s.fsm == bgp.BGP_FSM_ESTABLISHED || s.state == v1alpha1.BGPSessionWrongASN {
		return false
	}
	var r api.PeerState_DisconnectReason
	switch reason {
	case "read-failed":
		r = api.PeerState_DISCONNECT_REASON_READ_FAILED
	case "write-failed":
		r = api.PeerState_DISCONNECT_REASON_WRITE_FAILED
	default:
		return false
	}
	state, message, _ := disconnectState(r, reason, bgp.BGP_FSM_OPENSENT, s.peer)
	return s.set(state, message, now)
}

// peerEvent records a state change GoBGP reported, with the reason of a disconnection.
func (s *session) peerEvent(fsm bgp.FSMState, reason api.PeerState_DisconnectReason, detail string, now time.Time) bool {
	prev := s.fsm
	s.fsm = fsm
	if fsm == bgp.BGP_FSM_ESTABLISHED {
		s.bfdReset = ""
		return s.set(v1alpha1.BGPSessionEstablished, "", now)
	}
	changed := s.announced != 0 || s.syncing
	s.announced, s.announced6, s.syncing = 0, 0, false
	if s.peer.BFD.Enabled && s.bfd != v1alpha1.BFDDown {
		// GoBGP runs no BFD session for a session that is not Established.
		s.bfd, changed = v1alpha1.BFDDown, true
	}
	if s.bfdReset != "" {
		message := s.bfdReset
		s.bfdReset = ""
		return s.set(v1alpha1.BGPSessionUnreachable, message, now) || changed
	}
	if state, message, ok := disconnectState(reason, detail, prev, s.peer); ok {
		return s.set(state, message, now) || changed
	}
	if s.state == v1alpha1.BGPSessionEstablished {
		return s.set(v1alpha1.BGPSessionConnecting, "the session went down; connecting again", now) || changed
	}
	return changed
}

// bfdDown records that BFD declared the router down (remote: the router signalled
// Down): the session reset that follows is reported with this reason.
func (s *session) bfdDown(remote bool) bool {
	if remote {
		s.bfdReset = "BFD: the router declared its BFD session with this Node down (it stopped receiving this Node's BFD packets, " +
			"or its BFD for this Node was shut down); the BGP session was reset and the Node connects again"
	} else {
		s.bfdReset = "BFD: no BFD packet from the router within the detection time (the router or the link to it is down, " +
			"or its BFD stopped); the BGP session was reset and the Node connects again"
	}
	changed := s.bfd != v1alpha1.BFDDown
	s.bfd = v1alpha1.BFDDown
	return changed
}

// bfdState is the BFD state of the session for status: empty without BFD, Down until
// GoBGP reports another.
func (s *session) bfdState() v1alpha1.BFDSessionState {
	switch {
	case !s.peer.BFD.Enabled:
		return ""
	case s.bfd == "":
		return v1alpha1.BFDDown
	}
	return s.bfd
}

// bfdStateOf maps GoBGP's BFD state; empty when GoBGP runs no BFD session with the peer
// (yet).
func bfdStateOf(st api.BfdSessionState) v1alpha1.BFDSessionState {
	switch st {
	case api.BfdSessionState_BFD_SESSION_STATE_UP:
		return v1alpha1.BFDUp
	case api.BfdSessionState_BFD_SESSION_STATE_DOWN:
		return v1alpha1.BFDDown
	case api.BfdSessionState_BFD_SESSION_STATE_INIT:
		return v1alpha1.BFDInit
	case api.BfdSessionState_BFD_SESSION_STATE_ADMIN_DOWN:
		return v1alpha1.BFDAdminDown
	}
	return ""
}

// prefixLimit records that GoBGP shut the session down (its peer administratively down)
// because the router sent more than MaxReceivedPrefixes routes of a family; the speaker
// enables the peer again after retry.
func (s *session) prefixLimit(retry time.Duration, now time.Time) bool {
	s.limitedAt = now
	s.announced, s.announced6, s.syncing = 0, 0, false
	return s.set(v1alpha1.BGPSessionFailed, fmt.Sprintf(
		"the router sent more than %d routes of one address family; this Node uses none of the routes it receives and "+
			"disconnects a router that sends that many (docs/bgp.md#received-routes): configure the router to send the Nodes nothing; "+
			"this Node connects again %s after it disconnected", MaxReceivedPrefixes, retry), now)
}

// status is the PeerStatus of the session.
func (s *session) status() PeerStatus {
	announced, announced6 := s.announced, s.announced6
	if s.state != v1alpha1.BGPSessionEstablished || s.syncing {
		announced, announced6 = 0, 0
	}
	return PeerStatus{Name: s.peer.Name, Address: s.peer.Address, State: s.state, Message: s.message,
		Since: s.since, PrefixesAnnounced: announced, IPv6Announced: announced6, BFD: s.bfdState()}
}

// dialErrorState maps a failed TCP connection attempt to a session state.
//
// A router that checks TCP-MD5 signatures (RFC 2385) drops every segment whose
// signature is missing or wrong without an answer, just as a host that is down or
// filtered: when a password is configured, an unanswered attempt most likely means a
// password mismatch, and is reported as such, with the other possibility named.
func dialErrorState(errText string, p Peer, c Config) (v1alpha1.BGPSessionState, string) {
	port := c.Port
	if port == 0 {
		port = bgp.BGP_PORT
	}
	has := func(errnos ...syscall.Errno) bool {
		for _, e := range errnos {
			if strings.Contains(errText, e.Error()) {
				return true
			}
		}
		return false
	}
	switch {
	case has(syscall.ECONNREFUSED):
		return v1alpha1.BGPSessionRefused, fmt.Sprintf(
			"the router refused the TCP connection to port %d: it does not listen there, or does not accept connections from this Node", port)
	case has(syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.EHOSTDOWN):
		return v1alpha1.BGPSessionUnreachable, fmt.Sprintf("cannot reach the router: %s", lastPart(errText))
	case strings.Contains(errText, "i/o timeout") || has(syscall.ETIMEDOUT):
		wait := c.dialTimeout()
		if p.Password != "" {
			return v1alpha1.BGPSessionAuthenticationFailed, fmt.Sprintf(
				"no answer within %s to TCP connections signed with the TCP-MD5 password: the router drops segments whose signature "+
					"does not match, so its password for this Node differs (or the router does not answer on port %d at all)", wait, port)
		}
		return v1alpha1.BGPSessionUnreachable, fmt.Sprintf(
			"no answer within %s to TCP connections to port %d (a router that requires a TCP-MD5 password drops connections without one)", wait, port)
	}
	return v1alpha1.BGPSessionFailed, "connecting to the router failed: " + errText
}

// lastPart is the text after the last ": " of an error (the errno's words).
func lastPart(errText string) string {
	if i := strings.LastIndex(errText, ": "); i >= 0 {
		return errText[i+2:]
	}
	return errText
}

// notificationText is GoBGP's rendering of a NOTIFICATION code, as it appears in the
// detail of a disconnection: "code 2(open) subcode 2(bad peer as)".
func notificationText(code, subcode uint8) string {
	return bgp.NewNotificationErrorCode(code, subcode).String()
}

// notificationCode extracts the code text from a disconnection detail such as
// "notification-received code 2(open) subcode 2(bad peer as)".
func notificationCode(detail string) string {
	if _, code, ok := strings.Cut(detail, " "); ok {
		return code
	}
	return detail
}

// isCode reports whether a NOTIFICATION's text is of the given code (any subcode).
func isCode(codeText string, code uint8) bool {
	name, _, _ := strings.Cut(notificationText(code, 0), " subcode")
	return strings.HasPrefix(codeText, name+" subcode")
}

var notificationWords = regexp.MustCompile(`^code \d+\((.*)\) subcode \d+\((.*)\)$`)

// readable renders a NOTIFICATION's text for people: "open: bad peer as".
func readable(codeText string) string {
	m := notificationWords.FindStringSubmatch(codeText)
	switch {
	case m == nil:
		return codeText
	case m[2] == "undefined" || m[2] == m[1]:
		return m[1]
	}
	return m[1] + ": " + m[2]
}

// openRejected is the state of a session the router refused right after the OPEN
// exchange. GoBGP does not pass on the NOTIFICATION a router sends in place of its
// KEEPALIVE or OPEN, only that it got an unexpected message; juneau controls its own
// OPEN (4-byte AS, hold time of at least 3s, a unique BGP identifier, IPv4 unicast with
// graceful restart), so what a router rejects there is in practice the AS number.
func openRejected(p Peer) (v1alpha1.BGPSessionState, string) {
	return v1alpha1.BGPSessionWrongASN, fmt.Sprintf(
		"the router rejected this Node's OPEN message: most likely it expects another AS number than myASN %d "+
			"(check the AS the router has configured for this Node's address)", p.MyASN)
}

// disconnectState maps the reason of a disconnection to a session state. ok is false
// for reasons that are not errors of the session (this speaker removed or reset the
// peer, timers of its own FSM, a graceful restart of the router).
func disconnectState(reason api.PeerState_DisconnectReason, detail string, prev bgp.FSMState, p Peer) (v1alpha1.BGPSessionState, string, bool) {
	code := notificationCode(detail)
	words := readable(code)
	switch reason {
	case api.PeerState_DISCONNECT_REASON_BAD_PEER_AS:
		return v1alpha1.BGPSessionWrongASN, fmt.Sprintf(
			"the router's OPEN message carries an AS number other than peerASN %d", p.PeerASN), true
	case api.PeerState_DISCONNECT_REASON_NOTIFICATION_RECEIVED:
		switch {
		case code == notificationText(bgp.BGP_ERROR_OPEN_MESSAGE_ERROR, bgp.BGP_ERROR_SUB_BAD_PEER_AS):
			return v1alpha1.BGPSessionWrongASN, fmt.Sprintf(
				"the router rejected this Node's AS number %d (myASN): it expects another one (notification %q)", p.MyASN, words), true
		case code == notificationText(bgp.BGP_ERROR_OPEN_MESSAGE_ERROR, bgp.BGP_ERROR_SUB_DEPRECATED_AUTHENTICATION_FAILURE):
			return v1alpha1.BGPSessionAuthenticationFailed, fmt.Sprintf("the router reported an authentication failure (notification %q)", words), true
		case isCode(code, bgp.BGP_ERROR_CEASE):
			return v1alpha1.BGPSessionRefused, fmt.Sprintf("the router ended the session (notification %q)", words), true
		case isCode(code, bgp.BGP_ERROR_HOLD_TIMER_EXPIRED):
			return v1alpha1.BGPSessionUnreachable, "the router heard nothing from this Node within the hold time", true
		}
		return v1alpha1.BGPSessionFailed, fmt.Sprintf("the router ended the session with an error (notification %q)", words), true
	case api.PeerState_DISCONNECT_REASON_NOTIFICATION_SENT:
		switch {
		case code == notificationText(bgp.BGP_ERROR_OPEN_MESSAGE_ERROR, bgp.BGP_ERROR_SUB_BAD_PEER_AS):
			return v1alpha1.BGPSessionWrongASN, fmt.Sprintf(
				"the router's OPEN message carries an AS number other than peerASN %d", p.PeerASN), true
		case isCode(code, bgp.BGP_ERROR_HOLD_TIMER_EXPIRED):
			return v1alpha1.BGPSessionUnreachable, "no message from the router within the hold time", true
		case isCode(code, bgp.BGP_ERROR_CEASE):
			return "", "", false // this speaker removed, reset or replaced the session
		case isCode(code, bgp.BGP_ERROR_FSM_ERROR) && prev != bgp.BGP_FSM_ESTABLISHED:
			// The router answered the OPEN exchange with something else: its NOTIFICATION.
			state, message := openRejected(p)
			return state, message, true
		}
		return v1alpha1.BGPSessionFailed, fmt.Sprintf("this Node ended the session with an error (notification %q)", words), true
	case api.PeerState_DISCONNECT_REASON_HOLD_TIMER_EXPIRED:
		return v1alpha1.BGPSessionUnreachable, "no message from the router within the hold time", true
	case api.PeerState_DISCONNECT_REASON_READ_FAILED, api.PeerState_DISCONNECT_REASON_WRITE_FAILED:
		if prev != bgp.BGP_FSM_ESTABLISHED {
			return v1alpha1.BGPSessionRefused, "the router closed the connection before the session was established: " +
				"check that it has this Node's address and AS number (myASN) configured as a neighbor", true
		}
		return v1alpha1.BGPSessionFailed, "the router closed the connection", true
	case api.PeerState_DISCONNECT_REASON_INVALID_MSG:
		if prev == bgp.BGP_FSM_OPENSENT || prev == bgp.BGP_FSM_OPENCONFIRM {
			state, message := openRejected(p)
			return state, message, true
		}
		return v1alpha1.BGPSessionFailed, "the router sent a message this Node cannot accept", true
	case api.PeerState_DISCONNECT_REASON_HARD_RESET:
		return v1alpha1.BGPSessionFailed, "the session was reset (" + detail + ")", true
	}
	return "", "", false
}
