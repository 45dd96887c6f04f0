package nft

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
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

// setLimits fills the limits of a state whose mappings and direct NICs are
// already validated. A NAT mapping's outbound traffic is keyed by its Pod IP,
// a direct NIC's by its own address. A direct NIC address that a NAT mapping
// also uses (as ElasticIP or Pod IP) is a conflict the datapath cannot
// resolve; the NAT mapping's limit wins and the direct limit is reported.
func (s *state) setLimits(nat, direct map[netip.Addr]int32, errs []error) []error {
	s.limits = map[netip.Addr]int32{}
	s.limitSrc = map[netip.Addr]netip.Addr{}
	for eip, pod := range s.eip2vpc {
		if mbps := nat[eip]; mbps > 0 {
			s.limits[eip] = mbps
			s.limitSrc[pod] = eip
		}
	}
	for _, a := range sortedKeys(direct) {
		if direct[a] == 0 {
			continue
		}
		_, isEIP := s.eip2vpc[a]
		_, isPod := s.vpc2eip[a]
		if isEIP || isPod {
			errs = append(errs, fmt.Errorf("direct NIC address %v is also used by a NAT mapping: its bandwidth limit is ignored", a))
			continue
		}
		s.limits[a] = direct[a]
		s.limitSrc[a] = a
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
// of an ElasticIP.
func LimitChainNames(eip netip.Addr) (in, out string) {
	return chainLimitInPrefix + eip.String(), chainLimitOutPrefix + eip.String()
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
	rule := func(c *nftables.Chain, peerOff uint32) *nftables.Rule {
		return &nftables.Rule{Table: c.Table, Chain: c, Exprs: []expr.Any{
			loadNH(peerOff, reg0), notIn(sets.cluster, reg0),
			limitOver(mbps), &expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop},
		}}
	}
	return rule(ci, offIPSrc), rule(co, offIPDst)
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

// limitBaseRules are the prerouting rules that send a limited address's
// packets through its limit chains: inbound by destination, outbound by
// source. A miss in a verdict map ends the rule and the next one runs.
// Outbound traffic comes from a Pod, never through the external interface:
// excluding it keeps packets forged there with a Pod's or ElasticIP's
// source from using up that ElasticIP's outbound budget.
func limitBaseRules(s setsOf, iface string) [][]expr.Any {
	return [][]expr.Any{
		// ip daddr vmap @bw_in
		{loadNH(offIPDst, reg0), lookupVerdict(s.limitIn, reg0)},
		// iifname != "ext" ip saddr vmap @bw_out
		{
			&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: regName},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: regName, Data: ifname(iface)},
			loadNH(offIPSrc, reg0), lookupVerdict(s.limitOut, reg0),
		},
	}
}

func lookupVerdict(s *nftables.Set, sreg uint32) *expr.Lookup {
	return &expr.Lookup{SourceRegister: sreg, DestRegister: regVerdict, IsDestRegSet: true, SetName: s.Name, SetID: s.ID}
}

// addLimitChains adds the limit chains and rules of ElasticIPs to a ruleset.
func (rs *ruleset) addLimitChains(s *state) {
	for _, eip := range sortedKeys(s.limits) {
		ci, co := limitChains(rs.table, eip)
		ri, ro := limitRules(rs.sets, eip, s.limits[eip])
		rs.chains = append(rs.chains, ci, co)
		rs.rules = append(rs.rules, ri, ro)
	}
}

// limitElements adds the verdict map elements of ElasticIPs (inbound, keyed
// by the ElasticIP) and of sources (outbound, keyed by the source address)
// to out; deletions need only the keys.
func limitElements(out map[*nftables.Set][]nftables.SetElement, s setsOf, eips []netip.Addr, srcs []limitSource, keysOnly bool) {
	jump := func(chain string) *expr.Verdict {
		if keysOnly {
			return nil
		}
		return &expr.Verdict{Kind: expr.VerdictJump, Chain: chain}
	}
	for _, eip := range eips {
		in, _ := LimitChainNames(eip)
		out[s.limitIn] = append(out[s.limitIn], nftables.SetElement{Key: addrBytes(eip), VerdictData: jump(in)})
	}
	for _, src := range srcs {
		_, o := LimitChainNames(src.eip)
		out[s.limitOut] = append(out[s.limitOut], nftables.SetElement{Key: addrBytes(src.addr), VerdictData: jump(o)})
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

func diffLimits(old, new *state) limitChange {
	var c limitChange
	for eip, mbps := range old.limits {
		if n, ok := new.limits[eip]; !ok {
			c.removed = append(c.removed, eip)
		} else if n != mbps {
			c.changed = append(c.changed, eip)
		}
	}
	for eip := range new.limits {
		if _, ok := old.limits[eip]; !ok {
			c.added = append(c.added, eip)
		}
	}
	for src, eip := range old.limitSrc {
		if n, ok := new.limitSrc[src]; !ok || n != eip {
			c.removedSrc = append(c.removedSrc, limitSource{addr: src, eip: eip})
		}
	}
	for src, eip := range new.limitSrc {
		if o, ok := old.limitSrc[src]; !ok || o != eip {
			c.addedSrc = append(c.addedSrc, limitSource{addr: src, eip: eip})
		}
	}
	for _, l := range [][]netip.Addr{c.removed, c.added, c.changed} {
		slices.SortFunc(l, netip.Addr.Compare)
	}
	bySrc := func(a, b limitSource) int { return a.addr.Compare(b.addr) }
	slices.SortFunc(c.removedSrc, bySrc)
	slices.SortFunc(c.addedSrc, bySrc)
	return c
}

// writeLimitChains queues the chain and rule changes of c: stale chains are
// deleted (the kernel deletes their rule with them; their map elements must
// be deleted earlier in the same batch), new chains are created with their
// rule, and a changed rate replaces the rule of both chains of that
// ElasticIP only.
func writeLimitChains(c *nftables.Conn, sets setsOf, want *state, lc limitChange) {
	t := sets.cluster.Table
	for _, eip := range lc.removed {
		in, out := limitChains(t, eip)
		c.DelChain(in)
		c.DelChain(out)
	}
	for _, eip := range lc.added {
		in, out := limitChains(t, eip)
		c.AddChain(in)
		c.AddChain(out)
		ri, ro := limitRules(sets, eip, want.limits[eip])
		c.AddRule(ri)
		c.AddRule(ro)
	}
	for _, eip := range lc.changed {
		in, out := limitChains(t, eip)
		c.FlushChain(in)
		c.FlushChain(out)
		ri, ro := limitRules(sets, eip, want.limits[eip])
		c.AddRule(ri)
		c.AddRule(ro)
	}
}

// KernelLimits reads back the limit, in Mbit/s, of every ElasticIP that has
// a limit chain in the kernel, from the rule of its inbound chain.
func (p *Programmer) KernelLimits(ctx context.Context) (map[netip.Addr]int32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := p.dial(receiveBufferBytes)
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	t := newTable()
	if _, err := c.ListTableOfFamily(TableName, nftables.TableFamilyIPv4); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, ErrNoTable
		}
		return nil, fmt.Errorf("list table %s: %w", TableName, err)
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return nil, fmt.Errorf("list chains: %w", err)
	}
	out := map[netip.Addr]int32{}
	for _, ch := range chains {
		name, ok := strings.CutPrefix(ch.Name, chainLimitInPrefix)
		if ch.Table.Name != TableName || !ok {
			continue
		}
		eip, err := netip.ParseAddr(name)
		if err != nil {
			continue
		}
		rules, err := c.GetRules(t, &nftables.Chain{Name: ch.Name, Table: t})
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", ch.Name, err)
		}
		for _, r := range rules {
			for _, e := range r.Exprs {
				if l, ok := e.(*expr.Limit); ok {
					out[eip] = int32(l.Rate / bytesPerMbit)
				}
			}
		}
	}
	return out, nil
}
