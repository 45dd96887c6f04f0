package nft

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// MaxBandwidthMbps is the highest limit an ElasticIP may carry (docs/reference.md#elasticip:
// spec.bandwidthMbps is 1–100000); 0 means unlimited.
const MaxBandwidthMbps = 100000

// bytesPerMbit converts Mbit/s to the bytes/second of a limit expression.
const bytesPerMbit = 1_000_000 / 8

var errBandwidth = fmt.Errorf("bandwidth must be 0 (unlimited) to %d Mbit/s", MaxBandwidthMbps)

func validBandwidth(mbps int32) bool { return mbps >= 0 && mbps <= MaxBandwidthMbps }

func bandwidthSuffix(mbps int32) string {
	if mbps == 0 {
		return ""
	}
	return "@" + strconv.Itoa(int(mbps)) + "Mbit/s"
}

// bandwidths collects the limit given for each address and the addresses
// given two different limits.
type bandwidths struct {
	of    map[netip.Addr]int32
	clash map[netip.Addr]bool
}

func newBandwidths(n int) bandwidths {
	return bandwidths{of: make(map[netip.Addr]int32, n), clash: map[netip.Addr]bool{}}
}

func (b bandwidths) add(a netip.Addr, mbps int32) {
	if old, ok := b.of[a]; ok && old != mbps {
		b.clash[a] = true
		return
	}
	b.of[a] = mbps
}

func (b bandwidths) clashErrors(what string) []error {
	var errs []error
	for _, a := range sortedKeys(b.clash) {
		errs = append(errs, fmt.Errorf("%s %v listed with different bandwidths", what, a))
	}
	return errs
}

// Limit chains: one per limited ElasticIP and direction, named after the
// ElasticIP, each holding one rule. The verdict maps jump to them.
const (
	chainLimitInPrefix  = "bw_in_"
	chainLimitOutPrefix = "bw_out_"
)

// LimitChainNames returns the names of the inbound and outbound limit chains
// of an ElasticIP: bw_in_10.225.51.5, or for IPv6 the address with dashes
// for colons, bw_in_2001-db8--5. nft takes no colon in a name it reads (`nft
// list chain`, `nft -f` of what it listed; README.md, "Reading the table
// with nft").
func LimitChainNames(eip netip.Addr) (in, out string) {
	a := strings.ReplaceAll(eip.String(), ":", "-")
	return chainLimitInPrefix + a, chainLimitOutPrefix + a
}

// limitChainAddr is the ElasticIP a limit chain's name ends with (the part
// after its prefix).
func limitChainAddr(suffix string) (netip.Addr, error) {
	return netip.ParseAddr(strings.ReplaceAll(suffix, "-", ":"))
}

// limitChains returns the inbound and outbound limit chains of an ElasticIP.
func limitChains(t *nftables.Table, eip netip.Addr) (in, out *nftables.Chain) {
	i, o := LimitChainNames(eip)
	return &nftables.Chain{Name: i, Table: t}, &nftables.Chain{Name: o, Table: t}
}

// limitRules returns the one rule of each limit chain of an ElasticIP:
//
//	bw_in_E:  ip saddr != @cluster_cidrs limit rate over R bytes/second counter drop
//	bw_out_E: ip daddr != @cluster_cidrs limit rate over R bytes/second counter drop
//
// Only traffic with the outside counts: the cluster check sits here rather
// than in the base chain so that packets of unlimited addresses cost one
// hash lookup per direction and nothing more.
func limitRules(sets setsOf, eip netip.Addr, mbps int32) (in, out *nftables.Rule) {
	ci, co := limitChains(sets.cluster.Table, eip)
	f := sets.fam
	rule := func(c *nftables.Chain, peerOff uint32) *nftables.Rule {
		return &nftables.Rule{Table: c.Table, Chain: c, Exprs: []expr.Any{
			f.loadNH(peerOff, reg0), notIn(sets.cluster, reg0),
			limitOver(mbps), &expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop},
		}}
	}
	return rule(ci, f.offSrc), rule(co, f.offDst)
}

// limitOver matches packets once the ElasticIP's bytes exceed the rate. The
// kernel's token bucket for a byte limit holds rate + burst bytes, i.e. one
// second of traffic at the rate with a burst of 0, enough for the largest
// GRO/GSO packet (64 KiB) at any rate from 1 Mbit/s on.
func limitOver(mbps int32) *expr.Limit {
	return &expr.Limit{
		Type: expr.LimitTypePktBytes, Rate: uint64(mbps) * bytesPerMbit, Unit: expr.LimitTimeSecond, Over: true,
	}
}

func lookupVerdict(s *nftables.Set, sreg uint32) *expr.Lookup {
	return &expr.Lookup{SourceRegister: sreg, DestRegister: regVerdict, IsDestRegSet: true, SetName: s.Name, SetID: s.ID}
}

// addLimitChains adds the limit chains and rules of the ruleset's family's
// ElasticIPs to it.
func (rs *ruleset) addLimitChains(s *state) {
	for _, eip := range sortedKeys(s.limits) {
		if familyOf(eip) != rs.sets.fam {
			continue
		}
		ci, co := limitChains(rs.table, eip)
		ri, ro := limitRules(rs.sets, eip, s.limits[eip])
		rs.chains = append(rs.chains, ci, co)
		rs.rules = append(rs.rules, ri, ro)
	}
}

// limitElements adds the verdict map elements of ElasticIPs (inbound, keyed
// by the ElasticIP) and of sources (outbound, keyed by the source address)
// to out; deletions need only the keys.
func limitElements(out map[*nftables.Set][]nftables.SetElement, s familySets, eips []netip.Addr, srcs []limitSource, keysOnly bool) {
	jump := func(chain string) *expr.Verdict {
		if keysOnly {
			return nil
		}
		return &expr.Verdict{Kind: expr.VerdictJump, Chain: chain}
	}
	for _, eip := range eips {
		in, _ := LimitChainNames(eip)
		m := s.of(eip).limitIn
		out[m] = append(out[m], nftables.SetElement{Key: addrBytes(eip), VerdictData: jump(in)})
	}
	for _, src := range srcs {
		_, o := LimitChainNames(src.eip)
		m := s.of(src.addr).limitOut
		out[m] = append(out[m], nftables.SetElement{Key: addrBytes(src.addr), VerdictData: jump(o)})
	}
}

// limitSource is an element of the outbound verdict map: traffic from addr
// counts against eip's outbound limit.
type limitSource struct{ addr, eip netip.Addr }

func limitSources(m map[netip.Addr]netip.Addr) []limitSource {
	out := make([]limitSource, 0, len(m))
	for _, a := range sortedKeys(m) {
		out = append(out, limitSource{addr: a, eip: m[a]})
	}
	return out
}

// limitChange is what an incremental sync writes for bandwidth limits.
type limitChange struct {
	// ElasticIPs whose chains are deleted, created, or rewritten with a new
	// rate. Only these chains are touched: every other limit keeps its rule
	// and its token bucket.
	removed, added, changed []netip.Addr
	// Outbound map elements to delete (a source gone or now counted against
	// another ElasticIP) and to add.
	removedSrc, addedSrc []limitSource
}

// writeLimitChains queues the chain and rule changes of c: stale chains are
// deleted (the kernel deletes their rule with them; their map elements must
// be deleted earlier in the same batch), new chains are created with their
// rule, and a changed rate replaces the rule of both chains of that
// ElasticIP only.
func writeLimitChains(c *nftables.Conn, sets familySets, want *state, lc limitChange) {
	for _, eip := range lc.removed {
		in, out := limitChains(sets.of(eip).cluster.Table, eip)
		c.DelChain(in)
		c.DelChain(out)
	}
	for _, eip := range lc.added {
		in, out := limitChains(sets.of(eip).cluster.Table, eip)
		c.AddChain(in)
		c.AddChain(out)
		ri, ro := limitRules(sets.of(eip), eip, want.limits[eip])
		c.AddRule(ri)
		c.AddRule(ro)
	}
	for _, eip := range lc.changed {
		in, out := limitChains(sets.of(eip).cluster.Table, eip)
		c.FlushChain(in)
		c.FlushChain(out)
		ri, ro := limitRules(sets.of(eip), eip, want.limits[eip])
		c.AddRule(ri)
		c.AddRule(ro)
	}
}

// KernelLimits reads back the limit, in Mbit/s, of every ElasticIP that has
// a limit chain in the kernel, from the rule of its inbound chain, in both
// tables.
func (p *Programmer) KernelLimits(ctx context.Context) (map[netip.Addr]int32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, _, err := p.dial(receiveBufferBytes, false)
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	out := map[netip.Addr]int32{}
	for _, f := range families {
		if err := kernelLimitsOf(c, f, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// kernelLimitsOf adds the limits of a family's table to out. The IPv4 table
// must exist (ErrNoTable otherwise); a missing IPv6 table holds no limit.
func kernelLimitsOf(c *nftables.Conn, f *family, out map[netip.Addr]int32) error {
	t := newTable(f)
	if err := tableExists(c, f); err != nil {
		if errors.Is(err, ErrNoTable) && f == fam6 {
			return nil
		}
		return err
	}
	chains, err := c.ListChainsOfTableFamily(f.table)
	if err != nil {
		return fmt.Errorf("list chains: %w", err)
	}
	for _, ch := range chains {
		name, ok := strings.CutPrefix(ch.Name, chainLimitInPrefix)
		if ch.Table.Name != TableName || !ok {
			continue
		}
		eip, err := limitChainAddr(name)
		if err != nil {
			continue
		}
		rules, err := c.GetRules(t, &nftables.Chain{Name: ch.Name, Table: t})
		if err != nil {
			return fmt.Errorf("list %s: %w", ch.Name, err)
		}
		for _, r := range rules {
			for _, e := range r.Exprs {
				if l, ok := e.(*expr.Limit); ok {
					out[eip] = int32(l.Rate / bytesPerMbit)
				}
			}
		}
	}
	return nil
}

// tableExists returns ErrNoTable when the kernel holds no table of ours in
// that family.
func tableExists(c *nftables.Conn, f *family) error {
	if _, err := c.ListTableOfFamily(TableName, f.table); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return ErrNoTable
		}
		return fmt.Errorf("list table %s %s: %w", f.name, TableName, err)
	}
	return nil
}
