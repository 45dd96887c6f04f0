package nft

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

func testRuleset6(t *testing.T) *ruleset {
	t.Helper()
	s, err := normalize(DesiredState{
		Config:   Config{ExternalInterface: "ext0", ClusterCIDRs: prefixes("10.244.0.0/16", "fd00:10:244::/48")},
		Mappings: []Mapping{m("10.225.51.5", "10.244.1.5"), m("2001:db8::5", "fd00:10:244:1::5")},
	})
	if err != nil {
		t.Fatal(err)
	}
	return buildRuleset(s, fam6)
}

// TestRuleset6: the ip6 table has the chains of the ip one, its own cluster
// ranges, the ICMPv6 error types, and the IPv6 mapping's limit chains only.
func TestRuleset6(t *testing.T) {
	rs := testRuleset6(t)
	if rs.table.Family != nftables.TableFamilyIPv6 || rs.table.Name != TableName {
		t.Errorf("table = %+v", rs.table)
	}
	if len(rs.chains) != 10 || rs.sets.eip2vpc.KeyType != nftables.TypeIP6Addr || rs.sets.eip2vpc.DataType != nftables.TypeIP6Addr {
		t.Errorf("%d chains, eip2vpc %+v", len(rs.chains), rs.sets.eip2vpc)
	}
	if len(rs.clusterElems) != 2 || len(rs.clusterElems[0].Key) != 16 {
		t.Errorf("cluster ranges = %v, want fd00:10:244::/48 only", rs.clusterElems)
	}
	var types []byte
	for _, e := range rs.icmpElems {
		types = append(types, e.Key[0])
	}
	if !reflect.DeepEqual(types, []byte{1, 2, 3, 4}) {
		t.Errorf("ICMPv6 error types = %v", types)
	}
	for _, s := range rs.sets.all() {
		if s.ID <= fam6.setIDBase {
			t.Errorf("set %s has ID %d, not apart from the ip table's", s.Name, s.ID)
		}
	}
}

// TestDNAT6: Neighbor Discovery to an ElasticIP is dropped before anything
// else, and the rewrite saves and restores the flow label it names as the
// header checksum, so the kernel fixes the transport checksum.
func TestDNAT6(t *testing.T) {
	rs := testRuleset6(t)
	rules := rulesOf(rs, ChainDNAT)
	if len(rules) != 3 {
		t.Fatalf("%d dnat rules", len(rules))
	}
	ndp := rules[0]
	if c, ok := ndp[len(ndp)-1].(*expr.Verdict); !ok || c.Kind != expr.VerdictDrop ||
		!reflect.DeepEqual(ndp[3], &expr.Cmp{Op: expr.CmpOpGte, Register: reg0, Data: []byte{133}}) ||
		!reflect.DeepEqual(ndp[4], &expr.Cmp{Op: expr.CmpOpLte, Register: reg0, Data: []byte{137}}) {
		t.Errorf("NDP rule = %v", ndp)
	}
	write := rules[2][2:5]
	want := []expr.Any{
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: unix.NFT_REG32_12, Base: expr.PayloadBaseNetworkHeader, Offset: 2, Len: 2},
		&expr.Payload{OperationType: expr.PayloadWrite, SourceRegister: reg0, Base: expr.PayloadBaseNetworkHeader, Offset: 24, Len: 16,
			CsumType: expr.CsumTypeInet, CsumOffset: 2, CsumFlags: unix.NFT_PAYLOAD_L4CSUM_PSEUDOHDR},
		&expr.Payload{OperationType: expr.PayloadWrite, SourceRegister: unix.NFT_REG32_12, Base: expr.PayloadBaseNetworkHeader, Offset: 2, Len: 2},
	}
	if !reflect.DeepEqual(write, want) {
		t.Errorf("rewrite = %v\nwant %v", write, want)
	}
}

// TestQuoteRules6: the quoted address is written with the quoted UDP, TCP or
// ICMPv6 checksum as csum field when the quote holds one, else with the
// ICMPv6 checksum; the key is the outer and quoted address, 32 bytes from
// register 0; anything else is dropped.
func TestQuoteRules6(t *testing.T) {
	rs := testRuleset6(t)
	rules := rulesOf(rs, ChainDNATICMPError)
	if len(rules) != 5 {
		t.Fatalf("%d rules", len(rules))
	}
	for i, csum := range []uint32{8 + 40 + 6, 8 + 40 + 16, 8 + 40 + 2, 2} {
		r := rules[i]
		w, ok := r[len(r)-2].(*expr.Payload)
		if !ok || w.CsumOffset != csum || w.Offset != 8+8 || w.Len != 16 || w.SourceRegister != unix.NFT_REG32_08 {
			t.Errorf("rule %d writes %+v, want the quoted source with checksum at %d", i, r[len(r)-2], csum)
		}
		l := r[len(r)-3].(*expr.Lookup)
		if l.SourceRegister != reg0 || l.SetName != MapEIP2VPCQuoted {
			t.Errorf("rule %d looks up %+v", i, l)
		}
	}
	if v, ok := rules[4][1].(*expr.Verdict); !ok || v.Kind != expr.VerdictDrop {
		t.Errorf("last rule = %v", rules[4])
	}
}

// TestMixedFamilyMessage: a mapping across families is refused and the
// message says why; an IPv6 one beside it is kept.
func TestMixedFamilyMessage(t *testing.T) {
	s, err := normalize(DesiredState{Config: Config{ExternalInterface: "eth0"}, Mappings: []Mapping{
		m("2001:db8::5", "10.244.1.5"), m("2001:db8::6", "fd00::6"),
	}, InCluster: []Mapping{m("10.225.51.7", "fd00::7")}})
	if !errors.Is(err, ErrInvalidMapping) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{
		"2001:db8::5<->10.244.1.5: ElasticIP and Pod IP are of different families: an IPv6 ElasticIP is translated only to the Pod's IPv6 address (no NAT64)",
		"in-cluster mapping 10.225.51.7<->fd00::7: ElasticIP and Pod IP are of different families: an IPv4 ElasticIP",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if len(s.eip2vpc) != 1 || s.eip2vpc[addr("2001:db8::6")] != addr("fd00::6") {
		t.Errorf("kept %v", s.eip2vpc)
	}
}

// TestDirectFamilies: a direct NIC's interface is filtered in the tables of both
// families, whatever the families of its addresses (an IPv4-only NIC sends no IPv6
// from a source of its choosing, nor the reverse); a malformed address filters it in
// both too.
func TestDirectFamilies(t *testing.T) {
	s, _ := normalize(DesiredState{Config: Config{ExternalInterface: "eth0"}, Direct: []DirectNIC{
		dn("veth4", "10.225.51.6"), dn("veth6", "2001:db8::6"), dn("both", "10.225.51.7"), dn("both", "2001:db8::7"), dn("bad", "ff02::1"),
	}})
	ifaces, _ := s.direct()
	if got, want := namesIn(ifaces, fam4), []string{"bad", "both", "veth4", "veth6"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ip filters %v, want %v", got, want)
	}
	if got, want := namesIn(ifaces, fam6), []string{"bad", "both", "veth4", "veth6"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ip6 filters %v, want %v", got, want)
	}
}

// TestLimits6: each table holds the limit chains of its own family's
// ElasticIPs, the IPv6 rule comparing the 16-byte peer address.
func TestLimits6(t *testing.T) {
	a, b := m("10.225.51.5", "10.244.1.5"), m("2001:db8::5", "fd00::5")
	a.BandwidthMbps, b.BandwidthMbps = 5, 10
	s, err := normalize(DesiredState{Config: Config{ExternalInterface: "eth0"}, Mappings: []Mapping{a, b}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		f    *family
		name string
		off  uint32
	}{{fam4, "bw_in_10.225.51.5", 12}, {fam6, "bw_in_2001-db8--5", 8}} {
		rs := buildRuleset(s, tc.f)
		var limits []string
		for _, c := range rs.chains {
			if strings.HasPrefix(c.Name, "bw_") {
				limits = append(limits, c.Name)
			}
		}
		if len(limits) != 2 || limits[0] != tc.name {
			t.Errorf("%s table: limit chains %v, want %s and its outbound one", tc.f.name, limits, tc.name)
		}
		r := rulesOf(rs, tc.name)
		if p := r[0][0].(*expr.Payload); p.Offset != tc.off || p.Len != tc.f.addrLen {
			t.Errorf("%s: loads %+v", tc.name, p)
		}
	}
}
