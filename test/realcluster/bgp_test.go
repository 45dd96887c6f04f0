package realcluster

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/test/bgprouter"
	"github.com/loutres/juneau/test/cluster"
	"github.com/loutres/juneau/test/doctest"
	"github.com/loutres/juneau/test/netns"
	"github.com/loutres/juneau/test/require"
)

// The hosts of docs/guide-bgp.md: the router on the segment, and a far client on a
// subnet of its own behind it, which reaches the pool only through the routes the
// Nodes announce (test/e2e's harness uses the same addresses).
const (
	routerIP     = "10.225.51.254"
	routerIP6    = "fd00:225:51::254"
	farPrefix    = "10.225.60.0/24"
	farPrefix6   = "fd00:225:60::/64"
	farRouterIP  = "10.225.60.1"
	farRouterIP6 = "fd00:225:60::1"
	farClientIP  = "10.225.60.2"
	farClientIP6 = "fd00:225:60::2"
	bgpPool      = "10.225.53.0/24"
	bgpPool6     = "fd00:225:53::/64"
)

// testBGPGuide: every step of docs/guide-bgp.md, as a user follows it, with a BIRD 2
// router of the test's own on the segment (AS 64512, the page's configuration as
// test/bgprouter writes it, TCP-MD5 with both Nodes, IPv4 and IPv6 over the IPv4
// sessions, the learned routes installed for forwarding) and a far client behind it.
// The page's in=router steps run birdc against that router, its in=far steps on the
// far client. What the page made is deleted afterwards, the sessions closed before the
// router goes.
func testBGPGuide(t *testing.T, c *cluster.Cluster) {
	router, far := bgpHosts(t, c)
	cfg := guideRouter(c)
	bird := bgprouter.StartBIRD(t, router, cfg)
	bin := t.TempDir()
	wrapper := "#!/bin/sh\nexec " + require.Binary(t, "birdc") + " -s " + bird.Socket() + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "birdc"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	shared.hosts = map[string]docHost{"router": {ns: router.Path(), bin: bin}, "far": {ns: far.Path(), bin: bin}}
	t.Cleanup(func() {
		shared.hosts = nil
		removeBGPGuide(t, c, bird, cfg.Neighbors)
	})
	shared.docs.RunStage(t, doctest.StageGuide, ownScenario)
	if t.Failed() {
		show, _ := bird.Command("show", "protocols", "all")
		t.Logf("birdc show protocols all:\n%s\nBIRD's log:\n%s", show, bird.Log())
		out, _ := c.KubectlRun(context.Background(), "", "describe", "bgpnodestatus,bgpadvertisement")
		t.Logf("kubectl describe bgpnodestatus,bgpadvertisement:\n%s", out)
	}
}

// guideRouter is the router of docs/guide-bgp.md: AS 64512, a passive session with
// every Node (AS 64513, TCP-MD5), the /32s and /128s of the pools taken and installed.
func guideRouter(c *cluster.Cluster) bgprouter.Config {
	cfg := bgprouter.Config{RouterID: netip.MustParseAddr(routerIP), AS: 64512, Kernel: true,
		Accept: netip.MustParsePrefix(bgpPool), Accept6: netip.MustParsePrefix(bgpPool6)}
	for _, n := range c.Nodes {
		cfg.Neighbors = append(cfg.Neighbors, bgprouter.Neighbor{Name: strings.ReplaceAll(n.Name, "-", "_"),
			Local: netip.MustParseAddr(routerIP), Address: netip.MustParseAddr(n.IP), AS: 64513, Password: "s3cret"})
	}
	return cfg
}

// bgpHosts adds the router (on the segment, forwarding) and the far client (behind it,
// routing the pool's prefixes through it), and routes the far subnet from every Node
// through the router, as a Node's default route would; all of it goes when the test
// ends.
func bgpHosts(t *testing.T, c *cluster.Cluster) (router, far *netns.NS) {
	t.Helper()
	router = netns.New(t, "rtr")
	if err := c.PlugIntoSegment(router.Path(), "rtr", routerIP+"/24", routerIP6+"/64"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.UnplugFromSegment("rtr"); err != nil {
			t.Errorf("unplugging the router: %v", err)
		}
	})
	router.Sysctl("net/ipv4/ip_forward", "1")
	router.Sysctl("net/ipv6/conf/all/forwarding", "1")
	far = netns.New(t, "far")
	netns.Veth(router, "far0", far, "eth0")
	router.Addr("far0", farRouterIP+"/24")
	router.Addr("far0", farRouterIP6+"/64")
	far.Addr("eth0", farClientIP+"/24")
	far.Addr("eth0", farClientIP6+"/64")
	far.Route(bgpPool, farRouterIP, "eth0")
	far.Route(bgpPool6, farRouterIP6, "eth0")
	for _, n := range c.Nodes {
		node := netns.Attach(t, n.Name, n.NS)
		for _, r := range [][2]string{{farPrefix, routerIP}, {farPrefix6, routerIP6}} {
			node.Route(r[0], r[1], "eth0")
			_, dst, _ := net.ParseCIDR(r[0])
			t.Cleanup(func() {
				if err := node.Netlink().RouteDel(&netlink.Route{Dst: dst, Gw: net.ParseIP(r[1])}); err != nil {
					t.Errorf("removing the route to %s on %s: %v", r[0], n.Name, err)
				}
			})
		}
	}
	return router, far
}

// removeBGPGuide deletes what docs/guide-bgp.md made, then waits until the router has no
// session left and no route of the pools: the agents closed the sessions themselves
// (Cease) before the router goes, so no Node reports a failed session.
func removeBGPGuide(t *testing.T, c *cluster.Cluster, router bgprouter.Router, neighbors []bgprouter.Neighbor) {
	for _, args := range [][]string{
		{"delete", "elasticipattachment", "shop-eip-attach", "shop-eip6-attach", "--ignore-not-found"},
		{"delete", "pod", "shop", "--ignore-not-found"},
		{"delete", "elasticip", "shop-eip", "shop-eip6", "--ignore-not-found"},
		{"delete", "bgppeer", "tor", "--ignore-not-found"},
		{"delete", "externalnetwork", "bgp-net", "--ignore-not-found"},
		{"delete", "addresspool", "bgp-pool", "bgp-pool6", "--ignore-not-found"},
	} {
		if out, err := c.KubectlRun(testContext(t, 3*time.Minute), "", args...); err != nil {
			t.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	err := wait.PollUntilContextTimeout(testContext(t, time.Minute), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		quiet, _ := router.Quiet(neighbors)
		return quiet, nil
	})
	if err != nil {
		show, _ := router.Table()
		t.Errorf("after the guide's objects were deleted, the router still has sessions or routes: %v\n%s\n%s", err, show, router.Log())
	}
}
