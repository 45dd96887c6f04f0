package nft

import (
	"fmt"
	"maps"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// In-cluster connections to an ElasticIP are translated by connection
// tracking, which keeps the Pod IP it chose for as long as the connection
// lives. When the ElasticIP goes or moves to another Pod IP (the Pod was
// re-created elsewhere), those entries would keep sending to the old Pod IP;
// a UDP client that keeps sending from one socket would refresh its entry
// forever and never reach the new Pod. So after a sync that removed or
// re-pointed an in-cluster mapping, the entries translated for it are
// deleted: the next packet of such a connection is a new connection and is
// translated to the current Pod IP (or, with the ElasticIP gone, not at all).

// flowMatcher selects connection-tracking entries by the destination of the
// original direction (the ElasticIP the client addressed) and the source of
// the reply direction (the Pod IP it was translated to).
type flowMatcher func(origDst, replySrc netip.Addr) bool

// flowCleanup tracks what the kernel's in-cluster map holds across syncs,
// full or not, and which ElasticIPs' connections are still to be cleaned up.
type flowCleanup struct {
	// known is the in-cluster map as last written; nil before the first sync.
	known map[netip.Addr]netip.Addr
	// stale holds the ElasticIPs removed or re-pointed since the last
	// clean-up that succeeded.
	stale map[netip.Addr]struct{}
	// scanAll asks to check every translated connection to an ElasticIP of
	// the map: set by the first sync of a Programmer, which cannot know what
	// changed before it started (an agent restart).
	scanAll bool
}

// replaced records a full sync that wrote the in-cluster map now.
func (f *flowCleanup) replaced(now map[netip.Addr]netip.Addr) {
	if f.known == nil {
		f.scanAll = true
	}
	for e, p := range f.known {
		if q, ok := now[e]; !ok || q != p {
			f.mark(e)
		}
	}
	f.known = maps.Clone(now)
}

// applied records an incremental sync that removed and added these
// elements (a re-pointed ElasticIP is in both).
func (f *flowCleanup) applied(removed, added []Mapping) {
	if f.known == nil {
		f.known = map[netip.Addr]netip.Addr{}
	}
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
		f.stale = map[netip.Addr]struct{}{}
	}
	f.stale[eip] = struct{}{}
}

// clean deletes, through del, the connections translated for an ElasticIP
// of the stale set (or, with scanAll, of the map) to another Pod IP than
// the one cluster now gives it. A connection that was not translated (its
// reply comes from the address the client addressed) is left alone. What
// fails is tried again after the next sync.
func (f *flowCleanup) clean(cluster map[netip.Addr]netip.Addr, del func(flowMatcher) (int, error)) (int, error) {
	if len(f.stale) == 0 && (!f.scanAll || len(cluster) == 0) {
		f.scanAll = false
		return 0, nil
	}
	stale, scanAll := f.stale, f.scanAll
	n, err := del(func(dst, src netip.Addr) bool {
		if src == dst {
			return false
		}
		pod, mapped := cluster[dst]
		if _, ok := stale[dst]; ok {
			return !mapped || pod != src
		}
		return scanAll && mapped && pod != src
	})
	if err != nil {
		return n, fmt.Errorf("deleting the connection-tracking entries of in-cluster clients whose ElasticIP went or moved: %w", err)
	}
	f.stale, f.scanAll = nil, false
	return n, nil
}

// deleteFlows deletes the IPv4 connection-tracking entries match selects in
// the network namespace ns (0: the caller's).
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
	n, err := h.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, flowFilter(match))
	return int(n), err
}

// flowFilter adapts a flowMatcher to netlink's conntrack filter.
type flowFilter flowMatcher

func (f flowFilter) MatchConntrackFlow(fl *netlink.ConntrackFlow) bool {
	dst, ok1 := netip.AddrFromSlice(fl.Forward.DstIP)
	src, ok2 := netip.AddrFromSlice(fl.Reverse.SrcIP)
	return ok1 && ok2 && f(dst.Unmap(), src.Unmap())
}
