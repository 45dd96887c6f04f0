package nft

import (
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Names of everything juneau owns in nftables. The table is ours alone; no
// other component adds to it and we touch nothing outside it.
const (
	TableName = "juneau"

	ChainPrerouting  = "prerouting"
	ChainFromOutside = "from_outside"
	ChainPostrouting = "postrouting"
	// ChainDNAT and ChainSNAT rewrite an ElasticIP's packets. No name is an
	// nft keyword ("dnat" and "snat" are), so that `nft list chain` and `nft
	// -f` take every name as nft lists it (README.md, "Reading the table
	// with nft").
	ChainDNAT          = "eip_dnat"
	ChainDNATICMPError = "dnat_icmp_error"
	ChainSNAT          = "eip_snat"
	ChainSNATICMPError = "snat_icmp_error"
	// The in-cluster chains translate cluster clients' connections to an
	// ElasticIP with connection tracking (README.md, "In-cluster clients"):
	// DNAT of this node's Pods (prerouting) and of the node itself (output),
	// and the hairpin SNAT of a Pod reaching its own ElasticIP.
	ChainInClusterDNAT    = "incluster_dnat"
	ChainInClusterOutput  = "incluster_output"
	ChainInClusterHairpin = "incluster_hairpin"

	// MapEIP2VPC maps an ElasticIP to its Pod IP; MapVPC2EIP maps the Pod
	// IP back to the ElasticIP.
	MapEIP2VPC = "eip2vpc"
	MapVPC2EIP = "vpc2eip"
	// MapEIP2VPCUnlimited holds the elements of MapEIP2VPC whose ElasticIP
	// has no bandwidth limit: the one lookup of the common inbound packet
	// (see translateUnlimited).
	MapEIP2VPCUnlimited = "eip2vpc_unlimited"
	// MapEIP2VPCQuoted maps "ElasticIP . ElasticIP" to the Pod IP: the key
	// is an ICMP error's destination and its quoted source, so a quote naming
	// any other address finds nothing and the error is dropped.
	MapEIP2VPCQuoted = "eip2vpc_quoted"
	// MapVPC2EIPQuoted maps "Pod IP . Pod IP" (outer source . quoted
	// destination) to the ElasticIP.
	MapVPC2EIPQuoted = "vpc2eip_quoted"
	// SetClusterCIDRs holds the ranges that are never translated.
	SetClusterCIDRs = "cluster_cidrs"
	// SetICMPErrors holds the ICMP types that quote the offending packet.
	SetICMPErrors = "icmp_errors"
	// SetDirectIfaces holds the host interfaces of direct NICs, whose
	// traffic is checked against SetDirectAllowed ("interface . source
	// address" pairs); anything else from them is dropped.
	SetDirectIfaces  = "direct_ifaces"
	SetDirectAllowed = "direct_allowed"
	// MapLimitIn maps a limited ElasticIP (as destination) to a jump to its
	// inbound limit chain; MapLimitOut maps the source address of its
	// outbound traffic (the Pod IP for NAT, the ElasticIP of a direct NIC)
	// to a jump to its outbound limit chain. See LimitChainNames.
	MapLimitIn  = "bw_in"
	MapLimitOut = "bw_out"
	// MapClusterEIP2VPC maps every NAT-attached ElasticIP of the cluster,
	// on any node, to its Pod IP, for in-cluster clients.
	MapClusterEIP2VPC = "cluster_eip2vpc"
)

// Hook priorities. Prerouting runs at raw (-300): after defragmentation
// (-400), before conntrack (-200), so `notrack` keeps translated flows out of
// conntrack and every NAT or filter chain after us sees the Pod IP.
// Postrouting runs just after srcnat (100): conntrack-based masquerade never
// sees our untracked packets anyway, and rules ordered around srcnat still
// see the Pod's own address.
//
// The in-cluster chains are NAT chains, which see only the first packet of a
// tracked connection (never our untracked ones): DNAT at dstnat (-100), as
// kube-proxy's Service DNAT, whose addresses are never ElasticIPs; the
// hairpin SNAT at srcnat + 5, after the masquerades at srcnat, so that a
// connection kube-proxy or the CNI already masqueraded keeps its binding (a
// Pod reaching itself through a Service).
const (
	PriorityPrerouting    = -300
	PriorityPostrouting   = 110
	PriorityInClusterDNAT = -100
	PriorityInClusterSNAT = 105

	// ipsDstNAT is IPS_DST_NAT in a connection's status.
	ipsDstNAT = 1 << 5
)

// ICMPErrorTypes are the ICMP types that carry a quote of the packet that
// caused them: destination unreachable, source quench, redirect, time
// exceeded, parameter problem.
var ICMPErrorTypes = []byte{3, 4, 5, 11, 12}

// Offsets inside an IPv4 header and inside an ICMP error (from the start of
// the ICMP header, i.e. nftables' transport header base). The quote starts at
// +8; quoted addresses and the quoted header checksum sit at fixed offsets
// whatever options the quoted header carries.
const (
	offIPChecksum = 10
	offIPSrc      = 12
	offIPDst      = 16

	offICMPChecksum   = 2
	offQuoteVerIHL    = 8
	offQuoteFrag      = 8 + 6 // flags and fragment offset
	offQuoteProto     = 8 + 9
	offQuoteChecksum  = 8 + offIPChecksum
	offQuoteSrc       = 8 + offIPSrc
	offQuoteDst       = 8 + offIPDst
	offQuoteUDPCsum   = 8 + 20 + 6  // only with a 20-byte quoted header
	offQuoteTCPCsum   = 8 + 20 + 16 // likewise
	quoteVerIHLNoOpts = 0x45
)

// 32-bit registers. A concatenated key of two addresses occupies two
// consecutive registers.
const (
	reg0 = unix.NFT_REG32_00 + iota
	reg1
	reg2
	reg3
	// regAfterName follows the interface name: an address loaded there
	// after a name in regName is the key "ifname . address" of a
	// concatenated set.
	regAfterName
	// regName is the 16-byte register for interface names. It is the same
	// storage as reg0..reg3.
	regName = unix.NFT_REG_1
	// regVerdict receives the verdict of a verdict map lookup.
	regVerdict = unix.NFT_REG_VERDICT
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

// setsOf names the table's sets and maps.
type setsOf struct {
	fam                                            *family
	eip2vpc, vpc2eip, eip2vpcQuoted, vpc2eipQuoted *nftables.Set
	eip2vpcUnlimited                               *nftables.Set
	cluster, icmpErrors                            *nftables.Set
	directIfaces, directAllowed                    *nftables.Set
	limitIn, limitOut                              *nftables.Set
	clusterEIP2VPC                                 *nftables.Set
}

func (s setsOf) all() []*nftables.Set {
	return append(s.maps(), s.cluster, s.icmpErrors, s.directIfaces, s.directAllowed, s.limitIn, s.limitOut, s.clusterEIP2VPC)
}

// maps are the NAT maps, whose elements come from the mappings.
func (s setsOf) maps() []*nftables.Set {
	return []*nftables.Set{s.eip2vpc, s.vpc2eip, s.eip2vpcQuoted, s.vpc2eipQuoted, s.eip2vpcUnlimited}
}

// dynamic are the sets whose elements follow the desired state, element by
// element: the NAT maps, the anti-spoofing sets, the limit verdict maps and
// the in-cluster map.
func (s setsOf) dynamic() []*nftables.Set {
	return append(s.maps(), s.directIfaces, s.directAllowed, s.limitIn, s.limitOut, s.clusterEIP2VPC)
}

func newTable(f *family) *nftables.Table {
	return &nftables.Table{Name: TableName, Family: f.table}
}

// familySets are the sets of both tables.
type familySets [2]setsOf

func newFamilySets() familySets { return familySets{newSets(fam4), newSets(fam6)} }

// of returns the sets of the table an address belongs to.
func (fs familySets) of(a netip.Addr) setsOf {
	if a.Is4() {
		return fs[0]
	}
	return fs[1]
}

// dynamic are the dynamic sets of both tables.
func (fs familySets) dynamic() []*nftables.Set { return append(fs[0].dynamic(), fs[1].dynamic()...) }

// newSets describes the sets of a family's table. IDs are set here, not by
// the library, so that a batch is fully determined by its input (they only
// need to be unique within one transaction, which writes both tables).
func newSets(f *family) setsOf {
	t := newTable(f)
	addr := f.addrType
	addrPair := nftables.MustConcatSetType(addr, addr)
	m := func(id uint32, name string, key nftables.SetDatatype) *nftables.Set {
		return &nftables.Set{
			Table: t, ID: f.setIDBase + id, Name: name, IsMap: true, KeyType: key, DataType: addr,
			Concatenation: key.Bytes > f.addrLen,
		}
	}
	return setsOf{
		fam:              f,
		eip2vpc:          m(1, MapEIP2VPC, addr),
		vpc2eip:          m(2, MapVPC2EIP, addr),
		eip2vpcQuoted:    m(3, MapEIP2VPCQuoted, addrPair),
		vpc2eipQuoted:    m(4, MapVPC2EIPQuoted, addrPair),
		eip2vpcUnlimited: m(12, MapEIP2VPCUnlimited, addr),
		cluster: &nftables.Set{
			Table: t, ID: f.setIDBase + 5, Name: SetClusterCIDRs, Interval: true, KeyType: addr,
		},
		icmpErrors: &nftables.Set{
			Table: t, ID: f.setIDBase + 6, Name: SetICMPErrors, Constant: true, KeyType: f.icmpType,
		},
		// Interface names are strings, host byte order to nft; without saying
		// so `nft list` prints the names reversed (as empty strings). The
		// kernel compares bytes either way.
		directIfaces: &nftables.Set{
			Table: t, ID: f.setIDBase + 7, Name: SetDirectIfaces, KeyType: nftables.TypeIFName,
			KeyByteOrder: binaryutil.NativeEndian,
		},
		directAllowed: &nftables.Set{
			Table: t, ID: f.setIDBase + 8, Name: SetDirectAllowed, Concatenation: true,
			KeyType: nftables.MustConcatSetType(nftables.TypeIFName, addr),
		},
		limitIn:        &nftables.Set{Table: t, ID: f.setIDBase + 9, Name: MapLimitIn, IsMap: true, KeyType: addr, DataType: nftables.TypeVerdict},
		limitOut:       &nftables.Set{Table: t, ID: f.setIDBase + 10, Name: MapLimitOut, IsMap: true, KeyType: addr, DataType: nftables.TypeVerdict},
		clusterEIP2VPC: m(11, MapClusterEIP2VPC, addr),
	}
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

	rs := &ruleset{
		table:        t,
		sets:         sets,
		chains:       []*nftables.Chain{pre, post, outside, dnat, dnatErr, snat, snatErr, inDNAT, inOutput, inHairpin},
		clusterElems: intervalElements(ranges(familyPrefixes(s.cidrs, f))),
		icmpElems:    icmpErrorElements(f),
	}
	add := func(c *nftables.Chain, rules ...[]expr.Any) {
		for _, e := range rules {
			rs.rules = append(rs.rules, &nftables.Rule{Table: t, Chain: c, Exprs: e})
		}
	}
	add(pre, preroutingRules(sets, s.iface, s.extIndex)...)
	add(outside, fromOutsideRules(sets)...)
	add(dnat, dnatRules(sets)...)
	add(post, postroutingRules(sets, s.iface)...)
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
// When the external interface's index is known, a first rule matches it by
// index (a 4-byte compare, where a name costs a 16-byte copy) and translates
// the common packet right there; the name-based rules after it handle
// everything else, also when the interface was recreated with another index
// since the last full sync.
func preroutingRules(s setsOf, iface string, extIndex uint32) [][]expr.Any {
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
		// ip daddr vmap @bw_in
		{f.loadDst(r0), lookupVerdict(s.limitIn, r0)},
		// ip daddr @eip2vpc goto eip_dnat
		{f.loadDst(r0), in(s.eip2vpc, r0), gotoChain(ChainDNAT)},
		// ip saddr @vpc2eip ip daddr != @cluster_cidrs notrack
		{f.loadSrc(r0), in(s.vpc2eip, r0), f.loadDst(r1), notIn(s.cluster, r1), &expr.Notrack{}},
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
// interface towards outside the cluster gets its ElasticIP as source.
func postroutingRules(s setsOf, iface string) [][]expr.Any {
	f := s.fam
	return [][]expr.Any{{
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: regName},
		&expr.Cmp{Op: expr.CmpOpEq, Register: regName, Data: ifname(iface)},
		f.loadSrc(f.reg(0)), in(s.vpc2eip, f.reg(0)),
		f.loadDst(f.reg(1)), notIn(s.cluster, f.reg(1)),
		gotoChain(ChainSNAT),
	}}
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

// isICMPError matches ICMP messages that quote a packet and applies verdict.
func isICMPError(s setsOf, verdict expr.Any) []expr.Any {
	return append(s.fam.isICMP(reg0), loadTH(0, 1, reg0), in(s.icmpErrors, reg0), verdict)
}

// quoteRules rewrite the quoted address of an ICMP error. The lookup key is
// "outer address . quoted address" (outerOff in the IP header, quoteOff from
// the ICMP header): the quoted packet must name the same address the error
// travels to (inbound) or from (outbound); otherwise no rule matches and the
// last rule drops it.
//
// Rewriting the quoted address with the quoted IP header checksum as csum
// field keeps the outer ICMP checksum valid: both changes are inside the ICMP
// message and cancel out. The quoted TCP/UDP checksum also covers the address
// (pseudo-header); Linux ignores it in a quote, but packet analysers do not,
// so it is fixed first: write new value with the L4 checksum as csum field,
// then write the old value back with the ICMP checksum as csum field (the
// only way to make the kernel compute the L4 delta), then the final rule
// writes the new value once more with the IP header checksum. Every write
// leaves the ICMP checksum valid.
func quoteRules(m *nftables.Set, outerOff, quoteOff uint32) [][]expr.Any {
	f := fam4
	key := func() []expr.Any {
		return []expr.Any{f.loadNH(outerOff, reg0), loadTH(quoteOff, 4, reg1), lookupMap(m, reg0, reg2)}
	}
	// A quote too short to hold the checksum field ends the rule at its first
	// write, which reads that field before it changes anything.
	l4fix := func(proto byte, csumOff uint32, nonZero bool) []expr.Any {
		e := []expr.Any{
			loadTH(offQuoteVerIHL, 1, reg3), eq(reg3, []byte{quoteVerIHLNoOpts}),
			loadTH(offQuoteProto, 1, reg3), eq(reg3, []byte{proto}),
			// Only a first fragment (or a whole datagram) has the L4 header.
			loadTH(offQuoteFrag, 2, reg3),
			&expr.Bitwise{SourceRegister: reg3, DestRegister: reg3, Len: 2, Mask: []byte{0x1f, 0xff}, Xor: []byte{0, 0}},
			eq(reg3, []byte{0, 0}),
		}
		if nonZero { // a zero UDP checksum means "none" and must stay zero
			e = append(e, loadTH(csumOff, 2, reg3), &expr.Cmp{Op: expr.CmpOpNeq, Register: reg3, Data: []byte{0, 0}})
		}
		e = append(e, key()...)
		return append(e,
			loadTH(quoteOff, 4, reg3),                  // old quoted address
			f.writeTH(quoteOff, reg2, csumOff),         // new, quoted L4 checksum follows
			f.writeTH(quoteOff, reg3, offICMPChecksum), // old again, ICMP checksum follows
		)
	}
	main := append(key(), f.writeTH(quoteOff, reg2, offQuoteChecksum), &expr.Verdict{Kind: expr.VerdictReturn})
	return [][]expr.Any{
		l4fix(unix.IPPROTO_UDP, offQuoteUDPCsum, true),
		l4fix(unix.IPPROTO_TCP, offQuoteTCPCsum, false),
		main,
		{&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop}},
	}
}

// quoteRules6 rewrite the quoted address of an ICMPv6 error, with the same
// key and drop as quoteRules. The quoted IPv6 header has no checksum to
// absorb the change, but the quoted TCP, UDP or ICMPv6 checksum covers the
// quoted addresses (pseudo-header) and lies inside the ICMPv6 message too:
// writing the address with that checksum as csum field fixes it and, the
// two changes cancelling in the sum, keeps the outer ICMPv6 checksum valid.
// A quote with another next header (an extension header, a fragment), too
// short to hold the field, or with a zero UDP checksum (invalid over IPv6)
// has the change folded into the outer ICMPv6 checksum instead.
func quoteRules6(m *nftables.Set, outerOff, quoteOff uint32) [][]expr.Any {
	f := fam6
	r0, r1, r2, r3 := f.reg(0), f.reg(1), f.reg(2), f.reg(3)
	key := []expr.Any{f.loadNH(outerOff, r0), loadTH(quoteOff, 16, r1), lookupMap(m, r0, r2)}
	rewrite := func(csumOff uint32) []expr.Any {
		return append(slices.Clone(key), f.writeTH(quoteOff, r2, csumOff), &expr.Verdict{Kind: expr.VerdictReturn})
	}
	l4fix := func(proto byte, csumOff uint32) []expr.Any {
		return append([]expr.Any{
			loadTH(offQuote6NextHdr, 1, r3), eq(r3, []byte{proto}),
			// Also proves the checksum field is inside the (possibly short) quote.
			loadTH(csumOff, 2, r3), &expr.Cmp{Op: expr.CmpOpNeq, Register: r3, Data: []byte{0, 0}},
		}, rewrite(csumOff)...)
	}
	return [][]expr.Any{
		l4fix(unix.IPPROTO_UDP, offQuote6UDPCsum),
		l4fix(unix.IPPROTO_TCP, offQuote6TCPCsum),
		l4fix(unix.IPPROTO_ICMPV6, offQuote6ICMPSum),
		rewrite(offICMPChecksum),
		{&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop}},
	}
}

func loadTH(off, length, reg uint32) *expr.Payload {
	return &expr.Payload{OperationType: expr.PayloadLoad, DestRegister: reg, Base: expr.PayloadBaseTransportHeader, Offset: off, Len: length}
}

func in(s *nftables.Set, reg uint32) *expr.Lookup {
	return &expr.Lookup{SourceRegister: reg, SetName: s.Name, SetID: s.ID}
}

func notIn(s *nftables.Set, reg uint32) *expr.Lookup {
	return &expr.Lookup{SourceRegister: reg, SetName: s.Name, SetID: s.ID, Invert: true}
}

func lookupMap(s *nftables.Set, sreg, dreg uint32) *expr.Lookup {
	return &expr.Lookup{SourceRegister: sreg, DestRegister: dreg, IsDestRegSet: true, SetName: s.Name, SetID: s.ID}
}

func eq(reg uint32, data []byte) *expr.Cmp {
	return &expr.Cmp{Op: expr.CmpOpEq, Register: reg, Data: data}
}

func gotoChain(name string) *expr.Verdict { return &expr.Verdict{Kind: expr.VerdictGoto, Chain: name} }
func jumpChain(name string) *expr.Verdict { return &expr.Verdict{Kind: expr.VerdictJump, Chain: name} }

// ifname pads an interface name to IFNAMSIZ, as the kernel compares it.
func ifname(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}
