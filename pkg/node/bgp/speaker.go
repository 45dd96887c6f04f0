package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/server"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// Timing of the apply loop.
const (
	// refreshInterval: how often the prefix counts and the graceful restart state of
	// the sessions are read back from GoBGP (it sends no event when a restarted
	// speaker's routes go out).
	refreshInterval = time.Second
	retryMin        = 500 * time.Millisecond
	retryMax        = 30 * time.Second
)

// Speaker announces /32s to BGP peers. Create it with New, run it with Run.
type Speaker struct {
	cfg   Config
	clock clock.WithTicker
	// withdraw says what a stop does (Config.WithdrawOnStop, SetWithdrawOnStop).
	withdraw atomic.Bool

	mu           sync.Mutex
	peers        map[netip.Addr]Peer // desired, valid, one per address
	desiredSince map[netip.Addr]time.Time
	rejected     []rejection
	rejectedAt   map[string]time.Time
	prefixes     map[netip.Prefix]attrs // desired
	peersSet     bool
	prefixesSet  bool
	runCfg       Config                  // cfg with defaults, set by Run
	sessions     map[netip.Addr]*session // configured in GoBGP
	announced    []netip.Prefix          // in GoBGP's table, sorted

	trigger chan struct{}
	refresh chan struct{}
	changed chan struct{}
}

// New returns a speaker; it starts nothing (see Run).
func New(cfg Config) *Speaker {
	s := &Speaker{
		cfg:          cfg,
		clock:        clock.RealClock{},
		peers:        map[netip.Addr]Peer{},
		desiredSince: map[netip.Addr]time.Time{},
		rejectedAt:   map[string]time.Time{},
		prefixes:     map[netip.Prefix]attrs{},
		sessions:     map[netip.Addr]*session{},
		trigger:      make(chan struct{}, 1),
		refresh:      make(chan struct{}, 1),
		changed:      make(chan struct{}, 1),
	}
	s.withdraw.Store(cfg.WithdrawOnStop)
	return s
}

// SetWithdrawOnStop decides, until Run returns, what its end does: withdraw every route
// at once (a Cease NOTIFICATION to each peer) or leave them to graceful restart. The
// node agent decides it only when it stops (pkg/node/shutdown): an uninstall withdraws.
func (s *Speaker) SetWithdrawOnStop(withdraw bool) { s.withdraw.Store(withdraw) }

// SetPeers replaces the set of peers. A peer that changes in any way gets a new
// session. The first call after a start should carry the complete set: only the peers
// of the first set are told that this speaker restarted (graceful restart).
func (s *Speaker) SetPeers(peers []Peer) {
	desired, rejected := desiredPeers(peers)
	now := s.clock.Now()
	s.mu.Lock()
	for addr, p := range desired {
		if old, ok := s.peers[addr]; !ok || old != p {
			s.desiredSince[addr] = now
		}
	}
	for addr := range s.desiredSince {
		if _, ok := desired[addr]; !ok {
			delete(s.desiredSince, addr)
		}
	}
	at := map[string]time.Time{}
	for _, r := range rejected {
		at[r.peer.Name] = now
		if t, ok := s.rejectedAt[r.peer.Name]; ok {
			at[r.peer.Name] = t
		}
	}
	same := s.peersSet && maps.Equal(desired, s.peers) && slices.Equal(rejected, s.rejected)
	s.peers, s.rejected, s.rejectedAt, s.peersSet = desired, rejected, at, true
	s.mu.Unlock()
	if same {
		// The agent hands over its peers at every sync: telling it that nothing
		// changed would bring its next sync, and that one the next, forever.
		return
	}
	poke(s.trigger)
	poke(s.changed)
}

// NextHop6 is the next hop of the IPv6 /128s (Config.NextHop6); invalid when the
// speaker announces no IPv6 address.
func (s *Speaker) NextHop6() netip.Addr { return s.cfg.NextHop6 }

// SetAnnouncements replaces the set of announced prefixes, each an IPv4 /32 or an IPv6
// /128, announced with the attributes with gives it (no community and MED 0 when
// absent). Other prefixes, and IPv6 ones while the speaker has no IPv6 next hop
// (Config.NextHop6), are left out and reported in the error, as are malformed
// communities (the prefix goes out without them). A prefix whose attributes change is
// announced again.
func (s *Speaker) SetAnnouncements(prefixes []netip.Prefix, with map[netip.Prefix]PathAttributes) error {
	desired := make(map[netip.Prefix]attrs, len(prefixes))
	var bad, noNextHop, badCommunities []string
	for _, p := range prefixes {
		switch {
		case !p.IsValid() || p.Bits() != p.Addr().BitLen() || p.Addr().Is4In6():
			bad = append(bad, p.String())
		case p.Addr().Is6() && !s.cfg.NextHop6.IsValid():
			noNextHop = append(noNextHop, p.String())
		default:
			a, err := attrsOf(with[p].Communities)
			if err != nil {
				badCommunities = append(badCommunities, fmt.Sprintf("%s: %v", p, err))
			}
			a.med = with[p].MED
			desired[p] = a
		}
	}
	s.mu.Lock()
	s.prefixes, s.prefixesSet = desired, true
	s.mu.Unlock()
	poke(s.trigger)
	var errs []error
	if len(bad) > 0 {
		errs = append(errs, fmt.Errorf("not announced, not an IPv4 /32 or IPv6 /128: %s", strings.Join(bad, ", ")))
	}
	if len(noNextHop) > 0 {
		errs = append(errs, fmt.Errorf("not announced, this Node has no global IPv6 address on its external interface for the next hop: %s",
			strings.Join(noNextHop, ", ")))
	}
	if len(badCommunities) > 0 {
		errs = append(errs, fmt.Errorf("announced without malformed communities: %s", strings.Join(badCommunities, "; ")))
	}
	return errors.Join(errs...)
}

// Changed receives a value after the Status changed (coalesced: one value may stand
// for several changes).
func (s *Speaker) Changed() <-chan struct{} { return s.changed }

// Status returns the state of every peer of the last SetPeers, sorted by name, and the
// prefixes announced.
func (s *Speaker) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Status{Announced: slices.Clone(s.announced)}
	for addr, p := range s.peers {
		if sess, ok := s.sessions[addr]; ok && sess.peer == p {
			out.Peers = append(out.Peers, sess.status())
			continue
		}
		out.Peers = append(out.Peers, PeerStatus{Name: p.Name, Address: addr, State: v1alpha1.BGPSessionConnecting,
			Since: s.desiredSince[addr], BFD: newSession(p, time.Time{}).bfdState()})
	}
	for _, r := range s.rejected {
		out.Peers = append(out.Peers, PeerStatus{Name: r.peer.Name, Address: r.peer.Address, State: v1alpha1.BGPSessionFailed,
			Message: r.reason, Since: s.rejectedAt[r.peer.Name]})
	}
	slices.SortFunc(out.Peers, func(a, b PeerStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Run runs the speaker until ctx ends, then closes its sessions (see the package
// documentation for what routers do then). It fails only when the speaker cannot
// start.
func (s *Speaker) Run(ctx context.Context) error {
	cfg, err := s.cfg.withDefaults()
	if err != nil {
		return fmt.Errorf("BGP speaker: %w", err)
	}
	logger := klog.FromContext(ctx).WithName("bgp")
	ctx = klog.NewContext(ctx, logger)
	s.mu.Lock()
	s.runCfg = cfg
	s.mu.Unlock()

	var stopping atomic.Bool
	level := &slog.LevelVar{}
	level.Set(slog.LevelDebug)
	srv := server.NewBgpServer(server.LoggerOption(slog.New(newLogHandler(logger, s, &stopping)), level))
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve()
	}()
	stop := func(withdraw bool) {
		stopping.Store(true)
		if err := srv.StopBgp(context.Background(), &api.StopBgpRequest{AllowGracefulRestart: !withdraw}); err != nil {
			logger.Error(err, "Stopping the BGP speaker")
		}
		srv.Stop() // the rest of GoBGP (its BFD loop); BGP itself is stopped already
		<-served
	}

	if err := s.start(ctx, srv, cfg); err != nil {
		stop(true)
		return err
	}
	logger.Info("BGP speaker started", "routerID", cfg.RouterID, "restartTime", cfg.RestartTime, "withdrawOnStop", s.withdraw.Load())

	st := &applied{restarting: true, peers: map[netip.Addr]Peer{}, bfd: map[netip.Addr]BFD{}, paths: map[netip.Prefix]attrs{}}
	refresh := s.clock.NewTicker(refreshInterval)
	defer refresh.Stop()
	var retry clock.Timer
	retryC := func() <-chan time.Time {
		if retry == nil {
			return nil
		}
		return retry.C()
	}
	backoff := retryMin
	for {
		select {
		case <-ctx.Done():
			if retry != nil {
				retry.Stop()
			}
			withdraw := s.withdraw.Load()
			stop(withdraw)
			logger.Info("BGP speaker stopped", "withdrew", withdraw)
			return nil
		case <-refresh.C():
			s.refreshStatus(ctx, srv)
			s.resetLimited(ctx, srv, cfg.PrefixLimitRetry, st)
			continue
		case <-s.refresh:
			s.refreshStatus(ctx, srv)
			s.resetLimited(ctx, srv, cfg.PrefixLimitRetry, st)
			continue
		case <-s.trigger:
		case <-retryC():
			retry = nil
		}
		err := s.apply(ctx, srv, cfg, st)
		s.refreshStatus(ctx, srv)
		if err == nil {
			backoff = retryMin
			continue
		}
		logger.Error(err, "Applying the BGP configuration failed; retrying", "after", backoff)
		if retry == nil {
			retry = s.clock.NewTimer(backoff)
		}
		backoff = min(2*backoff, retryMax)
	}
}

// start configures GoBGP: no listening socket, routes received from peers rejected,
// and a watch on session state changes.
func (s *Speaker) start(ctx context.Context, srv *server.BgpServer, cfg Config) error {
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: globalASN, RouterId: cfg.RouterID.String(), ListenPort: -1,
	}}); err != nil {
		return fmt.Errorf("starting the BGP speaker: %w", err)
	}
	policy, assignment := importPolicy()
	if err := srv.AddPolicy(ctx, &api.AddPolicyRequest{Policy: policy}); err != nil {
		return fmt.Errorf("defining the import policy: %w", err)
	}
	if err := srv.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: assignment}); err != nil {
		return fmt.Errorf("rejecting received routes: %w", err)
	}
	if err := srv.WatchEvent(ctx, server.WatchEventMessageCallbacks{OnPeerUpdate: s.peerUpdate}, server.WatchPeer()); err != nil {
		return fmt.Errorf("watching BGP sessions: %w", err)
	}
	return nil
}

// applied is what the apply loop has configured in GoBGP.
type applied struct {
	// restarting holds until the first set of peers is configured.
	restarting bool
	peers      map[netip.Addr]Peer
	// bfd is the BFD configured in GoBGP for each peer of peers: its BFD while the
	// session is Established, none otherwise (see armBFD).
	bfd   map[netip.Addr]BFD
	paths map[netip.Prefix]attrs
}

// apply moves GoBGP to the desired state: paths first (so that a restarted speaker has
// them all before its first session), then peers. It waits for both sets.
func (s *Speaker) apply(ctx context.Context, srv *server.BgpServer, cfg Config, st *applied) error {
	s.mu.Lock()
	ready := s.peersSet && s.prefixesSet
	desiredPeers := maps.Clone(s.peers)
	desiredPrefixes := maps.Clone(s.prefixes)
	s.mu.Unlock()
	if !ready {
		return nil
	}
	logger := klog.FromContext(ctx)
	var errs []error

	withdraw, announce := prefixChanges(desiredPrefixes, st.paths)
	for _, p := range withdraw {
		path, err := pathFor(p, cfg.NextHop6, attrs{})
		if err == nil {
			err = srv.DeletePath(apiutil.DeletePathRequest{Paths: []*apiutil.Path{path}})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("withdrawing %s: %w", p, err))
			continue
		}
		delete(st.paths, p)
		logger.V(2).Info("Withdrew", "prefix", p)
	}
	if len(announce) > 0 {
		errs = append(errs, s.announce(srv, announce, desiredPrefixes, cfg.NextHop6, st, logger))
	}
	s.setAnnounced(st.paths)

	remove, add, retune := peerChanges(desiredPeers, st.peers)
	for _, p := range remove {
		if err := srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: p.Address.String()}); err != nil {
			errs = append(errs, fmt.Errorf("removing peer %s (%s): %w", p.Name, p.Address, err))
			continue
		}
		delete(st.peers, p.Address)
		delete(st.bfd, p.Address)
		s.forget(p.Address)
		logger.Info("Removed BGP peer", "peer", p.Name, "address", p.Address)
	}
	for _, p := range add {
		if _, still := st.peers[p.Address]; still {
			continue // its old configuration could not be removed
		}
		if s.limited(p.Address) {
			continue // resetLimited adds it again in time
		}
		s.track(p)
		// Without BFD: armBFD adds it once the session is Established.
		if err := srv.AddPeer(ctx, &api.AddPeerRequest{Peer: peerRequest(p.withBFD(BFD{}), cfg, st.restarting)}); err != nil {
			s.addFailed(p, err)
			errs = append(errs, fmt.Errorf("adding peer %s (%s): %w", p.Name, p.Address, err))
			continue
		}
		st.peers[p.Address] = p
		st.bfd[p.Address] = BFD{}
		logger.Info("Added BGP peer", "peer", p.Name, "address", p.Address, "peerASN", p.PeerASN, "myASN", p.MyASN,
			"restarting", st.restarting, "bfd", p.BFD.Enabled)
	}
	for _, p := range retune {
		st.peers[p.Address] = p
		s.retuned(p)
		logger.Info("BFD of BGP peer changed", "peer", p.Name, "address", p.Address, "bfd", p.BFD.Enabled,
			"minRx", p.BFD.MinRx, "minTx", p.BFD.MinTx, "multiplier", p.BFD.Multiplier)
	}
	errs = append(errs, s.armBFD(ctx, srv, cfg, st))
	st.restarting = false
	return errors.Join(errs...)
}

// announce adds the paths of prefixes, with their attributes in desired, in one call.
// GoBGP reports a failure of any path as a failure of the call, so then none counts as
// added: adding a path again replaces it, which is also how a prefix whose
// communities changed is announced again.
func (s *Speaker) announce(srv *server.BgpServer, prefixes []netip.Prefix, desired map[netip.Prefix]attrs, nextHop6 netip.Addr, st *applied, logger klog.Logger) error {
	var errs []error
	paths := make([]*apiutil.Path, 0, len(prefixes))
	added := make([]netip.Prefix, 0, len(prefixes))
	for _, p := range prefixes {
		path, err := pathFor(p, nextHop6, desired[p])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		paths = append(paths, path)
		added = append(added, p)
	}
	if len(paths) == 0 {
		return errors.Join(errs...)
	}
	if _, err := srv.AddPath(apiutil.AddPathRequest{Paths: paths}); err != nil {
		return errors.Join(append(errs, fmt.Errorf("announcing %d prefixes: %w", len(paths), err))...)
	}
	for _, p := range added {
		st.paths[p] = desired[p]
	}
	logger.V(2).Info("Announced", "prefixes", added)
	return errors.Join(errs...)
}

func (s *Speaker) setAnnounced(paths map[netip.Prefix]attrs) {
	list := slices.SortedFunc(maps.Keys(paths), comparePrefix)
	s.mu.Lock()
	changed := !slices.Equal(list, s.announced)
	s.announced = list
	s.mu.Unlock()
	if changed {
		poke(s.changed)
	}
}
