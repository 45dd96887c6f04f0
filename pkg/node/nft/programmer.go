// Package nft programs juneau's conntrack-free 1:1 NAT into nftables over
// netlink: a desired state in, kernel state out. See README.md for the table
// layout and how it coexists with kube-proxy and CNIs.
package nft

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/google/nftables"
	mnl "github.com/mdlayher/netlink"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/loutres/juneau/pkg/listdiff"
)

// Options configure a Programmer.
type Options struct {
	// NetNS is an open network namespace file descriptor to program instead
	// of the caller's own namespace (zero: the caller's).
	NetNS int
}

// SyncStats describes the last Sync.
type SyncStats struct {
	// Full is true when the whole table was rebuilt, Skipped when nothing
	// had changed and the kernel was not written to.
	Full, Skipped bool
	// Mappings is the number of mappings in the applied state.
	Mappings int
	// Removed and Added count the mappings written element by element.
	Removed, Added int
	// Direct is the number of allowed direct NIC addresses in the applied
	// state; DirectRemoved and DirectAdded count those written element by
	// element.
	Direct, DirectRemoved, DirectAdded int
	// Limited is the number of ElasticIPs with a bandwidth limit in the
	// applied state; LimitsRemoved, LimitsAdded and LimitsChanged count the
	// ElasticIPs whose limit chains were deleted, created or given a new rate.
	Limited, LimitsRemoved, LimitsAdded, LimitsChanged int
	// InCluster is the number of in-cluster mappings in the applied state;
	// InClusterRemoved and InClusterAdded count those written element by
	// element (a new Pod IP counts in both).
	InCluster, InClusterRemoved, InClusterAdded int
	Duration                                    time.Duration
}

// Programmer applies DesiredStates to the kernel. The first Sync, and the one
// after any failure or Invalidate, replaces the whole table in one
// transaction; later ones change only the map elements that differ (and the
// limit chains of ElasticIPs whose bandwidth limit changed), so a change to
// one mapping leaves every other element and limit untouched. A new
// Programmer (e.g. after an agent restart) takes over an existing table with
// the same atomic replacement, so packets never meet a missing rule.
//
// A Sync after the first costs time in proportion to what changed, not to
// the size of the state: the Programmer keeps the last desired state it was
// given and the applied state (an index, see index.go), finds the entries
// that differ by skipping the common beginning and end of the lists (the
// agent gives them sorted), and validates and writes only those. It keeps
// one netlink connection open across syncs (closing an nftables socket
// waits for an RCU grace period in the kernel) and opens a new one after an
// error.
//
// Methods are safe for concurrent use.
type Programmer struct {
	opts Options
	// dial opens a netlink connection whose receive buffer holds
	// receiveBuffer bytes of acks, lasting (used for many batches) or not;
	// resize, when not nil, raises the receive buffer of the connection.
	// Tests replace it to record messages.
	dial func(receiveBuffer int, lasting bool) (c *nftables.Conn, resize func(int) error, err error)
	// ifindex returns the index of an interface in the namespace programmed
	// (0 when it cannot tell).
	ifindex func(name string) uint32
	// deleteFlows deletes the connection-tracking entries match selects in
	// the namespace programmed (flows.go, CleanupFlows); tests replace it.
	deleteFlows func(match flowMatcher) (int, error)

	mu     sync.Mutex
	conn   *nftables.Conn // the lasting connection, nil before the first Sync and after an error
	resize func(int) error
	rcvbuf int    // the receive buffer conn was given
	ix     *index // the applied state; nil: the next Sync rebuilds everything
	// the desired state ix was built from, as given
	cfg   Config
	prevM []Mapping
	prevD []DirectNIC
	prevC []Mapping
	// seenM, seenC: the versions of prevM and prevC their changes name
	// (DesiredState.MappingsChange); 0: not known.
	seenM, seenC uint64
	last         SyncStats
	// sets name the maps and sets of both tables for element writes; made
	// once, since the library only reads them.
	sets familySets
	// flows tracks the in-cluster mappings the kernel holds, across full
	// syncs, and the ElasticIPs whose connections must be cleaned up
	// (CleanupFlows, RunFlowCleanup).
	flows flowCleanup
}

// NewProgrammer returns a Programmer. It opens nothing until Sync.
func NewProgrammer(opts Options) *Programmer {
	p := &Programmer{opts: opts, flows: newFlowCleanup(), sets: newFamilySets()}
	p.dial = func(receiveBuffer int, lasting bool) (*nftables.Conn, func(int) error, error) {
		var sock *mnl.Conn
		o := []nftables.ConnOption{nftables.WithNetNSFd(p.opts.NetNS), nftables.WithSockOptions(func(c *mnl.Conn) error {
			sock = c
			return setBuffers(c, sendBufferBytes, receiveBuffer)
		})}
		if lasting {
			o = append(o, nftables.AsLasting())
		}
		c, err := nftables.New(o...)
		if err != nil || !lasting {
			return c, nil, err
		}
		return c, func(n int) error { return setBuffers(sock, sendBufferBytes, n) }, nil
	}
	p.ifindex = func(name string) uint32 {
		var h *netlink.Handle
		var err error
		if p.opts.NetNS == 0 {
			h, err = netlink.NewHandle()
		} else {
			h, err = netlink.NewHandleAt(netns.NsHandle(p.opts.NetNS))
		}
		if err != nil {
			return 0
		}
		defer h.Close()
		l, err := h.LinkByName(name)
		if err != nil {
			return 0
		}
		return uint32(l.Attrs().Index)
	}
	p.deleteFlows = func(match flowMatcher) (int, error) { return deleteFlows(p.opts.NetNS, match) }
	return p
}

// reset forgets the applied state and the connection: the next Sync
// rebuilds the whole table over a new connection.
func (p *Programmer) reset() {
	p.ix = nil
	p.prevM, p.prevD, p.prevC = nil, nil, nil
	p.seenM, p.seenC = 0, 0
	p.closeConn()
}

// Sync makes the kernel match desired. An invalid Config changes nothing and
// returns an error wrapping ErrInvalidConfig; invalid or conflicting mappings
// or direct NICs are left out, the rest is applied, and the error wraps
// ErrInvalidMapping. Syncing the state that is already applied writes nothing.
// The connection-tracking entries of in-cluster clients translated for an
// ElasticIP that went or moved are left to CleanupFlows (RunFlowCleanup).
// The caller may change desired once Sync has returned (it keeps a copy).
func (p *Programmer) Sync(ctx context.Context, desired DesiredState) error {
	start := time.Now()
	if err := validConfig(desired.Config); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()

	var (
		stats SyncStats
		err   error
	)
	full := p.ix == nil || !p.sameConfig(desired.Config)
	var wM, wD, wC listdiff.Window
	if full {
		stats, err = p.syncFull(desired)
	} else {
		wM, wD, wC = listdiff.Since(desired.MappingsChange, p.seenM, p.prevM, desired.Mappings), listdiff.Of(p.prevD, desired.Direct),
			listdiff.Since(desired.InClusterChange, p.seenC, p.prevC, desired.InCluster)
		dl := p.ix.apply(p.prevM[wM.Start:wM.OldEnd], desired.Mappings[wM.Start:wM.NewEnd],
			p.prevD[wD.Start:wD.OldEnd], desired.Direct[wD.Start:wD.NewEnd],
			p.prevC[wC.Start:wC.OldEnd], desired.InCluster[wC.Start:wC.NewEnd])
		if dl.empty() {
			stats.Skipped = true
		} else {
			stats, err = p.syncElements(dl)
			if err == nil {
				p.flows.applied(dl.clusterRemoved, dl.clusterAdded)
			}
		}
	}
	if err != nil {
		stats.Duration = time.Since(start)
		p.last = stats
		p.reset()
		return err
	}
	p.cfg = Config{ExternalInterface: desired.ExternalInterface, ClusterCIDRs: slices.Clone(desired.ClusterCIDRs)}
	if full {
		p.prevM = append(p.prevM[:0], desired.Mappings...)
		p.prevD = append(p.prevD[:0], desired.Direct...)
		p.prevC = append(p.prevC[:0], desired.InCluster...)
	} else {
		// Only what changed is copied (the rest is equal already): a sync
		// costs no pass over the whole state beyond finding the change.
		p.prevM = listdiff.Follow(p.prevM, desired.Mappings, wM)
		p.prevD = listdiff.Follow(p.prevD, desired.Direct, wD)
		p.prevC = listdiff.Follow(p.prevC, desired.InCluster, wC)
	}
	p.seenM, p.seenC = desired.MappingsChange.To, desired.InClusterChange.To
	s := p.ix.s
	stats.Mappings = len(s.eip2vpc)
	stats.Direct = len(s.directOf)
	stats.Limited = len(s.limits)
	stats.InCluster = len(s.cluster)
	stats.Duration = time.Since(start)
	p.last = stats
	return p.ix.err()
}

// sameConfig reports whether c needs the rules of the applied state.
func (p *Programmer) sameConfig(c Config) bool {
	if c.ExternalInterface != p.cfg.ExternalInterface {
		return false
	}
	return slices.Equal(c.ClusterCIDRs, p.cfg.ClusterCIDRs) || slices.Equal(mergePrefixes(c.ClusterCIDRs), p.ix.s.cidrs)
}

// Invalidate makes the next Sync rebuild the whole table, e.g. for a periodic
// resync that must repair changes made behind our back.
func (p *Programmer) Invalidate() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ix = nil
}

// LastSync describes the most recent Sync.
func (p *Programmer) LastSync() SyncStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// syncFull validates the whole desired state, then deletes and recreates the
// table with all its elements in a single transaction: packets see either
// the old table or the new one, never none.
func (p *Programmer) syncFull(desired DesiredState) (SyncStats, error) {
	ix, err := newIndex(desired.Config)
	if err != nil {
		return SyncStats{}, err
	}
	ix.apply(nil, desired.Mappings, nil, desired.Direct, nil, desired.InCluster)
	want := ix.s
	want.extIndex = p.ifindex(want.iface)
	c, err := p.connFor(receiveBufferFor(4 * len(want.limits)))
	if err != nil {
		return SyncStats{}, err
	}
	// Both tables in the one transaction: the kernel commits them together.
	var fs familySets
	for _, f := range families {
		rs := buildRuleset(want, f)
		fs[f.index()] = rs.sets
		if err := addTable(c, rs); err != nil {
			return SyncStats{}, err
		}
	}
	mappings := want.mappings()
	byset := groupBySet(fs, mappings, false)
	ifaces, pairs := want.direct()
	addDirect(byset, fs, ifaces, pairs)
	// After the chains: a verdict map element must name an existing chain.
	limitElements(byset, fs, sortedKeys(want.limits), limitSources(want.limitSrc), false)
	cluster := want.clusterMappings()
	addCluster(byset, fs, cluster, false)
	for _, s := range fs.dynamic() {
		if err := addChunked(c, s, byset[s]); err != nil {
			return SyncStats{}, err
		}
	}
	if err := c.Flush(); err != nil {
		return SyncStats{}, fmt.Errorf("replace tables %s: %w", TableName, err)
	}
	p.ix = ix
	p.flows.replaced(want.cluster)
	return SyncStats{Full: true, Added: len(mappings), DirectAdded: len(pairs), LimitsAdded: len(want.limits), InClusterAdded: len(cluster)}, nil
}

// addTable queues the replacement of one family's table: the table with its
// sets, their constant elements, chains and rules. Adding the table first
// makes the delete valid whether or not the table exists.
func addTable(c *nftables.Conn, rs *ruleset) error {
	c.AddTable(rs.table)
	c.DelTable(rs.table)
	c.AddTable(rs.table)
	for _, s := range rs.sets.all() {
		var initial []nftables.SetElement
		if s == rs.sets.icmpErrors {
			initial = rs.icmpElems // a constant set gets its few elements with its creation
		}
		if err := c.AddSet(s, initial); err != nil {
			return fmt.Errorf("set %s %s: %w", rs.sets.fam.name, s.Name, err)
		}
	}
	// Thousands of node addresses would not fit one message: chunk them too.
	if err := addChunked(c, rs.sets.cluster, rs.clusterElems); err != nil {
		return err
	}
	for _, ch := range rs.chains {
		c.AddChain(ch)
	}
	for _, r := range rs.rules {
		c.AddRule(r)
	}
	return nil
}

// syncElements deletes stale and adds new map and set elements in one
// transaction, together with the limit chains of the ElasticIPs whose
// limit changed: stale elements first, then the chains, then new elements
// (an element may only name a chain that exists, a chain may only be
// deleted once nothing jumps to it).
func (p *Programmer) syncElements(dl delta) (SyncStats, error) {
	limits, direct := dl.limits, dl.direct
	c, err := p.connFor(receiveBufferFor(4 * (len(limits.removed) + len(limits.added) + len(limits.changed))))
	if err != nil {
		return SyncStats{}, err
	}
	sets := p.sets
	del := groupBySet(sets, dl.removed, true)
	add := groupBySet(sets, dl.added, false)
	for _, m := range dl.reflagged { // a limit came (out of eip2vpc_unlimited) or went (in)
		e := unlimitedEntry(sets.of(m.ElasticIP), m)
		if limited(m) {
			del[e.set] = append(del[e.set], nftables.SetElement{Key: e.key})
		} else {
			add[e.set] = append(add[e.set], nftables.SetElement{Key: e.key, Val: e.val})
		}
	}
	addDirect(del, sets, direct.removedIfaces, direct.removedPairs)
	addDirect(add, sets, direct.addedIfaces, direct.addedPairs)
	limitElements(del, sets, limits.removed, limits.removedSrc, true)
	limitElements(add, sets, limits.added, limits.addedSrc, false)
	addCluster(del, sets, dl.clusterRemoved, true)
	addCluster(add, sets, dl.clusterAdded, false)
	for _, s := range sets.dynamic() {
		for _, part := range chunk(del[s]) {
			if err := c.SetDeleteElements(s, part); err != nil {
				return SyncStats{}, fmt.Errorf("delete from %s: %w", s.Name, err)
			}
		}
	}
	writeLimitChains(c, sets, p.ix.s, limits)
	for _, s := range sets.dynamic() {
		if err := addChunked(c, s, add[s]); err != nil {
			return SyncStats{}, err
		}
	}
	if err := c.Flush(); err != nil {
		return SyncStats{}, fmt.Errorf("update maps of tables %s: %w", TableName, err)
	}
	return SyncStats{
		Removed: len(dl.removed), Added: len(dl.added),
		DirectRemoved: len(direct.removedPairs), DirectAdded: len(direct.addedPairs),
		LimitsRemoved: len(limits.removed), LimitsAdded: len(limits.added), LimitsChanged: len(limits.changed),
		InClusterRemoved: len(dl.clusterRemoved), InClusterAdded: len(dl.clusterAdded),
	}, nil
}

func addChunked(c *nftables.Conn, s *nftables.Set, elems []nftables.SetElement) error {
	for _, part := range chunk(elems) {
		if err := c.SetAddElements(s, part); err != nil {
			return fmt.Errorf("add to %s: %w", s.Name, err)
		}
	}
	return nil
}

// Remove deletes both tables. Normal shutdown must not call it: rules stay
// in place so translated traffic keeps flowing while the agent restarts.
func (p *Programmer) Remove(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reset()
	c, _, err := p.dial(receiveBufferBytes, false)
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	// Same trick as syncFull: the delete then succeeds whether or not the
	// table exists, in one transaction.
	for _, f := range families {
		t := newTable(f)
		c.AddTable(t)
		c.DelTable(t)
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("delete table %s: %w", TableName, err)
	}
	return nil
}

// ErrNoTable means the kernel holds no juneau table.
var ErrNoTable = errors.New("nftables table " + TableName + " not found")

// KernelMappings reads the ElasticIP maps of both tables back from the
// kernel, sorted by ElasticIP (IPv4 first). ErrNoTable means the IPv4 table
// does not exist; a missing IPv6 table holds no mapping.
func (p *Programmer) KernelMappings(ctx context.Context) ([]Mapping, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, _, err := p.dial(receiveBufferBytes, false)
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	var out []Mapping
	for _, f := range families {
		if err := tableExists(c, f); err != nil {
			if errors.Is(err, ErrNoTable) && f == fam6 {
				continue
			}
			return nil, err
		}
		elems, err := c.GetSetElements(newSets(f).eip2vpc)
		if err != nil {
			return nil, fmt.Errorf("read map %s %s: %w", f.name, MapEIP2VPC, err)
		}
		for _, e := range elems {
			eip, ok1 := netip.AddrFromSlice(e.Key)
			pod, ok2 := netip.AddrFromSlice(e.Val)
			if ok1 && ok2 {
				out = append(out, Mapping{ElasticIP: eip, PodIP: pod})
			}
		}
	}
	slices.SortFunc(out, func(a, b Mapping) int { return a.ElasticIP.Compare(b.ElasticIP) })
	return out, nil
}
