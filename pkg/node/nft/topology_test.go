package nft

import (
	"context"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/loutres/juneau/pkg/node/sysctl"
	"github.com/loutres/juneau/test/netns"
	"github.com/loutres/juneau/test/require"
)

// Addresses of the test topology. They exist only inside the namespaces the
// tests create.
const (
	clientIP  = "10.225.51.100"
	nodeIP    = "10.225.51.2"
	routerIP  = "10.225.51.1"  // router, node side
	routerCIP = "10.225.51.97" // router, client side
	elasticIP = "10.225.51.5"
	podIP     = "10.244.1.5"
	podGW     = "10.244.1.1" // node's address on the Pod veth
	extIf     = "ext0"

	// IPv6 (topologyOptions.ipv6): the segment is 2001:db8:51::/64, or with
	// a router two /120s (node side ::0-::ff, client side ::100-::1ff); the
	// Pod's gateway is link-local.
	clientIP6  = "2001:db8:51::164"
	nodeIP6    = "2001:db8:51::2"
	routerIP6  = "2001:db8:51::1"
	routerCIP6 = "2001:db8:51::161"
	elasticIP6 = "2001:db8:51::5"
	podIP6     = "fd00:10:244:1::5"
	podGW6     = "fe80::1"
)

// topology is an external client, a node running the datapath, and a Pod
// behind the node; optionally a router with a small MTU between node and
// client.
//
//	client(eth0 .100) ── [router (.97 | .1)] ── (ext0 .2) node (vpod) ── (eth0 10.244.1.5) pod
type topology struct {
	client, node, pod, router *netns.NS
	prog                      *Programmer
	state                     DesiredState
}

type topologyOptions struct {
	// routerMTU, if set, puts a router between node and client whose
	// client-side link has this MTU.
	routerMTU int
	// masquerade installs what a primary CNI with ipMasq does in the node
	// (an nftables masquerade for Pod egress) and keeps conntrack active.
	masquerade bool
	// ipv6 makes everything dual-stack: IPv6 addresses beside the IPv4
	// ones, and a mapping elasticIP6 -> podIP6 beside the IPv4 one.
	ipv6 bool
}

func newTopology(t *testing.T, o topologyOptions) *topology {
	t.Helper()
	require.Root(t)
	tp := &topology{
		client: netns.New(t, "cli"),
		node:   netns.New(t, "node"),
		pod:    netns.New(t, "pod"),
	}
	if o.routerMTU > 0 {
		tp.router = netns.New(t, "rtr")
		netns.Veth(tp.node, extIf, tp.router, "rnode")
		netns.Veth(tp.router, "rcli", tp.client, "eth0")
		tp.node.Addr(extIf, nodeIP+"/28")
		tp.router.Addr("rnode", routerIP+"/28")
		tp.router.Addr("rcli", routerCIP+"/28")
		tp.client.Addr("eth0", clientIP+"/28")
		// Only the router's side is small: the client still advertises a
		// 1460-byte MSS, so the Pod's full-size segments hit the router.
		tp.router.SetMTU("rcli", o.routerMTU)
		tp.router.Sysctl("net/ipv4/ip_forward", "1")
		tp.client.Route("default", routerCIP, "")
		tp.node.Route("10.225.51.96/28", routerIP, "")
		// The router reaches the ElasticIP through the node (ARP is tested
		// on its own in pkg/node/arp).
		tp.router.Neigh("rnode", elasticIP, tp.node.MAC(extIf))
		for _, d := range []string{"rnode", "rcli"} {
			tp.router.DisableOffload(d)
		}
	} else {
		netns.Veth(tp.node, extIf, tp.client, "eth0")
		tp.node.Addr(extIf, nodeIP+"/24")
		tp.client.Addr("eth0", clientIP+"/24")
		tp.client.Neigh("eth0", elasticIP, tp.node.MAC(extIf))
	}
	netns.Veth(tp.node, "vpod", tp.pod, "eth0")
	tp.node.Addr("vpod", podGW+"/32")
	tp.node.Route(podIP+"/32", "", "vpod")
	tp.pod.Addr("eth0", podIP+"/32")
	tp.pod.Route(podGW+"/32", "", "eth0")
	tp.pod.Route("default", podGW, "eth0")
	if o.ipv6 {
		tp.addIPv6(o)
	}
	for _, d := range []string{extIf, "vpod"} {
		tp.node.DisableOffload(d)
	}
	tp.client.DisableOffload("eth0")
	tp.pod.DisableOffload("eth0")

	tp.node.MustDo(func() error { return sysctl.New().Apply(sysctl.ExternalInterface(extIf)) })
	if o.masquerade {
		tp.installMasquerade(t)
	}
	tp.prog = NewProgrammer(Options{NetNS: tp.node.FD()})
	tp.state = DesiredState{
		Config: Config{
			ExternalInterface: extIf,
			ClusterCIDRs: []netip.Prefix{
				netip.MustParsePrefix("10.244.0.0/16"),
				netip.MustParsePrefix("10.96.0.0/12"),
				netip.MustParsePrefix(nodeIP + "/32"),
			},
		},
		Mappings: []Mapping{{ElasticIP: netip.MustParseAddr(elasticIP), PodIP: netip.MustParseAddr(podIP)}},
	}
	if o.ipv6 {
		tp.state.ClusterCIDRs = append(tp.state.ClusterCIDRs,
			netip.MustParsePrefix("fd00:10:244::/48"), netip.MustParsePrefix("fd00:10:96::/112"), netip.MustParsePrefix(nodeIP6+"/128"))
		tp.state.Mappings = append(tp.state.Mappings, Mapping{ElasticIP: netip.MustParseAddr(elasticIP6), PodIP: netip.MustParseAddr(podIP6)})
	}
	return tp
}

// addIPv6 gives every namespace its IPv6 addresses and routes, the same
// shape as the IPv4 ones: the Pod routes through a link-local gateway held
// by the node's end of its veth.
func (tp *topology) addIPv6(o topologyOptions) {
	if tp.router != nil {
		tp.node.Addr(extIf, nodeIP6+"/120")
		tp.router.Addr("rnode", routerIP6+"/120")
		tp.router.Addr("rcli", routerCIP6+"/120")
		tp.client.Addr("eth0", clientIP6+"/120")
		tp.router.Sysctl("net/ipv6/conf/all/forwarding", "1")
		tp.client.Route("default", routerCIP6, "")
		tp.node.Route("2001:db8:51::100/120", routerIP6, "")
		tp.router.Neigh("rnode", elasticIP6, tp.node.MAC(extIf))
	} else {
		tp.node.Addr(extIf, nodeIP6+"/64")
		tp.client.Addr("eth0", clientIP6+"/64")
		tp.client.Neigh("eth0", elasticIP6, tp.node.MAC(extIf))
	}
	tp.node.Addr("vpod", podGW6+"/64")
	tp.node.Route(podIP6+"/128", "", "vpod")
	tp.pod.Addr("eth0", podIP6+"/128")
	tp.pod.Route("default", podGW6, "eth0")
}

// installMasquerade mimics the primary CNI (ptp/bridge ipMasq: true) in the
// node: Pod traffic to outside the Pod network is masqueraded to the node's
// address. It also makes conntrack track traffic in the node.
func (tp *topology) installMasquerade(t *testing.T) {
	t.Helper()
	require.Binary(t, "nft")
	rules := `table ip cnisim {
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		ip saddr 10.244.0.0/16 ip daddr != 10.244.0.0/16 counter masquerade
	}
	chain forward {
		type filter hook forward priority filter; policy accept;
		ct state invalid counter drop
	}
}
table ip6 cnisim {
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		ip6 saddr fd00:10:244::/48 ip6 daddr != fd00:10:244::/48 counter masquerade
	}
	chain forward {
		type filter hook forward priority filter; policy accept;
		ct state invalid counter drop
	}
}`
	tp.node.MustRun("nft", "-f", writeTemp(t, "cnisim.nft", rules))
}

func (tp *topology) sync(t *testing.T) {
	t.Helper()
	if err := tp.prog.Sync(context.Background(), tp.state); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

// conntrackEntries lists the node's conntrack table.
func (tp *topology) conntrackEntries(t *testing.T) string {
	t.Helper()
	out, err := tp.node.Output("conntrack", "-L")
	if err != nil {
		t.Fatalf("conntrack -L: %v\n%s", err, out)
	}
	return out
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := t.TempDir() + "/" + name
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func lines(s string) []string { return strings.Split(strings.TrimSpace(s), "\n") }
