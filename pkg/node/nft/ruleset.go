package nft

import (
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
)

// ruleset is the table without the elements of its dynamic sets: the fixed
// chains and rules, plus the limit chains of the limited ElasticIPs.
type ruleset struct {
	table  *nftables.Table
	sets   setsOf
	chains []*nftables.Chain
	rules  []*nftables.Rule
	// constant set contents, added with the sets
	clusterElems []nftables.SetElement
	icmpElems    []nftables.SetElement
}

// buildRuleset returns the table, sets, chains and rules of a family's table
// for a configuration. It is pure: the same state always gives the same
// ruleset.
func buildRuleset(s *state, f *family) *ruleset {
	sets := newSets(f)
	t := sets.eip2vpc.Table
	accept := nftables.ChainPolicyAccept
	pre := &nftables.Chain{
		Name: ChainPrerouting, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityRef(PriorityPrerouting), Policy: &accept,
	}
	post := &nftables.Chain{
		Name: ChainPostrouting, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityRef(PriorityPostrouting), Policy: &accept,
	}
	outside := &nftables.Chain{Name: ChainFromOutside, Table: t}
	dnat := &nftables.Chain{Name: ChainDNAT, Table: t}
	dnatErr := &nftables.Chain{Name: ChainDNATICMPError, Table: t}
	snat := &nftables.Chain{Name: ChainSNAT, Table: t}
	snatErr := &nftables.Chain{Name: ChainSNATICMPError, Table: t}
	nat := func(name string, hook *nftables.ChainHook, prio nftables.ChainPriority) *nftables.Chain {
		return &nftables.Chain{
			Name: name, Table: t, Type: nftables.ChainTypeNAT,
			Hooknum: hook, Priority: nftables.ChainPriorityRef(prio), Policy: &accept,
		}
	}
	inDNAT := nat(ChainInClusterDNAT, nftables.ChainHookPrerouting, PriorityInClusterDNAT)
	inOutput := nat(ChainInClusterOutput, nftables.ChainHookOutput, PriorityInClusterDNAT)
	inHairpin := nat(ChainInClusterHairpin, nftables.ChainHookPostrouting, PriorityInClusterSNAT)

	cluster := clusterRanges{set: sets.cluster, ranges: ranges(familyPrefixes(s.cidrs, f))}
	rs := &ruleset{
		table:        t,
		sets:         sets,
		chains:       []*nftables.Chain{pre, post, outside, dnat, dnatErr, snat, snatErr, inDNAT, inOutput, inHairpin},
		clusterElems: intervalElements(cluster.ranges),
		icmpElems:    icmpErrorElements(f),
	}
	add := func(c *nftables.Chain, rules ...[]expr.Any) {
		for _, e := range rules {
			rs.rules = append(rs.rules, &nftables.Rule{Table: t, Chain: c, Exprs: e})
		}
	}
	add(pre, preroutingRules(sets, cluster, s.iface, s.extIndex)...)
	add(outside, fromOutsideRules(sets)...)
	add(dnat, dnatRules(sets)...)
	add(post, postroutingRules(sets, cluster, s.iface, s.extIndex)...)
	add(snat, snatRules(sets)...)
	if f == fam4 {
		add(dnatErr, quoteRules(sets.eip2vpcQuoted, offIPDst, offQuoteSrc)...)
		add(snatErr, quoteRules(sets.vpc2eipQuoted, offIPSrc, offQuoteDst)...)
	} else {
		add(dnatErr, quoteRules6(sets.eip2vpcQuoted, offIP6Dst, offQuote6Src)...)
		add(snatErr, quoteRules6(sets.vpc2eipQuoted, offIP6Src, offQuote6Dst)...)
	}
	add(inDNAT, inClusterDNATRules(sets)...)
	add(inOutput, inClusterOutputRules(sets)...)
	add(inHairpin, inClusterHairpinRules(sets)...)
	rs.addLimitChains(s)
	return rs
}

// preroutingRules dispatch on the input interface first. Packets from the
// external interface go to from_outside, where a packet to an ElasticIP
// without a limit meets one map lookup before its rewrite, and nothing else
// (neither anti-spoofing, which concerns direct NICs, nor the outbound
// limits, which concern traffic from Pods). Everything else comes from
// inside the node: a direct NIC's traffic with a source not its own is
// dropped first, before conntrack and before any translation; limited
// addresses' traffic with the outside goes through their limit chains
// (still from the Pod IP or the direct NIC's ElasticIP, still to the
// ElasticIP); traffic to an ElasticIP is translated (chain eip_dnat); a
// translated Pod's traffic to outside the cluster is kept out of conntrack,
// so the primary CNI's masquerade and kube-proxy never see it.
//
// Right after anti-spoofing, traffic from a cluster address to any
// ElasticIP of the cluster (an in-cluster client, or the replies of a Pod
// reaching its own ElasticIP) is accepted as it is: it stays tracked and is
// translated by the NAT chain incluster_dnat, not by the stateless rules,
// and it is never limited.
//
// A translated Pod's traffic to outside the cluster, past its outbound
// limit, is accepted as soon as it is kept out of conntrack: the inbound
// rules after it (the inbound limits, the translation to a Pod) concern
// traffic to an ElasticIP, and a Pod's traffic to any ElasticIP of the
// cluster was accepted above, since Pod IPs are cluster addresses.
//
// When the external interface's index is known, a first rule matches it by
// index (a 4-byte compare, where a name costs a 16-byte copy) and translates
// the common packet right there; the name-based rules after it handle
// everything else, also when the interface was recreated with another index
// since the last full sync.
func preroutingRules(s setsOf, cluster clusterRanges, iface string, extIndex uint32) [][]expr.Any {
	f := s.fam
	r0, r1 := f.reg(0), f.reg(1)
	var fast [][]expr.Any
	if extIndex != 0 {
		// iif <ext> meta l4proto != icmp ip daddr set ip daddr map @eip2vpc_unlimited notrack accept
		fast = append(fast, append([]expr.Any{
			&expr.Meta{Key: expr.MetaKeyIIF, Register: reg0}, eq(reg0, binaryutil.NativeEndian.PutUint32(extIndex)),
		}, translateUnlimited(s)...))
	}
	return append(fast, [][]expr.Any{
		// iifname "ext" goto from_outside
		{
			&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: regName},
			&expr.Cmp{Op: expr.CmpOpEq, Register: regName, Data: ifname(iface)},
			gotoChain(ChainFromOutside),
		},
		// iifname @direct_ifaces iifname . ip saddr != @direct_allowed counter drop
		antiSpoofing(s),
		// ip daddr @cluster_eip2vpc ip saddr @cluster_cidrs accept
		{f.loadDst(r0), in(s.clusterEIP2VPC, r0), f.loadSrc(r1), in(s.cluster, r1), &expr.Verdict{Kind: expr.VerdictAccept}},
		// ip saddr vmap @bw_out (a miss continues)
		{f.loadSrc(r0), lookupVerdict(s.limitOut, r0)},
		// ip saddr @vpc2eip ip daddr != @cluster_cidrs notrack accept (the ranges compared in the rule: outsideDst)
		slices.Concat([]expr.Any{f.loadSrc(r0), in(s.vpc2eip, r0)}, cluster.outsideDst(f, r1),
			[]expr.Any{&expr.Notrack{}, &expr.Verdict{Kind: expr.VerdictAccept}}),
		// ip daddr vmap @bw_in
		{f.loadDst(r0), lookupVerdict(s.limitIn, r0)},
		// ip daddr @eip2vpc goto eip_dnat
		{f.loadDst(r0), in(s.eip2vpc, r0), gotoChain(ChainDNAT)},
	}...)
}

// antiSpoofing drops what a direct NIC sends from an address not its own.
// The interface name is loaded into the 16-byte register 1 and the source
// address right after it, so the two form the key "ifname . address" of
// direct_allowed. Over IPv6 a NIC also sends from its link-local address and,
// during duplicate address detection, from ::; neither can leave the link
// (the kernel never forwards a link-local source), and the Pod needs them to
// find its gateway, so they pass.
func antiSpoofing(s setsOf) []expr.Any {
	e := []expr.Any{&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: regName}, in(s.directIfaces, regName)}
	if s.fam == fam6 {
		// The whole address masked, as nft generates `ip6 saddr != fe80::/10`
		// (from two bytes it lists a raw `@nh,64,16`).
		linkLocal, mask := make([]byte, 16), make([]byte, 16)
		linkLocal[0], linkLocal[1], mask[0], mask[1] = 0xfe, 0x80, 0xff, 0xc0
		e = append(e,
			// ip6 saddr != fe80::/10
			fam6.loadSrc(regAfterName),
			&expr.Bitwise{SourceRegister: regAfterName, DestRegister: regAfterName, Len: 16, Mask: mask, Xor: make([]byte, 16)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: regAfterName, Data: linkLocal},
			// ip6 saddr != ::
			fam6.loadSrc(regAfterName),
			&expr.Cmp{Op: expr.CmpOpNeq, Register: regAfterName, Data: make([]byte, 16)},
		)
	}
	return append(e, s.fam.loadSrc(regAfterName), notIn(s.directAllowed, regName),
		&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop})
}

// fromOutsideRules handle what enters through the external interface. A
// packet to an ElasticIP without a limit that is not ICMP (an ICMP error's
// quote must be rewritten too) is translated by the first rule, with one
// lookup in the map of the unlimited ElasticIPs, and accepted.
// The others go through the inbound limit of their destination, if any (a
// NAT or a direct NIC's ElasticIP), then the full translation (chain eip_dnat).
// The rest (the node's own traffic, anything routed elsewhere) leaves the
// chain untouched.
func fromOutsideRules(s setsOf) [][]expr.Any {
	r0 := s.fam.reg(0)
	return [][]expr.Any{
		// meta l4proto != icmp ip daddr set ip daddr map @eip2vpc_unlimited notrack accept
		translateUnlimited(s),
		// ip daddr vmap @bw_in
		{s.fam.loadDst(r0), lookupVerdict(s.limitIn, r0)},
		// ip daddr @eip2vpc goto eip_dnat
		{s.fam.loadDst(r0), in(s.eip2vpc, r0), gotoChain(ChainDNAT)},
	}
}

// translateUnlimited translates a packet to an ElasticIP without a limit
// that is not ICMP, with one lookup, and accepts it. A miss (a limited
// ElasticIP, or no ElasticIP) ends the rule before anything is written.
//
// The expressions are those nft itself generates for the rule, so that
// `nft list` prints it back. nft cannot read a compare on part of a
// lookup's value ("Relational expression has no left hand side"), which is
// why the limited ElasticIPs are left out of this map rather than flagged
// in eip2vpc.
func translateUnlimited(s setsOf) []expr.Any {
	f := s.fam
	r0 := f.reg(0)
	e := append(f.notICMP(r0), f.loadDst(r0), lookupMap(s.eip2vpcUnlimited, r0, r0))
	e = append(e, f.writeNH(f.offDst, r0, f.reg(3))...)
	return append(e, &expr.Notrack{}, &expr.Verdict{Kind: expr.VerdictAccept})
}

// dnatRules rewrite the destination ElasticIP to the Pod IP, fixing the IP
// header checksum and the TCP/UDP pseudo-header checksum, after an ICMP error
// has had its quote rewritten (or been dropped). Over IPv6, Neighbor
// Discovery addressed to an ElasticIP (a neighbour's unicast reachability
// check) is never translated: the NDP responder has answered it on the
// external interface already, and forwarded on it would only reach the Pod
// with a hop limit below 255, which Neighbor Discovery refuses.
func dnatRules(s setsOf) [][]expr.Any {
	f := s.fam
	r0 := f.reg(0)
	var out [][]expr.Any
	if f == fam6 {
		// icmpv6 type 133-137 counter drop
		out = append(out, append(f.isICMP(r0),
			loadTH(0, 1, r0),
			&expr.Cmp{Op: expr.CmpOpGte, Register: r0, Data: []byte{ndpFirstType}},
			&expr.Cmp{Op: expr.CmpOpLte, Register: r0, Data: []byte{ndpLastType}},
			&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop}))
	}
	out = append(out, isICMPError(s, jumpChain(ChainDNATICMPError)))
	rewrite := append([]expr.Any{f.loadDst(r0), lookupMap(s.eip2vpc, r0, r0)}, f.writeNH(f.offDst, r0, f.reg(3))...)
	return append(out, append(rewrite, &expr.Notrack{}))
}

// postroutingRules: a translated Pod's traffic leaving through the external
// interface towards outside the cluster gets its ElasticIP as source. When the
// external interface's index is known, a first rule matches it by index and
// rewrites the common packet (anything but ICMP, whose errors quote the
// address) at once, as the first prerouting rule does inbound; the name-based
// rule after it handles the rest, also after the interface was recreated.
func postroutingRules(s setsOf, cluster clusterRanges, iface string, extIndex uint32) [][]expr.Any {
	f := s.fam
	r0, r1 := f.reg(0), f.reg(1)
	var fast [][]expr.Any
	if extIndex != 0 {
		// oif <ext> meta l4proto != icmp ip daddr != @cluster_cidrs ip saddr set ip saddr map @vpc2eip accept (outsideDst)
		e := append([]expr.Any{&expr.Meta{Key: expr.MetaKeyOIF, Register: reg0}, eq(reg0, binaryutil.NativeEndian.PutUint32(extIndex))},
			f.notICMP(r0)...)
		e = append(append(e, cluster.outsideDst(f, r1)...), f.loadSrc(r0), lookupMap(s.vpc2eip, r0, r0))
		e = append(e, f.writeNH(f.offSrc, r0, f.reg(3))...)
		fast = append(fast, append(e, &expr.Verdict{Kind: expr.VerdictAccept}))
	}
	// oifname "ext" ip saddr @vpc2eip ip daddr != @cluster_cidrs goto eip_snat (outsideDst)
	return append(fast, slices.Concat([]expr.Any{
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: regName},
		&expr.Cmp{Op: expr.CmpOpEq, Register: regName, Data: ifname(iface)},
		f.loadSrc(r0), in(s.vpc2eip, r0),
	}, cluster.outsideDst(f, r1), []expr.Any{gotoChain(ChainSNAT)}))
}

func snatRules(s setsOf) [][]expr.Any {
	f := s.fam
	r0 := f.reg(0)
	out := [][]expr.Any{isICMPError(s, jumpChain(ChainSNATICMPError))}
	return append(out, append([]expr.Any{f.loadSrc(r0), lookupMap(s.vpc2eip, r0, r0)}, f.writeNH(f.offSrc, r0, f.reg(3))...))
}

// inClusterDNATRules: a new connection from a cluster address to an
// ElasticIP of the cluster gets the ElasticIP's Pod IP as destination;
// conntrack gives the replies the ElasticIP back as source. Only the first
// packet of a tracked connection comes here. The source must be a cluster
// address: the target's replies to any other address are kept out of
// conntrack (and translated statelessly) on the target's node, so such a
// client is left to the external path.
func inClusterDNATRules(s setsOf) [][]expr.Any {
	f := s.fam
	r0, r1 := f.reg(0), f.reg(1)
	// ip saddr @cluster_cidrs dnat ip to ip daddr map @cluster_eip2vpc
	return [][]expr.Any{{
		f.loadDst(r0), lookupMap(s.clusterEIP2VPC, r0, r0),
		f.loadSrc(r1), in(s.cluster, r1),
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: f.nfproto, RegAddrMin: r0},
	}}
}

// inClusterOutputRules: the same for connections the node itself opens
// (its source address is chosen before the output hook).
func inClusterOutputRules(s setsOf) [][]expr.Any { return inClusterDNATRules(s) }

// inClusterHairpinRules: a Pod that reached its own ElasticIP gets, after the
// DNAT, a packet from itself to itself, which its kernel would drop as a
// martian; its source becomes the ElasticIP instead, so the Pod sees its own
// ElasticIP as the client, and its replies, to the ElasticIP, go back
// through the same connection. The key "source . destination" is "P . P",
// whose element vpc2eip_quoted already holds for every Pod of this node.
func inClusterHairpinRules(s setsOf) [][]expr.Any {
	f := s.fam
	r0 := f.reg(0)
	// ct status dnat snat ip to ip saddr . ip daddr map @vpc2eip_quoted
	return [][]expr.Any{{
		&expr.Ct{Key: expr.CtKeySTATUS, Register: reg0},
		&expr.Bitwise{SourceRegister: reg0, DestRegister: reg0, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(ipsDstNAT), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: reg0, Data: binaryutil.NativeEndian.PutUint32(0)},
		f.loadSrc(r0), f.loadDst(f.reg(1)), lookupMap(s.vpc2eipQuoted, r0, r0),
		&expr.NAT{Type: expr.NATTypeSourceNAT, Family: f.nfproto, RegAddrMin: r0},
	}}
}
