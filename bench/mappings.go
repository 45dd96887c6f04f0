package main

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
	"github.com/loutres/juneau/pkg/node/nft"
)

// Addresses of the datapath benchmarks. They exist only inside the namespaces the
// benchmarks create: the external segment 10.225.51.0/24 and the Pod range.
var (
	clientIP  = netip.MustParseAddr("10.225.51.100")
	nodeIP    = netip.MustParseAddr("10.225.51.2")
	elasticIP = netip.MustParseAddr("10.225.51.5")
	podIP     = netip.MustParseAddr("10.244.1.5")
	podGW     = netip.MustParseAddr("10.244.1.1")
	// clientPodIP is an in-cluster client, a Pod beside podIP on the same node.
	clientPodIP = netip.MustParseAddr("10.244.1.6")

	// IPv6: the segment 2001:db8:51::/64, the Pod range fd00:10:244::/48, the Pod's
	// gateway link-local.
	clientIP6  = netip.MustParseAddr("2001:db8:51::100")
	nodeIP6    = netip.MustParseAddr("2001:db8:51::2")
	elasticIP6 = netip.MustParseAddr("2001:db8:51::5")
	podIP6     = netip.MustParseAddr("fd00:10:244:1::5")
	podGW6     = netip.MustParseAddr("fe80::1")
)

const extIf = "ext0"

// clusterCIDRs are what juneau never translates, as the node agent computes them.
var clusterCIDRs = []netip.Prefix{
	netip.MustParsePrefix("10.244.0.0/16"),
	netip.MustParsePrefix("10.96.0.0/12"),
	netip.PrefixFrom(nodeIP, 32),
	netip.MustParsePrefix("fd00:10:244::/48"),
	netip.PrefixFrom(nodeIP6, 128),
}

// benchMappings returns n mappings. The one traffic uses (elasticIP ↔ podIP) sits in the
// middle, so a linear rule list (iptables) meets it after n/2 others on average, as a
// random flow would; the others carry no traffic: their ElasticIPs (10.225.52.0 on) are
// never routed anywhere and their Pod IPs (10.244.100.0 on) exist nowhere.
func benchMappings(n int) []nft.Mapping {
	out := make([]nft.Mapping, 0, n)
	for i := range n - 1 {
		if len(out) == n/2 {
			out = append(out, nft.Mapping{ElasticIP: elasticIP, PodIP: podIP})
		}
		out = append(out, nft.Mapping{
			ElasticIP: netip.AddrFrom4([4]byte{10, 225, byte(52 + i/256), byte(i)}),
			PodIP:     netip.AddrFrom4([4]byte{10, 244, byte(100 + i/256), byte(i)}),
		})
	}
	if len(out) < n {
		out = append(out, nft.Mapping{ElasticIP: elasticIP, PodIP: podIP})
	}
	return out
}

// scaledMappings returns n mappings for the sizes benchMappings cannot number (up to
// 2^20): ElasticIPs from 10.230.0.1 on and Pod IPs from 10.236.0.1 on, carrying no
// traffic; neither range exists anywhere.
func scaledMappings(n int) []nft.Mapping {
	return mappingsFrom(netip.MustParseAddr("10.230.0.0"), netip.MustParseAddr("10.236.0.0"), n)
}

// scaledMappings6 returns n IPv6 mappings, ElasticIPs from 2001:db8:52::1 and Pod IPs
// from fd00:10:244:100::1 on.
func scaledMappings6(n int) []nft.Mapping {
	return mappingsFrom(netip.MustParseAddr("2001:db8:52::"), netip.MustParseAddr("fd00:10:244:100::"), n)
}

// mappingsFrom returns n mappings, the i-th from the i-th address after eips to the
// i-th after pods.
func mappingsFrom(eips, pods netip.Addr, n int) []nft.Mapping {
	out := make([]nft.Mapping, n)
	for i := range out {
		eip, _ := iprange.Add(eips, uint64(i+1))
		pod, _ := iprange.Add(pods, uint64(i+1))
		out[i] = nft.Mapping{ElasticIP: eip, PodIP: pod}
	}
	return out
}

// benchMappings6 returns n IPv6 mappings, elasticIP6 ↔ podIP6 in the middle, the others
// (2001:db8:52::/64, fd00:10:244:100::/64) carrying no traffic.
func benchMappings6(n int) []nft.Mapping {
	out := make([]nft.Mapping, 0, n)
	for i := range n - 1 {
		if len(out) == n/2 {
			out = append(out, nft.Mapping{ElasticIP: elasticIP6, PodIP: podIP6})
		}
		e := [16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0x52, 14: byte(i >> 8), 15: byte(i)}
		p := [16]byte{0xfd, 0, 0, 0x10, 0x02, 0x44, 0x01, 0, 14: byte(i >> 8), 15: byte(i)}
		out = append(out, nft.Mapping{ElasticIP: netip.AddrFrom16(e), PodIP: netip.AddrFrom16(p)})
	}
	if len(out) < n {
		out = append(out, nft.Mapping{ElasticIP: elasticIP6, PodIP: podIP6})
	}
	return out
}

func natState(mappings []nft.Mapping) nft.DesiredState {
	return nft.DesiredState{
		Config:   nft.Config{ExternalInterface: extIf, ClusterCIDRs: clusterCIDRs},
		Mappings: mappings,
	}
}

// iptablesRestore is the iptables-restore input that does what juneau does for the
// mappings the conventional way: a DNAT rule per ElasticIP and an SNAT rule per Pod,
// with connection tracking. The nat table is replaced as a whole.
func iptablesRestore(mappings []nft.Mapping) string {
	var b strings.Builder
	b.WriteString("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n")
	for _, m := range mappings {
		fmt.Fprintf(&b, "-A PREROUTING %s\n", dnatRule(m))
	}
	for _, m := range mappings {
		fmt.Fprintf(&b, "-A POSTROUTING %s\n", snatRule(m))
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// iptablesChange is the iptables-restore --noflush input that moves the mapping at
// index i to a new Pod IP: both of its rules replaced in one transaction.
func iptablesChange(mappings []nft.Mapping, i int, newPod netip.Addr) string {
	m := nft.Mapping{ElasticIP: mappings[i].ElasticIP, PodIP: newPod}
	return fmt.Sprintf("*nat\n-R PREROUTING %d %s\n-R POSTROUTING %d %s\nCOMMIT\n", i+1, dnatRule(m), i+1, snatRule(m))
}

func dnatRule(m nft.Mapping) string {
	return fmt.Sprintf("-d %s/32 -j DNAT --to-destination %s", m.ElasticIP, m.PodIP)
}

func snatRule(m nft.Mapping) string {
	return fmt.Sprintf("-s %s/32 -o %s -j SNAT --to-source %s", m.PodIP, extIf, m.ElasticIP)
}

// emptyNAT is iptables-restore input leaving the nat table without rules.
const emptyNAT = "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n"
