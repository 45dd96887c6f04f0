package cnitest

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/loutres/juneau/pkg/apis/juneau/directnic"
	"github.com/loutres/juneau/pkg/node/cniserver"
	"github.com/loutres/juneau/test/netns"
)

// IPv6 of the dual-stack topology: Pods get fd00:10:244:1::/64 from host-local beside
// their IPv4 address; the client link is 2001:db8:51::/64.
const (
	podSubnet6   = "fd00:10:244:1::/64"
	nodeExtAddr6 = "2001:db8:51::2"
	clientAddr6  = "2001:db8:51::100"
	eipWeb6      = "2001:db8:51::6"
	eipGateway6  = "2001:db8:51::7"
)

// holding6 is a direct NIC that holds an IPv6 ElasticIP.
func holding6(iface, eip string) cniserver.Interface {
	return cniserver.Interface{Interface: iface, ElasticIP: iface + "-eip", Holds: true, Address: eip + "/128"}
}

// withClient6 adds the external client with IPv6 on its link; it reaches the
// ElasticIPs through the Node.
func (f *fixture) withClient6(eips ...string) {
	f.t.Helper()
	f.withClient()
	f.node.Addr("ext", nodeExtAddr6+"/64")
	f.client.Addr("c0", clientAddr6+"/64")
	for _, eip := range eips {
		f.client.Route(eip+"/128", nodeExtAddr6, "c0")
	}
}

func addrs6(t *testing.T, ns *netns.NS, dev string) []netip.Prefix {
	t.Helper()
	return addrsOf(t, ns, dev, unix.AF_INET6)
}

func routes6(t *testing.T, ns *netns.NS, dev string, table int) []netlink.Route {
	t.Helper()
	return routesOf(t, ns, dev, table, unix.AF_INET6)
}

func isDefaultVia6(r netlink.Route) bool {
	return (r.Dst == nil || r.Dst.String() == "::/0") && r.Gw.String() == "fe80::1"
}

// TestDualStackIPv6DirectNICs: ptp and host-local give the Pod an IPv4 and an IPv6
// address; juneau plumbs an IPv6 ElasticIP on eth0 (the IPv6 Pod IP replaced, the
// IPv4 one kept) and another on an extra NIC (a /128, `default via fe80::1` in its own
// table, a rule from the address). The Node routes both /128s to the host ends, which
// hold fe80::1; the client reaches both; the Pod keeps its IPv4 cluster address; CHECK
// passes; the chain's DEL (juneau's, then ptp's, which finds its IPv6 address back)
// succeeds and removes the extra NIC.
func TestDualStackIPv6DirectNICs(t *testing.T) {
	f := newFixtureWith(t, ChainOptions{WaitSeconds: 5, Subnet6: podSubnet6})
	f.withClient6(eipWeb6, eipGateway6)
	f.agent.Set(podNS, podName, holding6("eth0", eipWeb6), holding6("ext0", eipGateway6))

	res, err := f.rt.Add(f.conf)
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	if len(res.IPs) != 2 || !netip.MustParsePrefix(podSubnet).Contains(netip.MustParseAddr(res.IPs[0].Address.IP.String())) ||
		res.IPs[1].Address.String() != eipWeb6+"/128" || res.IPs[1].Gateway.String() != "fe80::1" {
		t.Fatalf("result ips = %v, want the IPv4 Pod IP, then %s/128 via fe80::1", res.IPs, eipWeb6)
	}
	hostVeth := res.Interfaces[0].Name
	hostEnd := res.Interfaces[len(res.Interfaces)-2].Name

	// eth0: the IPv4 Pod IP stays, the IPv6 one is the ElasticIP.
	if got := addrs(t, f.pod, "eth0"); len(got) != 1 || !netip.MustParsePrefix(podSubnet).Contains(got[0].Addr()) {
		t.Errorf("eth0 IPv4 addresses = %v, want the Pod IP", got)
	}
	if got := addrs6(t, f.pod, "eth0"); !slices.Equal(got, []netip.Prefix{netip.MustParsePrefix(eipWeb6 + "/128")}) {
		t.Errorf("eth0 IPv6 addresses = %v, want only %s/128", got, eipWeb6)
	}
	if !slices.ContainsFunc(routes6(t, f.pod, "eth0", 0), isDefaultVia6) {
		t.Errorf("eth0 IPv6 routes %v: no default via fe80::1", routes6(t, f.pod, "eth0", 0))
	}
	// ext0: the ElasticIP, its table, its rule.
	table := int(directnic.RouteTable(netip.MustParseAddr(eipGateway6)))
	if got := addrs6(t, f.pod, "ext0"); !slices.Equal(got, []netip.Prefix{netip.MustParsePrefix(eipGateway6 + "/128")}) {
		t.Errorf("ext0 addresses = %v", got)
	}
	if rs := routes6(t, f.pod, "ext0", table); len(rs) != 1 || !isDefaultVia6(rs[0]) {
		t.Errorf("table %d routes = %v, want default via fe80::1 dev ext0", table, rs)
	}
	rules, err := f.pod.Netlink().RuleList(unix.AF_INET6)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rules, func(r netlink.Rule) bool {
		return r.Src != nil && r.Src.String() == eipGateway6+"/128" && r.Table == table && r.Priority == 100
	}) {
		t.Errorf("no rule from %s lookup %d priority 100: %v", eipGateway6, table, rules)
	}
	// The Node: /128 routes to the host ends, fe80::1 on each.
	for eip, dev := range map[string]string{eipWeb6: hostVeth, eipGateway6: hostEnd} {
		rs, err := f.node.Netlink().RouteListFiltered(unix.AF_INET6, &netlink.Route{Dst: netlinkPrefix(eip + "/128")}, netlink.RT_FILTER_DST)
		if err != nil || len(rs) != 1 || rs[0].LinkIndex != f.node.Link(dev).Attrs().Index {
			t.Errorf("node route to %s = %v (%v), want dev %s", eip, rs, err, dev)
		}
		list, _ := f.node.Netlink().AddrList(f.node.Link(dev), unix.AF_INET6)
		if !slices.ContainsFunc(list, func(a netlink.Addr) bool { return a.IP.String() == "fe80::1" }) {
			t.Errorf("host end %s does not hold fe80::1: %v", dev, list)
		}
	}

	ping(t, f.client, eipWeb6)     // outside → Node → eth0
	ping(t, f.client, eipGateway6) // outside → Node → ext0, replies through ext0
	ping(t, f.pod, nodeExtAddr6)   // the Pod reaches the Node through fe80::1
	ping(t, f.pod, f.nodeAddrOnPtp(res))
	if err := f.rt.Check(f.conf); err != nil {
		t.Fatalf("CHECK: %v", err)
	}

	if err := f.rt.Del(f.conf); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if linkExists(f.node, hostEnd) {
		t.Error("ext0's host end left after DEL")
	}
	if files := stateFiles(t, f.stateDir); len(files) != 0 {
		t.Errorf("state left after DEL: %v", files)
	}
}

func netlinkPrefix(s string) *net.IPNet {
	_, n, _ := net.ParseCIDR(s)
	return n
}

// TestDualStackIPv4DirectKeepsIPv6: an IPv4 ElasticIP on eth0 of a dual-stack Pod
// replaces the IPv4 Pod IP only; the IPv6 Pod IP, its routes and its traffic stay, and
// the result lists both.
func TestDualStackIPv4DirectKeepsIPv6(t *testing.T) {
	f := newFixtureWith(t, ChainOptions{WaitSeconds: 5, Subnet6: podSubnet6})
	f.withClient6()
	f.agent.Set(podNS, podName, holding("eth0", eipWeb))
	res, err := f.rt.Add(f.conf)
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	if len(res.IPs) != 2 || res.IPs[0].Address.String() != eipWeb+"/32" ||
		!netip.MustParsePrefix(podSubnet6).Contains(netip.MustParseAddr(res.IPs[1].Address.IP.String())) {
		t.Fatalf("result ips = %v, want the ElasticIP, then the IPv6 Pod IP", res.IPs)
	}
	if got := addrs6(t, f.pod, "eth0"); len(got) != 1 || !netip.MustParsePrefix(podSubnet6).Contains(got[0].Addr()) {
		t.Errorf("eth0 IPv6 addresses = %v, want the IPv6 Pod IP", got)
	}
	if got := addrs(t, f.pod, "eth0"); !slices.Equal(got, []netip.Prefix{netip.MustParsePrefix(eipWeb + "/32")}) {
		t.Errorf("eth0 IPv4 addresses = %v, want only the ElasticIP", got)
	}
	ping(t, f.pod, nodeExtAddr6) // IPv6 through the primary plugin's route, as before
	ping(t, f.pod, nodeExtAddr)  // IPv4 through 169.254.0.1
	if err := f.rt.Del(f.conf); err != nil {
		t.Fatalf("DEL: %v", err)
	}
}
