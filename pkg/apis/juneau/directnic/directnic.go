// Package directnic owns the routing of a direct NIC inside its Pod
// (docs/reference.md#direct-nics), in both families: the gateway, the default route, and
// for an extra NIC the table and the rule that selects it. The NetworkInterface controller
// publishes it in the NIC's status and the CNI plugin plumbs it, both through this
// package, so the two never disagree.
package directnic

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"net/netip"
	"slices"

	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// Gateway is the on-link gateway of a NIC carrying addr: 169.254.0.1 for IPv4, the
// link-local fe80::1 for IPv6; the node's end of the NIC's veth holds it.
func Gateway(addr netip.Addr) netip.Addr {
	if addr.Unmap().Is4() {
		return netip.MustParseAddr(v1alpha1.DirectGateway)
	}
	return netip.MustParseAddr(v1alpha1.DirectGateway6)
}

// RouteTable is the routing table of an extra direct NIC carrying addr. An IPv4
// address read as a big-endian uint32 is unique, so two NICs never share a table. An
// IPv6 address does not fit: it is hashed (FNV-1a) into 2^31 to 2^32-1, clear of the
// kernel's reserved tables; RouteTables settles the rare collision within a Pod. The
// kernel keeps IPv4 and IPv6 tables apart, so the two families never collide, and
// tables live in the Pod's network namespace, so Pods never share them.
func RouteTable(addr netip.Addr) int64 {
	addr = addr.Unmap()
	if addr.Is4() {
		b := addr.As4()
		return int64(binary.BigEndian.Uint32(b[:]))
	}
	h := fnv.New32a()
	b := addr.As16()
	h.Write(b[:])
	return int64(h.Sum32() | 1<<31)
}

// RouteTables gives each extra direct NIC address of one Pod its table: RouteTable,
// except that an IPv6 address whose table a lower address of the Pod already took gets
// the next free number of the same range. The result depends only on the set.
func RouteTables(addrs []netip.Addr) map[netip.Addr]int64 {
	sorted := slices.Clone(addrs)
	slices.SortFunc(sorted, netip.Addr.Compare)
	out := make(map[netip.Addr]int64, len(sorted))
	taken := map[int64]bool{}
	for _, a := range slices.Compact(sorted) {
		t := RouteTable(a)
		for !a.Unmap().Is4() && taken[t] {
			t++
			if t > math.MaxUint32 {
				t = 1 << 31
			}
		}
		taken[t] = !a.Unmap().Is4()
		out[a] = t
	}
	return out
}

// Routing is what a direct NIC carrying addr gets inside the Pod: the primary
// interface gets `default via 169.254.0.1 onlink` (IPv6: `default via fe80::1`) in
// the main table; an extra NIC gets that route in table and a rule `from <addr> lookup
// table priority 100`.
func Routing(primary bool, addr netip.Addr, table int64) ([]v1alpha1.Route, []v1alpha1.RoutingRule) {
	addr = addr.Unmap()
	route := v1alpha1.Route{Destination: "0.0.0.0/0", Gateway: v1alpha1.DirectGateway, OnLink: true}
	if addr.Is6() {
		// A link-local gateway is on the link by definition.
		route = v1alpha1.Route{Destination: "::/0", Gateway: v1alpha1.DirectGateway6}
	}
	if primary {
		return []v1alpha1.Route{route}, nil
	}
	route.Table = table
	rule := v1alpha1.RoutingRule{
		From:     iprange.HostPrefix(addr).String(),
		Table:    table,
		Priority: v1alpha1.DirectRulePriority,
	}
	return []v1alpha1.Route{route}, []v1alpha1.RoutingRule{rule}
}
