package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/bgprouter"
	"github.com/loutres/juneau/test/e2e/harness"
	"github.com/loutres/juneau/test/framework"
)

// bgpPool6 is the IPv6 bgp pool: on no segment, like bgpPool.
const bgpPool6 = "fd00:225:53::/64"

// TestBGPIPv6WithBIRD: on a dual-stack cluster, an IPv6 ElasticIP of a bgp network is
// announced as a /128 over the Nodes' IPv4 sessions (BIRD's ipv6 channel) with the
// Node's IPv6 address as next hop; the far client behind the router reaches it through
// NAT; the route follows the Pod to the other Node and is withdrawn with the ElasticIP.
func TestBGPIPv6WithBIRD(t *testing.T) {
	c, ns := setupBGPWith(t, harness.Options{Router: true, DualStack: true})
	ctx := testContext(t)
	j := c.CP.Juneau.JuneauV1alpha1()
	if _, err := j.AddressPools().Create(ctx, &v1alpha1.AddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: "bgp-pool6"},
		Spec:       v1alpha1.AddressPoolSpec{AdvertiseMode: v1alpha1.AdvertiseBGP, Addresses: []string{"fd00:225:53::5-fd00:225:53::99"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.EventuallyWithin(t, time.Minute, "adding bgp-pool6 to bgp-net", func(ctx context.Context) (bool, string) {
		net, err := j.ExternalNetworks().Get(ctx, "bgp-net", metav1.GetOptions{})
		if err == nil {
			net.Spec.AddressPools = append(net.Spec.AddressPools, "bgp-pool6")
			_, err = j.ExternalNetworks().Update(ctx, net, metav1.UpdateOptions{})
		}
		return err == nil, fmt.Sprint(err)
	})
	cfg := routerConfig(c, true)
	cfg.Accept6 = netip.MustParsePrefix(bgpPool6)
	bird := bgprouter.StartBIRD(t, c.Router, cfg)
	nodeA, nodeB := c.Nodes["node-a"], c.Nodes["node-b"]

	nat := c.RunPod(harness.PodSpec{Namespace: ns, Name: "nat6", Node: "node-a"})
	c.ServeTCP6(nat.NS, "nat6", 80)
	manifest := `apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIP
metadata: {name: nat6-eip}
spec: {externalNetwork: bgp-net, ipFamily: IPv6}
---
apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIPAttachment
metadata: {name: nat6-attach}
spec:
  elasticIPRef: {name: nat6-eip}
  targetRef: {networkInterfaceName: nat6.eth0}
`
	if r := c.CP.Kubectl(ctx, manifest, "apply", "-n", ns, "-f", "-"); r.Err != nil {
		t.Fatalf("%v: %s", r.Err, r.Stderr)
	}
	addr := c.WaitElasticIPWorking(ns, "nat6-eip")
	if a := netip.MustParseAddr(addr); !a.Is6() || !netip.MustParsePrefix(bgpPool6).Contains(a) {
		t.Fatalf("nat6-eip got %s, want an address of %s", addr, bgpPool6)
	}
	route := addr + "/128"

	routes := bird.WaitRoutes(time.Minute, map[string]string{route: nodeA.IP6})
	if r := routes[route]; r.Protocol != "node_a" {
		t.Errorf("%s learned from %s, want node_a (over the IPv4 session)", route, r.Protocol)
	}
	show, _ := bird.Command("show", "route")
	t.Logf("birdc show route:\n%s", show)
	c.EventuallyDial(c.Far, addr, 80, "nat6 "+harness.FarClientIP6)
	framework.EventuallyWithin(t, time.Minute, "the BGPAdvertisement of nat6-eip Announced", func(ctx context.Context) (bool, string) {
		ads, err := j.BGPAdvertisements().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, ad := range ads.Items {
			if ad.Spec.Address == addr {
				for _, cond := range ad.Status.Conditions {
					if cond.Type == v1alpha1.ConditionAnnounced {
						return cond.Status == metav1.ConditionTrue, cond.Message
					}
				}
			}
		}
		return false, "no Announced condition on the advertisement of " + addr
	})

	// The Pod moves to node-b: the /128 follows, traffic resumes.
	nat.Gone()
	moved := c.RunPod(harness.PodSpec{Namespace: ns, Name: "nat6", Node: "node-b"})
	c.ServeTCP6(moved.NS, "nat6-moved", 80)
	bird.WaitRoutes(time.Minute, map[string]string{route: nodeB.IP6})
	c.EventuallyDial(c.Far, addr, 80, "nat6-moved")

	// The ElasticIP goes: its route is withdrawn.
	if err := j.ElasticIPAttachments(ns).Delete(ctx, "nat6-attach", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.EventuallyWithin(t, time.Minute, "deleting ElasticIP nat6-eip", func(ctx context.Context) (bool, string) {
		err := j.ElasticIPs(ns).Delete(ctx, "nat6-eip", metav1.DeleteOptions{})
		return err == nil, fmt.Sprint(err)
	})
	bird.WaitRoutes(time.Minute, map[string]string{})
}
