// Package responder is the skeleton that the ARP and NDP responders of the
// external interface share (docs/arp.md): the set of addresses answered for, a
// packet socket on the interface behind a classic BPF filter, opened again with
// back-off whenever it fails, the loop that reads a frame, has the family decide
// and sends the reply, and the counters behind the responders' metrics.
//
// A Family (pkg/node/arp, pkg/node/ndp) brings the socket's EtherType and filter,
// its Decide function and reply buffer, and its names; Hooks bring what it does
// beside answering (ARP's kernel path and gratuitous ARP, NDP's multicast groups).
package responder

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mdlayher/packet"
	"golang.org/x/net/bpf"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/listdiff"
)

// retry is the back-off between attempts to (re)open the socket, e.g. while the
// interface does not exist yet: from 100 ms, doubling, up to 5 s.
var retry = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Cap: 5 * time.Second, Steps: math.MaxInt32}

const macLen = 6

// Responder answers one family's requests on one interface for a set of
// addresses that can change at any time. The owned addresses are a set behind a
// read-write lock, changed in place by what changed: at 100,000 addresses, building
// the set anew for one change took the agent's sync longer than the rest of it.
type Responder struct {
	iface  string
	family *Family
	hooks  Hooks

	// mu orders SetAddresses and the Changed hook; given is the list of its last call,
	// and ordered says it is strictly increasing with every address as Accept gives
	// it (what the agent gives): then one change is found in its window (listdiff);
	// seen is the version of the list given, when a change told it (else 0).
	mu      sync.Mutex
	given   []netip.Addr
	ordered bool
	seen    uint64
	// ownedMu guards owned, changed by SetAddresses only.
	ownedMu sync.RWMutex
	owned   map[netip.Addr]struct{}

	requests atomic.Uint64
	replies  atomic.Uint64
	drops    []atomic.Uint64 // by family.Drops
}

// New returns a responder of family f for the named interface owning no address.
// It opens nothing until Run.
func New(iface string, f *Family, h Hooks) *Responder {
	r := &Responder{iface: iface, family: f, hooks: h, drops: make([]atomic.Uint64, len(f.Drops))}
	r.owned = map[netip.Addr]struct{}{}
	return r
}

// Interface is the name of the interface the responder answers on.
func (r *Responder) Interface() string { return r.iface }

// SetAddresses replaces the set of owned addresses; only the family's addresses
// count. Safe to call at any time, also while Run is running.
// The same list as the last call's (the agent gives every sync's, sorted) changes
// nothing and costs one comparison: no set is built, no hook told. A sorted list
// that differs from the last one in a few addresses costs those (and the
// comparison); any other list, a set built anew.
func (r *Responder) SetAddresses(addrs []netip.Addr) { r.SetAddressesSince(addrs, listdiff.Change{}) }

// SetAddressesSince is SetAddresses told where addrs differs from a version of it (the
// agent's lists, listdiff.Change): given the change from the version it holds, it
// reads only the change's window, where SetAddresses compares the two lists (2.4 MB
// at 100,000 addresses).
func (r *Responder) SetAddressesSince(addrs []netip.Addr, c listdiff.Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := listdiff.Since(c, r.seen, r.given, addrs)
	r.seen = c.To
	if w.Empty() {
		return
	}
	var removed, added []netip.Addr
	if r.ordered && r.canonical(addrs, w) {
		removed, added = r.sortedChanges(r.given[w.Start:w.OldEnd], addrs[w.Start:w.NewEnd])
		r.given = listdiff.Follow(r.given, addrs, w)
	} else {
		removed, added = r.setChanges(addrs)
		r.given = slices.Clone(addrs)
		r.ordered = r.canonical(r.given, listdiff.Window{NewEnd: len(r.given)})
	}
	if len(removed) == 0 && len(added) == 0 {
		return
	}
	r.ownedMu.Lock()
	for _, a := range removed {
		delete(r.owned, a)
	}
	for _, a := range added {
		r.owned[a] = struct{}{}
	}
	r.ownedMu.Unlock()
	if r.hooks.Changed != nil {
		r.hooks.Changed(removed, added)
	}
}

// canonical reports whether addrs, equal to the last list given outside the window
// w, is strictly increasing with each address as Accept gives it (or not the
// family's) — looking only at the window and its two neighbours.
func (r *Responder) canonical(addrs []netip.Addr, w listdiff.Window) bool {
	for i := max(w.Start, 1); i < min(w.NewEnd+1, len(addrs)); i++ {
		if addrs[i-1].Compare(addrs[i]) >= 0 {
			return false
		}
	}
	for _, a := range addrs[w.Start:w.NewEnd] {
		if b, ok := r.family.Accept(a); ok && b != a {
			return false
		}
	}
	return true
}

// sortedChanges are the family's addresses of old not in new (removed) and of new
// not in old (added), both lists strictly increasing: one walk.
func (r *Responder) sortedChanges(old, new []netip.Addr) (removed, added []netip.Addr) {
	removed, added = listdiff.Sorted(old, new, netip.Addr.Compare)
	return r.accepted(removed), r.accepted(added)
}

// setChanges compares the owned set with the family's addresses among addrs, built
// whole.
func (r *Responder) setChanges(addrs []netip.Addr) (removed, added []netip.Addr) {
	m := r.family.Addresses(addrs)
	r.ownedMu.RLock()
	defer r.ownedMu.RUnlock()
	for a := range r.owned {
		if _, ok := m[a]; !ok {
			removed = append(removed, a)
		}
	}
	for a := range m {
		if _, ok := r.owned[a]; !ok {
			added = append(added, a)
		}
	}
	return removed, added
}

// accepted keeps the family's addresses of addrs, in place.
func (r *Responder) accepted(addrs []netip.Addr) []netip.Addr {
	return slices.DeleteFunc(addrs, func(a netip.Addr) bool {
		_, ok := r.family.Accept(a)
		return !ok
	})
}

// Owned is a copy of the set of owned addresses.
func (r *Responder) Owned() []netip.Addr {
	r.ownedMu.RLock()
	defer r.ownedMu.RUnlock()
	out := make([]netip.Addr, 0, len(r.owned))
	for a := range r.owned {
		out = append(out, a)
	}
	return out
}

// Owns reports whether the responder answers for a.
func (r *Responder) Owns(a netip.Addr) bool {
	a, ok := r.family.Accept(a)
	if !ok {
		return false
	}
	r.ownedMu.RLock()
	defer r.ownedMu.RUnlock()
	_, ok = r.owned[a]
	return ok
}

// Requests is the number of requests received (for any address).
func (r *Responder) Requests() uint64 { return r.requests.Load() }

// Replies is the number of replies sent.
func (r *Responder) Replies() uint64 { return r.replies.Load() }

// Drops counts the frames not answered, by reason (as metric label values, every
// reason present).
func (r *Responder) Drops() map[string]uint64 {
	out := make(map[string]uint64, len(r.drops))
	for i, d := range r.family.Drops {
		out[d.Label] = r.drops[i].Load()
	}
	return out
}

// Run answers requests until ctx ends, then closes its socket and returns nil.
// If the interface is missing or the socket fails it opens it again, backing off
// (retry), so the responder survives the interface going away and back.
func (r *Responder) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("interface", r.iface)
	ctx = klog.NewContext(ctx, logger)
	backoff := retry
	for {
		err := r.serveOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		after := backoff.Step()
		logger.Error(err, r.family.Log.Stopped, "after", after)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(after):
		}
	}
}

// serveOnce opens the socket and answers until ctx ends, the socket fails or the
// family's session does.
func (r *Responder) serveOnce(ctx context.Context) error {
	ifi, err := net.InterfaceByName(r.iface)
	if err != nil {
		return fmt.Errorf("interface %s: %w", r.iface, err)
	}
	if len(ifi.HardwareAddr) != macLen {
		return fmt.Errorf("interface %s has no Ethernet address", r.iface)
	}
	var s Session
	if r.hooks.Open != nil {
		if s, err = r.hooks.Open(ctx, ifi); err != nil {
			return err
		}
	}
	filter := r.family.Filter
	if s.Filter != nil {
		filter = s.Filter
	}
	conn, err := listen(ifi, r.family, filter)
	if err != nil {
		s.close()
		return fmt.Errorf("packet socket on %s: %w", r.iface, err)
	}
	defer conn.Close()
	defer s.close()
	g, gctx := errgroup.WithContext(ctx)
	// A read deadline in the past ends the read under way at once.
	stop := context.AfterFunc(gctx, func() { _ = conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	g.Go(func() error { return r.Serve(gctx, conn, ifi.HardwareAddr) })
	if s.Run != nil {
		g.Go(func() error { return s.Run(gctx, conn) })
	}
	return g.Wait()
}

// listen opens the socket on ifi: created receiving nothing, given its filter,
// then bound to the family's EtherType on the interface (packet.Listen), so that
// no frame gets past without the filter.
func listen(ifi *net.Interface, f *Family, filter []bpf.Instruction) (*packet.Conn, error) {
	prog, err := bpf.Assemble(filter)
	if err != nil {
		return nil, err
	}
	conn, err := packet.Listen(ifi, packet.Raw, int(f.Protocol), &packet.Config{Filter: prog})
	if err != nil {
		return nil, err
	}
	if f.BypassQdisc {
		if err := setInt(conn, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); err != nil {
			_ = conn.Close()
			return nil, err
		}
	}
	return conn, nil
}

// setInt sets an integer socket option on conn.
func setInt(conn *packet.Conn, level, opt, value int) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), level, opt, value) }); err != nil {
		return err
	}
	return serr
}
