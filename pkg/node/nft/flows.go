package nft

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// In-cluster connections to an ElasticIP are translated by connection
// tracking, which keeps the Pod IP it chose for as long as the connection
// lives. When the ElasticIP goes or moves to another Pod IP (the Pod was
// re-created elsewhere), those entries would keep sending to the old Pod IP;
// a UDP client that keeps sending from one socket would refresh its entry
// forever and never reach the new Pod. So the entries translated for an
// ElasticIP that was removed or re-pointed are deleted: the next packet of
// such a connection is a new connection and is translated to the current
// Pod IP (or, with the ElasticIP gone, not at all).
//
// Deleting them means reading the whole connection-tracking table, whose
// walk costs in proportion to every connection the machine tracks (tens of
// milliseconds on a busy node), so it is not part of Sync: Sync records
// what to clean up, and RunFlowCleanup does it in the background, one walk
// for whatever changed since the last one.

// flowMatcher selects connection-tracking entries by the destination of the
// original direction (the ElasticIP the client addressed) and the source of
// the reply direction (the Pod IP it was translated to).
type flowMatcher func(origDst, replySrc netip.Addr) bool

// flowCleanup tracks what the kernel's in-cluster map holds across syncs,
// full or not, and which ElasticIPs' connections are still to be cleaned up.
// The Programmer's mutex guards it.
type flowCleanup struct {
	// known is the in-cluster map as last written; nil before the first sync.
	known map[netip.Addr]netip.Addr
	// stale holds the ElasticIPs removed or re-pointed since their last
	// clean-up, each with the generation it was marked in.
	stale map[netip.Addr]uint64
	// scanAll asks to check every translated connection to an ElasticIP of
	// the map: set by the first sync of a Programmer, which cannot know what
	// changed before it started (an agent restart); scanGen is its generation.
	scanAll bool
	scanGen uint64
	gen     uint64
	// wake tells RunFlowCleanup there is work (buffered, one pending signal).
	wake chan struct{}
}

func newFlowCleanup() flowCleanup {
	return flowCleanup{wake: make(chan struct{}, 1)}
}

// replaced records a full sync that wrote the in-cluster map now.
func (f *flowCleanup) replaced(now map[netip.Addr]netip.Addr) {
	if f.known == nil && len(now) > 0 {
		f.gen++
		f.scanAll, f.scanGen = true, f.gen
		f.signal()
	}
	for e, p := range f.known {
		if q, ok := now[e]; !ok || q != p {
			f.mark(e)
		}
	}
	f.known = maps.Clone(now)
	if f.known == nil {
		f.known = map[netip.Addr]netip.Addr{}
	}
}

// applied records an incremental sync that removed and added these
// elements (a re-pointed ElasticIP is in both).
func (f *flowCleanup) applied(removed, added []Mapping) {
	for _, m := range removed {
		delete(f.known, m.ElasticIP)
		f.mark(m.ElasticIP)
	}
	for _, m := range added {
		f.known[m.ElasticIP] = m.PodIP
	}
}

func (f *flowCleanup) mark(eip netip.Addr) {
	if f.stale == nil {
		f.stale = map[netip.Addr]uint64{}
	}
	f.gen++
	f.stale[eip] = f.gen
	f.signal()
}

func (f *flowCleanup) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// flowWork is one clean-up's snapshot of what to do.
type flowWork struct {
	stale   map[netip.Addr]uint64
	pods    map[netip.Addr]netip.Addr // the current Pod IP of every ElasticIP the clean-up looks at
	scanAll bool
	scanGen uint64
}

// work snapshots what is to be cleaned up, or returns false when nothing is.
func (f *flowCleanup) work() (flowWork, bool) {
	if len(f.stale) == 0 && !f.scanAll {
		return flowWork{}, false
	}
	w := flowWork{stale: maps.Clone(f.stale), scanAll: f.scanAll, scanGen: f.scanGen}
	if w.scanAll {
		w.pods = maps.Clone(f.known)
	} else {
		w.pods = make(map[netip.Addr]netip.Addr, len(w.stale))
		for e := range w.stale {
			if p, ok := f.known[e]; ok {
				w.pods[e] = p
			}
		}
	}
	return w, true
}

// matcher selects the connections translated for an ElasticIP of the
// snapshot to another Pod IP than its current one. A connection that was
// not translated (its reply comes from the address the client addressed) is
// left alone.
func (w flowWork) matcher() flowMatcher {
	return func(dst, src netip.Addr) bool {
		if src == dst {
			return false
		}
		pod, mapped := w.pods[dst]
		if _, ok := w.stale[dst]; ok {
			return !mapped || pod != src
		}
		return w.scanAll && mapped && pod != src
	}
}

// done forgets what the snapshot cleaned up, unless it was marked again
// since.
func (f *flowCleanup) done(w flowWork) {
	for e, g := range w.stale {
		if f.stale[e] == g {
			delete(f.stale, e)
		}
	}
	if w.scanAll && f.scanGen == w.scanGen {
		f.scanAll = false
	}
}

// CleanupFlows deletes the connection-tracking entries of in-cluster clients
// that were translated for an ElasticIP since removed or re-pointed, and
// returns how many it deleted. It does nothing when nothing changed; what
// fails is left for the next call. Sync is not held up meanwhile.
func (p *Programmer) CleanupFlows() (int, error) {
	p.mu.Lock()
	w, ok := p.flows.work()
	p.mu.Unlock()
	if !ok {
		return 0, nil
	}
	n, err := p.deleteFlows(w.matcher())
	if err != nil {
		return n, fmt.Errorf("deleting the connection-tracking entries of in-cluster clients whose ElasticIP went or moved: %w", err)
	}
	p.mu.Lock()
	p.flows.done(w)
	p.mu.Unlock()
	return n, nil
}

// RunFlowCleanup runs CleanupFlows whenever a Sync has left something to
// clean up, until ctx ends; after a failure it tries again with back-off.
// Changes that come while a clean-up runs are all taken by the next one.
func (p *Programmer) RunFlowCleanup(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	backoff := time.Second
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.flows.wake:
		case <-retry:
		}
		n, err := p.CleanupFlows()
		if err != nil {
			logger.Error(err, "Cleaning up connection tracking failed", "retryAfter", backoff)
			retry = time.After(backoff)
			backoff = min(2*backoff, time.Minute)
			continue
		}
		retry, backoff = nil, time.Second
		if n > 0 {
			logger.V(2).Info("Deleted the connection-tracking entries of moved ElasticIPs", "entries", n)
		}
	}
}

// deleteFlows deletes the connection-tracking entries, IPv4 and IPv6, that
// match selects in the network namespace ns (0: the caller's). Each family is
// a walk of its own.
func deleteFlows(ns int, match flowMatcher) (int, error) {
	var (
		h   *netlink.Handle
		err error
	)
	if ns == 0 {
		h, err = netlink.NewHandle(unix.NETLINK_NETFILTER)
	} else {
		h, err = netlink.NewHandleAt(netns.NsHandle(ns), unix.NETLINK_NETFILTER)
	}
	if err != nil {
		return 0, err
	}
	defer h.Close()
	total := 0
	for _, af := range []netlink.InetFamily{unix.AF_INET, unix.AF_INET6} {
		n, err := h.ConntrackDeleteFilters(netlink.ConntrackTable, af, flowFilter(match))
		total += int(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// flowFilter adapts a flowMatcher to netlink's conntrack filter.
type flowFilter flowMatcher

func (f flowFilter) MatchConntrackFlow(fl *netlink.ConntrackFlow) bool {
	dst, ok1 := netip.AddrFromSlice(fl.Forward.DstIP)
	src, ok2 := netip.AddrFromSlice(fl.Reverse.SrcIP)
	return ok1 && ok2 && f(dst.Unmap(), src.Unmap())
}
