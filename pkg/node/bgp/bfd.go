package bgp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// BFD runs only while a session is Established: GoBGP gets a peer's BFD configuration
// when its session comes up and loses it when the session goes down (armBFD).
//
// Why not from the start: FRR's bgpd asks bfdd for the BFD session of a passive
// neighbor before the BGP session is up, without a local address, and replaces it
// with one bound to the session's local address and interface once the session is
// Established. When GoBGP's BFD came up with the first one, the replacement starts in
// Down, which GoBGP takes for the router declaring it down: it resets the new BGP
// session with a NOTIFICATION, and FRR, told so, drops the Node's routes (even those
// it kept for a graceful restart). BFD that starts with the Established session meets
// the replacement only. BFD watches an Established session; before that there is
// nothing for it to take down.

// withBFD is p with the given BFD.
func (p Peer) withBFD(b BFD) Peer {
	p.BFD = b
	return p
}

// armBFD gives GoBGP the BFD of every configured peer whose session is Established,
// and takes it away from the others, with UpdatePeer (which leaves the BGP session
// alone).
func (s *Speaker) armBFD(ctx context.Context, srv *server.BgpServer, cfg Config, st *applied) error {
	var errs []error
	for addr, p := range st.peers {
		want := BFD{}
		if p.BFD.Enabled && s.established(addr) {
			want = p.BFD
		}
		if st.bfd[addr] == want {
			continue
		}
		if _, err := srv.UpdatePeer(ctx, &api.UpdatePeerRequest{Peer: peerRequest(p.withBFD(want), cfg, false)}); err != nil {
			errs = append(errs, fmt.Errorf("setting the BFD of peer %s (%s): %w", p.Name, addr, err))
			continue
		}
		st.bfd[addr] = want
		klog.FromContext(ctx).V(2).Info("BFD for BGP peer", "peer", p.Name, "address", addr, "running", want.Enabled)
	}
	return errors.Join(errs...)
}

// established reports whether the session with addr is Established.
func (s *Speaker) established(addr netip.Addr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[addr]
	return ok && sess.fsm == bgp.BGP_FSM_ESTABLISHED
}

// retuned keeps the status of a session whose BFD changed under it.
func (s *Speaker) retuned(p Peer) {
	s.mu.Lock()
	if sess, ok := s.sessions[p.Address]; ok {
		sess.peer = p
		if !p.BFD.Enabled {
			sess.bfd, sess.bfdReset = "", ""
		}
	}
	s.mu.Unlock()
	poke(s.changed)
}

// bfdDown receives from the log handler that BFD declared a router down.
func (s *Speaker) bfdDown(addr netip.Addr, remote bool) {
	s.mu.Lock()
	sess, ok := s.sessions[addr]
	changed := ok && sess.bfdDown(remote)
	s.mu.Unlock()
	if changed {
		poke(s.changed)
	}
}

// refreshBFD records the BFD state GoBGP reports for a session (s.mu held); GoBGP runs
// no BFD session while the BGP session is not Established, which is Down for status.
// It reports whether the state changed.
func (s *Speaker) refreshBFD(logger klog.Logger, sess *session, st api.BfdSessionState) bool {
	if !sess.peer.BFD.Enabled {
		return false
	}
	bfd := bfdStateOf(st)
	if bfd == "" || sess.fsm != bgp.BGP_FSM_ESTABLISHED {
		// A read-back can still show the BFD state of a session that has since gone down.
		bfd = v1alpha1.BFDDown
	}
	from := sess.bfdState()
	sess.bfd = bfd
	if bfd == from {
		return false
	}
	logger.Info("BFD session changed state", "peer", sess.peer.Name, "address", sess.peer.Address, "from", from, "to", bfd)
	return true
}
