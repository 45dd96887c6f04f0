package nft

import (
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// maxInlineRanges is the most cluster ranges a rule tests with compares of
// its own instead of a lookup in cluster_cidrs.
const maxInlineRanges = 8

// clusterRanges are a family's cluster ranges and the interval set that holds
// them.
type clusterRanges struct {
	set    *nftables.Set
	ranges []addrRange
}

// outsideDst is `ip daddr != @cluster_cidrs` (the destination loaded into reg) for
// the rules a translated Pod's every packet to the outside meets: one in prerouting,
// the two of postrouting. An interval set lookup is a binary search calling a compare
// function per step, the costliest test on that path (docs/performance.md, "What each
// of 3s's lookups costs"); a cluster with few ranges (a Pod CIDR, a Service CIDR, a few
// Nodes' addresses) is tested by a compare per range instead: `ip daddr !=
// 10.244.0.0-10.244.255.255` (two memcmp), `ip daddr != 10.225.51.2` for a single
// address. A cluster without ranges needs no test: every address is outside it. Past
// maxInlineRanges the set answers, as it always does in the in-cluster and limit
// rules. The ranges are part of the configuration: a change rebuilds the rules
// (sameConfig).
func (c clusterRanges) outsideDst(f *family, reg uint32) []expr.Any {
	if len(c.ranges) > maxInlineRanges {
		return []expr.Any{f.loadDst(reg), notIn(c.set, reg)}
	}
	if len(c.ranges) == 0 {
		return nil
	}
	out := []expr.Any{f.loadDst(reg)}
	for _, r := range c.ranges {
		if r.first == r.last {
			// A Node's address: `ip daddr != 10.225.51.2`.
			out = append(out, &expr.Cmp{Op: expr.CmpOpNeq, Register: reg, Data: addrBytes(r.first)})
			continue
		}
		out = append(out, &expr.Range{Op: expr.CmpOpNeq, Register: reg, FromData: addrBytes(r.first), ToData: addrBytes(r.last)})
	}
	return out
}
