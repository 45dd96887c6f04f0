package nft

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/google/nftables"
)

// maxElementBytes bounds the encoded elements of one NEWSETELEM/DELSETELEM
// message. The element list is one netlink attribute whose length is 16 bits;
// past 64 KiB the kernel rejects the message with a misleading ENOENT.
const maxElementBytes = 56 << 10

// entry is one element of one map.
type entry struct {
	set      *nftables.Set
	key, val []byte
}

// entriesOf returns the elements one mapping puts in the NAT maps of its
// family's table: four, and a fifth in eip2vpc_unlimited when the ElasticIP
// has no bandwidth limit.
func entriesOf(fs familySets, m Mapping) []entry {
	s := fs.of(m.ElasticIP)
	eip, pod := addrBytes(m.ElasticIP), addrBytes(m.PodIP)
	out := []entry{
		{set: s.eip2vpc, key: eip, val: pod},
		{set: s.vpc2eip, key: pod, val: eip},
		{set: s.eip2vpcQuoted, key: concat(eip, eip), val: pod},
		{set: s.vpc2eipQuoted, key: concat(pod, pod), val: eip},
	}
	if !limited(m) {
		out = append(out, unlimitedEntry(s, m))
	}
	return out
}

// unlimitedEntry is the element of an ElasticIP without a bandwidth limit
// in eip2vpc_unlimited.
func unlimitedEntry(s setsOf, m Mapping) entry {
	return entry{set: s.eip2vpcUnlimited, key: addrBytes(m.ElasticIP), val: addrBytes(m.PodIP)}
}

// addrBytes is the address as the kernel keys it: 4 bytes for IPv4, 16 for
// IPv6.
func addrBytes(a netip.Addr) []byte { return a.AsSlice() }

func concat(a, b []byte) []byte { return append(slices.Clone(a), b...) }

// groupBySet collects the elements per map, with values left out when
// keysOnly (deletions need only the key).
func groupBySet(s familySets, mappings []Mapping, keysOnly bool) map[*nftables.Set][]nftables.SetElement {
	out := map[*nftables.Set][]nftables.SetElement{}
	for _, m := range mappings {
		for _, e := range entriesOf(s, m) {
			el := nftables.SetElement{Key: e.key}
			if !keysOnly {
				el.Val = e.val
			}
			out[e.set] = append(out[e.set], el)
		}
	}
	return out
}

// chunk splits elements so that each message stays under maxElementBytes.
func chunk(elems []nftables.SetElement) [][]nftables.SetElement {
	if len(elems) == 0 {
		return nil
	}
	per := max(1, maxElementBytes/encodedSize(elems[0]))
	var out [][]nftables.SetElement
	for len(elems) > per {
		out = append(out, elems[:per])
		elems = elems[per:]
	}
	return append(out, elems)
}

// encodedSize is the netlink size of one element: a nested attribute holding
// the key (and value) attributes, each a nested NFTA_DATA_VALUE.
func encodedSize(e nftables.SetElement) int {
	size := 4 + 8 + align4(len(e.Key))
	if len(e.Val) > 0 {
		size += 8 + align4(len(e.Val))
	}
	if e.IntervalEnd {
		size += 8
	}
	if v := e.VerdictData; v != nil { // nested data, nested verdict, code, chain name
		size += 4 + 4 + 8 + 4 + align4(len(v.Chain)+1)
	}
	return size
}

func align4(n int) int { return (n + 3) &^ 3 }

// intervalElements encodes address ranges for an interval set: each range is a
// start element and an end element one past its last address (flagged as
// interval end), except a range reaching the last address of its family
// (255.255.255.255, ffff:…:ffff), which stays open.
func intervalElements(rs []addrRange) []nftables.SetElement {
	var out []nftables.SetElement
	for _, r := range rs {
		out = append(out, nftables.SetElement{Key: addrBytes(r.first)})
		if next := r.last.Next(); next.IsValid() {
			out = append(out, nftables.SetElement{Key: addrBytes(next), IntervalEnd: true})
		}
	}
	return out
}

func icmpErrorElements(f *family) []nftables.SetElement {
	out := make([]nftables.SetElement, 0, len(f.errorTypes))
	for _, t := range f.errorTypes {
		out = append(out, nftables.SetElement{Key: []byte{t}})
	}
	return out
}

// directPairs turns address -> interface into pairs sorted by interface, then
// address.
func directPairs(ifaceOf map[netip.Addr]string) []DirectNIC {
	out := make([]DirectNIC, 0, len(ifaceOf))
	for a, i := range ifaceOf {
		out = append(out, DirectNIC{HostInterface: i, Address: a})
	}
	slices.SortFunc(out, compareDirect)
	return out
}

func compareDirect(a, b DirectNIC) int {
	return cmp.Or(cmp.Compare(a.HostInterface, b.HostInterface), a.Address.Compare(b.Address), cmp.Compare(a.BandwidthMbps, b.BandwidthMbps))
}

// addDirect adds the elements of the anti-spoofing sets to out: interface
// names padded to IFNAMSIZ in the table of each family they are filtered in,
// and "interface . address" keys, laid out as the rule loads them into
// consecutive registers.
func addDirect(out map[*nftables.Set][]nftables.SetElement, s familySets, ifaces []familyIface, pairs []DirectNIC) {
	for _, i := range ifaces {
		set := s[i.fam.index()].directIfaces
		out[set] = append(out[set], nftables.SetElement{Key: ifname(i.name)})
	}
	for _, p := range pairs {
		set := s.of(p.Address).directAllowed
		out[set] = append(out[set], nftables.SetElement{Key: concat(ifname(p.HostInterface), addrBytes(p.Address))})
	}
}

// familyIface is a host interface filtered in one family's table.
type familyIface struct {
	fam  *family
	name string
}

func compareFamilyIface(a, b familyIface) int {
	return cmp.Or(cmp.Compare(a.fam.index(), b.fam.index()), cmp.Compare(a.name, b.name))
}
