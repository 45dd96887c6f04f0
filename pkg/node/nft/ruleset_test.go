package nft

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

func testRuleset(t *testing.T) *ruleset {
	t.Helper()
	s, err := normalize(DesiredState{
		Config:   Config{ExternalInterface: "ext0", ClusterCIDRs: prefixes("10.244.0.0/16", "10.96.0.0/12")},
		Mappings: []Mapping{m("10.225.51.5", "10.244.1.5")},
	})
	if err != nil {
		t.Fatal(err)
	}
	return buildRuleset(s, fam4)
}

func rulesOf(rs *ruleset, chain string) [][]expr.Any {
	var out [][]expr.Any
	for _, r := range rs.rules {
		if r.Chain.Name == chain {
			out = append(out, r.Exprs)
		}
	}
	return out
}

func TestBuildRulesetDeterministic(t *testing.T) {
	if a, b := testRuleset(t), testRuleset(t); !reflect.DeepEqual(a, b) {
		t.Error("the same state built two different rulesets")
	}
}

func TestBaseChains(t *testing.T) {
	rs := testRuleset(t)
	if rs.table.Name != TableName || rs.table.Family != nftables.TableFamilyIPv4 {
		t.Errorf("table = %+v", rs.table)
	}
	base := map[string]struct {
		hook nftables.ChainHook
		prio nftables.ChainPriority
		typ  nftables.ChainType
	}{
		ChainPrerouting:  {*nftables.ChainHookPrerouting, -300, nftables.ChainTypeFilter},
		ChainPostrouting: {*nftables.ChainHookPostrouting, 110, nftables.ChainTypeFilter},
		// In-cluster clients: conntrack NAT at dstnat, and the hairpin SNAT
		// after the masquerades at srcnat.
		ChainInClusterDNAT:    {*nftables.ChainHookPrerouting, -100, nftables.ChainTypeNAT},
		ChainInClusterOutput:  {*nftables.ChainHookOutput, -100, nftables.ChainTypeNAT},
		ChainInClusterHairpin: {*nftables.ChainHookPostrouting, 105, nftables.ChainTypeNAT},
	}
	for _, c := range rs.chains {
		want, isBase := base[c.Name]
		switch {
		case isBase && (c.Hooknum == nil || *c.Hooknum != want.hook || *c.Priority != want.prio || c.Type != want.typ || *c.Policy != nftables.ChainPolicyAccept):
			t.Errorf("base chain %s: %+v", c.Name, c)
		case !isBase && c.Hooknum != nil:
			t.Errorf("regular chain %s has a hook", c.Name)
		}
		delete(base, c.Name)
	}
	if len(base) != 0 {
		t.Errorf("missing base chains %v", base)
	}
}

func TestPreroutingRules(t *testing.T) {
	rs := testRuleset(t)
	s := rs.sets
	ext0 := append([]byte("ext0"), make([]byte, 12)...)
	want := [][]expr.Any{
		// The external interface first: what comes from outside needs
		// neither anti-spoofing nor outbound limits.
		{&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: unix.NFT_REG_1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: unix.NFT_REG_1, Data: ext0},
			&expr.Verdict{Kind: expr.VerdictGoto, Chain: ChainFromOutside}},
		// NFT_REG_1 and NFT_REG32_04: the name fills four 32-bit registers,
		// the source address follows it, together the 20-byte key.
		{&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: unix.NFT_REG_1},
			&expr.Lookup{SourceRegister: unix.NFT_REG_1, SetName: SetDirectIfaces, SetID: s.directIfaces.ID},
			&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: unix.NFT_REG32_04, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
			&expr.Lookup{SourceRegister: unix.NFT_REG_1, SetName: SetDirectAllowed, SetID: s.directAllowed.ID, Invert: true},
			&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop}},
		// In-cluster clients: from a cluster address to any ElasticIP of the
		// cluster, left to conntrack (and never limited).
		{fam4.loadNH(16, reg0), &expr.Lookup{SourceRegister: reg0, SetName: MapClusterEIP2VPC, SetID: s.clusterEIP2VPC.ID},
			fam4.loadNH(12, reg1), &expr.Lookup{SourceRegister: reg1, SetName: SetClusterCIDRs, SetID: s.cluster.ID},
			&expr.Verdict{Kind: expr.VerdictAccept}},
		// Limits see the addresses before any translation; a miss continues.
		{fam4.loadNH(12, reg0), &expr.Lookup{SourceRegister: reg0, DestRegister: unix.NFT_REG_VERDICT, IsDestRegSet: true, SetName: MapLimitOut, SetID: s.limitOut.ID}},
		// A translated Pod's traffic to outside: untracked and accepted, past
		// the rules that concern traffic to an ElasticIP.
		// The cluster's two ranges tested by compares, not the interval set.
		{fam4.loadNH(12, reg0), &expr.Lookup{SourceRegister: reg0, SetName: MapVPC2EIP, SetID: s.vpc2eip.ID},
			fam4.loadNH(16, reg1),
			&expr.Range{Op: expr.CmpOpNeq, Register: reg1, FromData: []byte{10, 96, 0, 0}, ToData: []byte{10, 111, 255, 255}},
			&expr.Range{Op: expr.CmpOpNeq, Register: reg1, FromData: []byte{10, 244, 0, 0}, ToData: []byte{10, 244, 255, 255}},
			&expr.Notrack{}, &expr.Verdict{Kind: expr.VerdictAccept}},
		{fam4.loadNH(16, reg0), &expr.Lookup{SourceRegister: reg0, DestRegister: unix.NFT_REG_VERDICT, IsDestRegSet: true, SetName: MapLimitIn, SetID: s.limitIn.ID}},
		{fam4.loadNH(16, reg0), &expr.Lookup{SourceRegister: reg0, SetName: MapEIP2VPC, SetID: s.eip2vpc.ID},
			&expr.Verdict{Kind: expr.VerdictGoto, Chain: ChainDNAT}},
	}
	if got := rulesOf(rs, ChainPrerouting); !reflect.DeepEqual(got, want) {
		t.Errorf("prerouting rules:\n got %#v\nwant %#v", got, want)
	}
}

// TestFastPathByIndex: with the external interface's index known, the
// first prerouting rule translates the common packet from that interface by
// index, and the first postrouting rule the common packet leaving through
// it: `oif 7 meta l4proto != icmp ip daddr != 10.96.0.0-10.111.255.255 ip
// daddr != 10.244.0.0-10.244.255.255 ip saddr set ip saddr map @vpc2eip
// accept`. The name-based rules follow unchanged.
func TestFastPathByIndex(t *testing.T) {
	s, err := normalize(DesiredState{
		Config:   Config{ExternalInterface: "ext0", ClusterCIDRs: prefixes("10.244.0.0/16", "10.96.0.0/12")},
		Mappings: []Mapping{m("10.225.51.5", "10.244.1.5")},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.extIndex = 7
	rs := buildRuleset(s, fam4)
	rules := rulesOf(rs, ChainPrerouting)
	want := append([]expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIF, Register: reg0},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg0, Data: binaryutil.NativeEndian.PutUint32(7)},
	}, rulesOf(rs, ChainFromOutside)[0]...)
	if len(rules) != 8 || !reflect.DeepEqual(rules[0], want) {
		t.Errorf("first prerouting rule %#v, want %#v", rules[0], want)
	}
	if !reflect.DeepEqual(rules[1:], rulesOf(testRuleset(t), ChainPrerouting)) {
		t.Error("the rules after the fast path differ from those without it")
	}
	post := rulesOf(rs, ChainPostrouting)
	wantPost := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyOIF, Register: reg0},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg0, Data: binaryutil.NativeEndian.PutUint32(7)},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg0},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: reg0, Data: []byte{unix.IPPROTO_ICMP}},
		fam4.loadNH(16, reg1),
		&expr.Range{Op: expr.CmpOpNeq, Register: reg1, FromData: []byte{10, 96, 0, 0}, ToData: []byte{10, 111, 255, 255}},
		&expr.Range{Op: expr.CmpOpNeq, Register: reg1, FromData: []byte{10, 244, 0, 0}, ToData: []byte{10, 244, 255, 255}},
		fam4.loadNH(12, reg0),
		&expr.Lookup{SourceRegister: reg0, DestRegister: reg0, IsDestRegSet: true, SetName: MapVPC2EIP, SetID: rs.sets.vpc2eip.ID},
		fam4.writeNH(12, reg0, reg3)[0], &expr.Verdict{Kind: expr.VerdictAccept},
	}
	if len(post) != 2 || !reflect.DeepEqual(post[0], wantPost) {
		t.Errorf("first postrouting rule %#v, want %#v", post[0], wantPost)
	}
	if !reflect.DeepEqual(post[1:], rulesOf(testRuleset(t), ChainPostrouting)) {
		t.Error("the postrouting rule after the fast path differs from the one without it")
	}
}

// TestFromOutsideRules: a packet from outside to an unlimited ElasticIP,
// not ICMP, meets one lookup (in the map of the unlimited ElasticIPs; the
// Pod IP lands in NFT_REG32_00), the rewrite, notrack and accept: the
// expressions nft generates for `meta l4proto != icmp ip daddr set ip daddr
// map @eip2vpc_unlimited notrack accept`. The others go through the inbound
// limits and the full translation.
func TestFromOutsideRules(t *testing.T) {
	rs := testRuleset(t)
	s := rs.sets
	want := [][]expr.Any{
		{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg0},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: reg0, Data: []byte{unix.IPPROTO_ICMP}},
			fam4.loadNH(16, reg0),
			&expr.Lookup{SourceRegister: reg0, DestRegister: reg0, IsDestRegSet: true, SetName: MapEIP2VPCUnlimited, SetID: s.eip2vpcUnlimited.ID},
			fam4.writeNH(16, reg0, reg3)[0], &expr.Notrack{}, &expr.Verdict{Kind: expr.VerdictAccept}},
		{fam4.loadNH(16, reg0), &expr.Lookup{SourceRegister: reg0, DestRegister: unix.NFT_REG_VERDICT, IsDestRegSet: true, SetName: MapLimitIn, SetID: s.limitIn.ID}},
		{fam4.loadNH(16, reg0), &expr.Lookup{SourceRegister: reg0, SetName: MapEIP2VPC, SetID: s.eip2vpc.ID},
			&expr.Verdict{Kind: expr.VerdictGoto, Chain: ChainDNAT}},
	}
	if got := rulesOf(rs, ChainFromOutside); !reflect.DeepEqual(got, want) {
		t.Errorf("from_outside rules:\n got %#v\nwant %#v", got, want)
	}
}

// TestAddressRewrites checks the two address writes: 4 bytes at the right
// offset, IP header checksum at 10, and the TCP/UDP pseudo-header flag.
func TestAddressRewrites(t *testing.T) {
	rs := testRuleset(t)
	for chain, off := range map[string]uint32{ChainDNAT: 16, ChainSNAT: 12} {
		rules := rulesOf(rs, chain)
		last := rules[len(rules)-1]
		var w *expr.Payload
		for _, e := range last {
			if p, ok := e.(*expr.Payload); ok && p.OperationType == expr.PayloadWrite {
				w = p
			}
		}
		want := &expr.Payload{
			OperationType: expr.PayloadWrite, SourceRegister: reg0, Base: expr.PayloadBaseNetworkHeader,
			Offset: off, Len: 4, CsumType: expr.CsumTypeInet, CsumOffset: 10, CsumFlags: unix.NFT_PAYLOAD_L4CSUM_PSEUDOHDR,
		}
		if !reflect.DeepEqual(w, want) {
			t.Errorf("%s write = %+v, want %+v", chain, w, want)
		}
		if chain == ChainDNAT {
			if _, ok := last[len(last)-1].(*expr.Notrack); !ok {
				t.Error("DNAT rule does not end with notrack")
			}
		}
		// ICMP errors are handled before the address rewrite.
		if v, ok := rules[0][len(rules[0])-1].(*expr.Verdict); !ok || v.Kind != expr.VerdictJump {
			t.Errorf("%s: first rule does not jump to the ICMP error chain", chain)
		}
	}
}

func TestPostroutingMatchesInterface(t *testing.T) {
	rules := rulesOf(testRuleset(t), ChainPostrouting)
	if len(rules) != 1 {
		t.Fatalf("postrouting has %d rules", len(rules))
	}
	cmp, ok := rules[0][1].(*expr.Cmp)
	if !ok || !bytes.Equal(cmp.Data, append([]byte("ext0"), make([]byte, 12)...)) {
		t.Errorf("interface match = %#v", rules[0][1])
	}
	if v := rules[0][len(rules[0])-1].(*expr.Verdict); v.Kind != expr.VerdictGoto || v.Chain != ChainSNAT {
		t.Errorf("postrouting verdict = %+v", v)
	}
}

// TestQuoteRules checks the ICMP error chains: the lookup key is outer
// address . quoted address, the quoted address is rewritten with the quoted
// IP checksum (+18), L4 fixes use UDP +34 / TCP +44 then the ICMP checksum
// (+2), and whatever does not match is counted and dropped.
func TestQuoteRules(t *testing.T) {
	rs := testRuleset(t)
	for chain, c := range map[string]struct {
		outer, quote uint32
		m            *nftables.Set
	}{
		ChainDNATICMPError: {16, 20, rs.sets.eip2vpcQuoted},
		ChainSNATICMPError: {12, 24, rs.sets.vpc2eipQuoted},
	} {
		rules := rulesOf(rs, chain)
		if len(rules) != 4 {
			t.Fatalf("%s: %d rules", chain, len(rules))
		}
		var csums [][]uint32
		for i, r := range rules[:3] {
			var writes []uint32
			for j, e := range r {
				if l, ok := e.(*expr.Lookup); ok && l.IsDestRegSet {
					if l.SetName != c.m.Name || l.SourceRegister != reg0 ||
						!reflect.DeepEqual(r[j-2], fam4.loadNH(c.outer, reg0)) || !reflect.DeepEqual(r[j-1], loadTH(c.quote, 4, reg1)) {
						t.Errorf("%s rule %d: lookup key is not outer . quoted address: %#v", chain, i, r[j-2:j+1])
					}
				}
				if p, ok := e.(*expr.Payload); ok && p.OperationType == expr.PayloadWrite {
					if p.Offset != c.quote || p.Base != expr.PayloadBaseTransportHeader || p.CsumFlags != 0 {
						t.Errorf("%s rule %d writes %+v", chain, i, p)
					}
					writes = append(writes, p.CsumOffset)
				}
			}
			csums = append(csums, writes)
		}
		if want := [][]uint32{{34, 2}, {44, 2}, {18}}; !reflect.DeepEqual(csums, want) {
			t.Errorf("%s checksum offsets = %v, want %v", chain, csums, want)
		}
		last := rules[3]
		if _, ok := last[0].(*expr.Counter); !ok || last[1].(*expr.Verdict).Kind != expr.VerdictDrop {
			t.Errorf("%s does not end with counter drop: %#v", chain, last)
		}
	}
}

func TestSets(t *testing.T) {
	rs := testRuleset(t)
	ids := map[uint32]bool{}
	for _, s := range rs.sets.all() {
		if ids[s.ID] || s.ID == 0 {
			t.Errorf("set %s has ID %d, not unique", s.Name, s.ID)
		}
		ids[s.ID] = true
	}
	for _, s := range append(rs.sets.maps(), rs.sets.clusterEIP2VPC) {
		if !s.IsMap || s.DataType != nftables.TypeIPAddr {
			t.Errorf("%s is not an address map", s.Name)
		}
	}
	if rs.sets.eip2vpcQuoted.KeyType.Bytes != 8 || !rs.sets.eip2vpcQuoted.Concatenation {
		t.Error("quoted maps must be keyed by two addresses")
	}
	if k := rs.sets.directIfaces.KeyType; k.Name != "ifname" || k.Bytes != 16 || rs.sets.directIfaces.IsMap {
		t.Errorf("direct interface set keyed by %+v", k)
	}
	if rs.sets.directIfaces.KeyByteOrder != binaryutil.NativeEndian {
		t.Error("interface names must be declared host byte order, or nft lists them as empty strings")
	}
	if k := rs.sets.directAllowed.KeyType; k.Name != "ifname . ipv4_addr" || k.Bytes != 20 || !rs.sets.directAllowed.Concatenation {
		t.Errorf("direct pair set keyed by %+v (concatenation %v)", k, rs.sets.directAllowed.Concatenation)
	}
	if !rs.sets.cluster.Interval {
		t.Error("cluster set must be an interval set")
	}
	if len(rs.clusterElems) != 4 || len(rs.icmpElems) != 5 {
		t.Errorf("constant elements: cluster %d, icmp %d", len(rs.clusterElems), len(rs.icmpElems))
	}
}
