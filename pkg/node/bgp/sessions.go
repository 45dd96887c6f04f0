package bgp

import (
	"context"
	"net/netip"
	"runtime/debug"
	"time"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// The status of the sessions (Status): kept per configured peer, from GoBGP's
// session events, the failures its log tells, and what is read back from it.

// track starts the status of a peer about to be configured, or keeps the status of
// the same peer whose configuration failed before (see addFailed).
func (s *Speaker) track(p Peer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.sessions[p.Address]; ok && old.peer == p {
		return
	}
	since, ok := s.desiredSince[p.Address]
	if !ok {
		since = s.clock.Now()
	}
	s.sessions[p.Address] = newSession(p, since)
}

// addFailed reports a peer GoBGP refused to configure; the next apply tries again.
func (s *Speaker) addFailed(p Peer, err error) {
	s.mu.Lock()
	changed := false
	if sess, ok := s.sessions[p.Address]; ok {
		changed = sess.set(v1alpha1.BGPSessionFailed, "configuring the session failed: "+err.Error(), s.clock.Now())
	}
	s.mu.Unlock()
	if changed {
		poke(s.changed)
	}
}

func (s *Speaker) forget(addr netip.Addr) {
	s.mu.Lock()
	delete(s.sessions, addr)
	s.mu.Unlock()
}

// peerUpdate receives GoBGP's session events.
func (s *Speaker) peerUpdate(ev *apiutil.WatchEventMessage_PeerEvent, at time.Time) {
	if ev.Type != apiutil.PEER_EVENT_STATE {
		return
	}
	st := ev.Peer.State
	s.mu.Lock()
	sess, ok := s.sessions[ev.Peer.Conf.NeighborAddress]
	changed := false
	if ok && st.AdminState == api.PeerState_ADMIN_STATE_PFX_CT && sess.limitedAt.IsZero() {
		changed = sess.prefixLimit(s.runCfg.PrefixLimitRetry, at)
	} else if ok && !sess.limitedAt.IsZero() && st.SessionState != bgp.BGP_FSM_ESTABLISHED {
		// The shutdown's own events: the session stays Failed until it is enabled again.
		sess.fsm = st.SessionState
	} else if ok {
		wasEstablished := sess.fsm == bgp.BGP_FSM_ESTABLISHED
		changed = sess.peerEvent(st.SessionState, st.DisconnectReason, st.DisconnectMessage, at)
		if (sess.fsm == bgp.BGP_FSM_ESTABLISHED) != wasEstablished && sess.peer.BFD.Enabled {
			poke(s.trigger) // armBFD
		}
	}
	s.mu.Unlock()
	if changed {
		poke(s.changed)
	}
	poke(s.refresh)
}

var _ peerLog = (*Speaker)(nil)

// dialFailed receives failed connection attempts from the log handler.
func (s *Speaker) dialFailed(addr netip.Addr, errText string) {
	s.mu.Lock()
	sess, ok := s.sessions[addr]
	changed := ok && sess.dialFailed(errText, s.runCfg, s.clock.Now())
	s.mu.Unlock()
	if changed {
		poke(s.changed)
	}
}

// notificationSent receives the NOTIFICATIONs sent during session setup from the log
// handler.
func (s *Speaker) notificationSent(addr netip.Addr, code, subcode uint8) {
	s.mu.Lock()
	sess, ok := s.sessions[addr]
	changed := ok && sess.notificationSent(code, subcode, s.clock.Now())
	s.mu.Unlock()
	if changed {
		poke(s.changed)
	}
}

// setupFailed receives the sessions the router closed during setup from the log
// handler.
func (s *Speaker) setupFailed(addr netip.Addr, reason string) {
	s.mu.Lock()
	sess, ok := s.sessions[addr]
	changed := ok && sess.setupFailed(reason, s.clock.Now())
	s.mu.Unlock()
	if changed {
		poke(s.changed)
	}
}

// limited reports whether the peer at addr is left out for sending too many routes.
func (s *Speaker) limited(addr netip.Addr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[addr]
	return ok && !sess.limitedAt.IsZero()
}

// resetLimited removes from GoBGP the peers it shut down for sending too many routes
// (session.prefixLimit): GoBGP would otherwise keep their routes as stale ones for the
// router's graceful restart time, and count them against the limit again on the next
// session. Their status stays Failed; retry after the shutdown the apply loop adds them
// again.
func (s *Speaker) resetLimited(ctx context.Context, srv *server.BgpServer, retry time.Duration, st *applied) {
	now := s.clock.Now()
	type limitedPeer struct {
		addr netip.Addr
		due  bool
	}
	var list []limitedPeer
	s.mu.Lock()
	for addr, sess := range s.sessions {
		if !sess.limitedAt.IsZero() {
			list = append(list, limitedPeer{addr, now.Sub(sess.limitedAt) >= retry})
		}
	}
	s.mu.Unlock()
	logger := klog.FromContext(ctx)
	for _, l := range list {
		if p, configured := st.peers[l.addr]; configured {
			if err := srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: l.addr.String()}); err != nil {
				logger.Error(err, "Removing a BGP peer that sent too many routes", "address", l.addr)
				continue
			}
			delete(st.peers, l.addr)
			delete(st.bfd, l.addr)
			logger.Info("Removed a BGP peer that sent too many routes", "peer", p.Name, "address", l.addr,
				"maxPrefixes", MaxReceivedPrefixes, "retryAfter", retry)
			// What GoBGP read of its UPDATEs before the limit tripped is garbage now:
			// handed back to the kernel at once, not over the minutes the runtime's
			// scavenger takes (docs/bgp.md#received-routes). A collection now and then
			// is cheap beside a router that sends a full table.
			go debug.FreeOSMemory()
		}
		if !l.due {
			continue
		}
		s.mu.Lock()
		if sess, ok := s.sessions[l.addr]; ok {
			sess.limitedAt = time.Time{}
			sess.set(v1alpha1.BGPSessionConnecting, "connecting again after the router sent too many routes", now)
		}
		s.mu.Unlock()
		poke(s.changed)
		poke(s.trigger)
	}
}

// refreshStatus reads the sessions back from GoBGP: prefixes sent, whether a restarted
// speaker still holds its routes back, the BFD state (GoBGP sends no event for it), and
// Established as a safety net for a missed event.
func (s *Speaker) refreshStatus(ctx context.Context, srv *server.BgpServer) {
	var peers []*api.Peer
	logger := klog.FromContext(ctx)
	if err := srv.ListPeer(ctx, &api.ListPeerRequest{EnableAdvertised: true}, func(p *api.Peer) { peers = append(peers, p) }); err != nil {
		logger.V(2).Info("Reading the BGP sessions failed", "err", err)
		return
	}
	now := s.clock.Now()
	changed := false
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range peers {
		addr, err := netip.ParseAddr(p.GetConf().GetNeighborAddress())
		sess, ok := s.sessions[addr]
		if err != nil || !ok {
			continue
		}
		established := p.GetState().GetSessionState() == api.PeerState_SESSION_STATE_ESTABLISHED
		switch {
		case established && sess.fsm != bgp.BGP_FSM_ESTABLISHED:
			changed = sess.peerEvent(bgp.BGP_FSM_ESTABLISHED, api.PeerState_DISCONNECT_REASON_UNSPECIFIED, "", now) || changed
			poke(s.trigger) // armBFD
		case !established && sess.fsm == bgp.BGP_FSM_ESTABLISHED:
			changed = sess.peerEvent(bgp.BGP_FSM_IDLE, api.PeerState_DISCONNECT_REASON_UNSPECIFIED, "", now) || changed
			poke(s.trigger)
		}
		changed = s.refreshBFD(logger, sess, p.GetState().GetBfdState().GetSessionState()) || changed
		announced, announced6, syncing := 0, 0, p.GetGracefulRestart().GetLocalRestarting()
		for _, af := range p.GetAfiSafis() {
			n := int(af.GetState().GetAdvertised())
			announced += n
			if af.GetConfig().GetFamily().GetAfi() == api.Family_AFI_IP6 {
				announced6 += n
			}
		}
		if !established {
			announced, announced6 = 0, 0
		}
		if announced != sess.announced || announced6 != sess.announced6 || syncing != sess.syncing {
			sess.announced, sess.announced6, sess.syncing = announced, announced6, syncing
			changed = true
		}
	}
	if changed {
		poke(s.changed)
	}
}

// poke sends on a channel of capacity 1 without blocking.
func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
