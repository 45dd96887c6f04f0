package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/directnic"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/e2e/harness"
)

// TestDirectExtraNIC: ext0 from the networks annotation carries gw-eip; replies leave
// through ext0 by the rule `from <EIP> lookup T`, eth0 keeps its cluster route.
func TestDirectExtraNIC(t *testing.T) {
	c, ns := setup(t)
	createElasticIP(t, c, ns, "gw-eip")
	eip := c.WaitElasticIPAvailable(ns, "gw-eip")
	gw := c.RunPod(harness.PodSpec{Namespace: ns, Name: "gw", Node: "node-a",
		Annotations: map[string]string{v1alpha1.AnnotationNetworks: `[{"interface":"ext0","elasticIP":"gw-eip"}]`}})
	table := directnic.RouteTable(mustAddr(t, eip))
	rules := gw.NS.MustRun("ip", "-4", "rule", "show")
	if want := fmt.Sprintf("100:\tfrom %s lookup %d", eip, table); !strings.Contains(rules, want) {
		t.Errorf("rules:\n%s\nwant %q", rules, want)
	}
	if routes := gw.NS.MustRun("ip", "-4", "route", "show", "table", fmt.Sprint(table)); !strings.Contains(routes, "default via 169.254.0.1 dev ext0 onlink") {
		t.Errorf("table %d:\n%s", table, routes)
	}
	if routes := gw.NS.MustRun("ip", "-4", "route", "show"); !strings.Contains(routes, "default via") || !strings.Contains(routes, "dev eth0") {
		t.Errorf("eth0 lost its cluster route:\n%s", routes)
	}
	if addrs := gw.NS.MustRun("ip", "-4", "-o", "addr", "show", "dev", "ext0"); !strings.Contains(addrs, eip+"/32") {
		t.Errorf("ext0 addresses:\n%s", addrs)
	}
	if addrs := gw.NS.MustRun("ip", "-4", "-o", "addr", "show", "dev", "eth0"); !strings.Contains(addrs, gw.IP+"/") {
		t.Errorf("eth0 lost its Pod IP %s:\n%s", gw.IP, addrs)
	}
	c.ServeTCP(gw.NS, "gw", 80)
	if got := c.EventuallyDial(c.Client, eip, 80, "gw"); got != "gw "+harness.ClientIP {
		t.Errorf("gw saw %q", got)
	}
	// The reply to the client leaves through ext0.
	if out := gw.NS.MustRun("ip", "-4", "route", "get", harness.ClientIP, "from", eip); !strings.Contains(out, "dev ext0") {
		t.Errorf("route of replies: %s", out)
	}
}

// TestARPFollowsThePod: only the Node using the address answers ARP. A replacement Pod
// on the other Node waits (its CNI ADD fails naming the holder) while the old Pod is
// Terminating; once the old one is gone it takes the address, the advertisement moves
// in place (same UID), that Node answers, and traffic works again once the client's
// neighbour entry is flushed (no gratuitous ARP).
func TestARPFollowsThePod(t *testing.T) {
	c, ns := setup(t)
	ctx := testContext(t)
	createElasticIP(t, c, ns, "mv-eip")
	eip := c.WaitElasticIPAvailable(ns, "mv-eip")
	ann := map[string]string{v1alpha1.AnnotationElasticIP: "mv-eip"}
	a := c.RunPod(harness.PodSpec{Namespace: ns, Name: "mover-1", Node: "node-a", Annotations: ann})
	c.ServeTCP(a.NS, "on-a", 80)
	c.EventuallyDial(c.Client, eip, 80, "on-a")
	macA, macB := c.Nodes["node-a"].NS.MAC("ext0").String(), c.Nodes["node-b"].NS.MAC("ext0").String()
	if got, ok := c.Client.Neighbour("eth0", eip); !ok || got.String() != macA {
		t.Errorf("client resolved %s to %v, want node-a's %s", eip, got, macA)
	}
	advert := advertisement.PreferredName(ns, "mv-eip")
	ad, err := c.CP.Juneau.JuneauV1alpha1().ARPAdvertisements().Get(ctx, advert, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	capture := c.Ext.Capture("br-ext")

	a.Terminate()
	b := c.CreatePod(harness.PodSpec{Namespace: ns, Name: "mover-2", Node: "node-b", Annotations: ann})
	if err := b.StartWithWait(2); err == nil || !strings.Contains(err.Error(), "mover-1.eth0") {
		t.Fatalf("CNI ADD of the replacement while the holder runs: %v, want a failure naming mover-1.eth0", err)
	}
	a.Gone()
	if err := b.Start(); err != nil {
		t.Fatalf("CNI ADD once the holder is gone: %v", err)
	}
	c.ServeTCP(b.NS, "on-b", 80)
	c.WaitAdvertisement(advert, "node-b")
	moved, err := c.CP.Juneau.JuneauV1alpha1().ARPAdvertisements().Get(ctx, advert, metav1.GetOptions{})
	if err != nil || moved.UID != ad.UID {
		t.Fatalf("advertisement after the move: %v, want the same UID %s", err, ad.UID)
	}
	// No gratuitous ARP: the client keeps node-a's MAC until its entry is flushed.
	if got, ok := c.Client.Neighbour("eth0", eip); ok && got.String() != macA {
		t.Errorf("client learned %s without asking (gratuitous ARP?)", got)
	}
	c.Client.FlushNeighbour("eth0", eip)
	c.EventuallyDial(c.Client, eip, 80, "on-b")
	if got, ok := c.Client.Neighbour("eth0", eip); !ok || got.String() != macB {
		t.Errorf("client resolved %s to %v, want node-b's %s", eip, got, macB)
	}
	capture.Stop()
	for _, f := range capture.Frames() {
		if arp, ok := parseARP(f); ok && arp.Gratuitous() {
			t.Errorf("gratuitous ARP seen on the wire: %+v", arp)
		}
	}
}

// TestDeleteElasticIPWhilePodRuns: the claim and advertisement stay, the Pod keeps
// working (WaitingForNetworkInterfaces); once the Pod is gone everything is released.
func TestDeleteElasticIPWhilePodRuns(t *testing.T) {
	c, ns := setup(t)
	ctx := testContext(t)
	createElasticIP(t, c, ns, "keep-eip")
	eip := c.WaitElasticIPAvailable(ns, "keep-eip")
	p := c.RunPod(harness.PodSpec{Namespace: ns, Name: "keeper", Node: "node-a",
		Annotations: map[string]string{v1alpha1.AnnotationElasticIP: "keep-eip"}})
	c.ServeTCP(p.NS, "keeper", 80)
	c.EventuallyDial(c.Client, eip, 80, "keeper")
	if err := c.CP.Juneau.JuneauV1alpha1().ElasticIPs(ns).Delete(ctx, "keep-eip", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitElasticIPCondition(ns, "keep-eip", v1alpha1.ConditionAllocated, v1alpha1.ReasonWaitingForNetworkInterfaces)
	if _, err := c.CP.Juneau.JuneauV1alpha1().AllocationClaims().Get(ctx, eip, metav1.GetOptions{}); err != nil {
		t.Errorf("claim released while the Pod carries the address: %v", err)
	}
	if _, err := c.CP.Juneau.JuneauV1alpha1().ARPAdvertisements().Get(ctx, advertisement.PreferredName(ns, "keep-eip"), metav1.GetOptions{}); err != nil {
		t.Errorf("advertisement removed while the Pod carries the address: %v", err)
	}
	c.Client.FlushNeighbour("eth0", eip)
	c.EventuallyDial(c.Client, eip, 80, "keeper")

	p.Gone()
	c.WaitGone("ElasticIP and claim released", func(ctx context.Context) bool {
		_, e1 := c.CP.Juneau.JuneauV1alpha1().ElasticIPs(ns).Get(ctx, "keep-eip", metav1.GetOptions{})
		_, e2 := c.CP.Juneau.JuneauV1alpha1().AllocationClaims().Get(ctx, eip, metav1.GetOptions{})
		_, e3 := c.CP.Juneau.JuneauV1alpha1().ARPAdvertisements().Get(ctx, advertisement.PreferredName(ns, "keep-eip"), metav1.GetOptions{})
		return e1 != nil && e2 != nil && e3 != nil
	})
}
