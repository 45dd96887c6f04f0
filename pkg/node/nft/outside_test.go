package nft

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"

	"github.com/google/nftables/expr"
)

// TestOutsideDst: up to maxInlineRanges cluster ranges are tested by a range
// compare each, in the order of the set's elements; past that by the interval
// set; with none, by nothing (every address is outside). A single address is
// one compare. IPv6 ranges compare 16 bytes.
func TestOutsideDst(t *testing.T) {
	nodes := func(n int) []netip.Prefix {
		var out []netip.Prefix
		for i := range n {
			out = append(out, netip.MustParsePrefix(fmt.Sprintf("192.168.0.%d/32", 2*i+1))) // never adjacent
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		cidrs []netip.Prefix
		f     *family
		want  func(clusterRanges) []expr.Any
	}{
		{"none", nil, fam4, func(clusterRanges) []expr.Any { return nil }},
		{"two, merged where adjacent", prefixes("10.244.0.0/17", "10.244.128.0/17", "10.96.0.0/12"), fam4, func(clusterRanges) []expr.Any {
			return []expr.Any{fam4.loadDst(reg1),
				&expr.Range{Op: expr.CmpOpNeq, Register: reg1, FromData: []byte{10, 96, 0, 0}, ToData: []byte{10, 111, 255, 255}},
				&expr.Range{Op: expr.CmpOpNeq, Register: reg1, FromData: []byte{10, 244, 0, 0}, ToData: []byte{10, 244, 255, 255}}}
		}},
		{"IPv6", prefixes("fd00:10:244::/48"), fam6, func(clusterRanges) []expr.Any {
			last := netip.MustParseAddr("fd00:10:244:ffff:ffff:ffff:ffff:ffff").AsSlice()
			return []expr.Any{fam6.loadDst(fam6.reg(1)),
				&expr.Range{Op: expr.CmpOpNeq, Register: fam6.reg(1), FromData: netip.MustParseAddr("fd00:10:244::").AsSlice(), ToData: last}}
		}},
		{"as many as inlined", nodes(maxInlineRanges), fam4, func(c clusterRanges) []expr.Any {
			out := []expr.Any{fam4.loadDst(reg1)}
			for _, r := range c.ranges { // single addresses: one compare each
				out = append(out, &expr.Cmp{Op: expr.CmpOpNeq, Register: reg1, Data: r.first.AsSlice()})
			}
			return out
		}},
		{"one more: the set", nodes(maxInlineRanges + 1), fam4, func(c clusterRanges) []expr.Any {
			return []expr.Any{fam4.loadDst(reg1), notIn(c.set, reg1)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := normalize(DesiredState{Config: Config{ExternalInterface: "ext0", ClusterCIDRs: tc.cidrs}})
			if err != nil {
				t.Fatal(err)
			}
			c := clusterRanges{set: newSets(tc.f).cluster, ranges: ranges(familyPrefixes(s.cidrs, tc.f))}
			if got, want := c.outsideDst(tc.f, tc.f.reg(1)), tc.want(c); !reflect.DeepEqual(got, want) {
				t.Errorf("outsideDst = %v, want %v", got, want)
			}
		})
	}
}
