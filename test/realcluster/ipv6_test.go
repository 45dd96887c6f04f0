package realcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/cluster"
	"github.com/loutres/juneau/test/netns"
)

// nat6YAML is an IPv6 ElasticIP, <pod>-eip6, translated by NAT to the Pod's eth0 (its
// IPv6 address) by the attachment <pod>-attach6.
func nat6YAML(pod string) string { return eip6YAML(pod+"-eip6") + attachYAML(pod, "6") }

// eip6YAML is an IPv6 ElasticIP on the scenarios' network, ext-net.
func eip6YAML(name string) string {
	return fmt.Sprintf(`apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIP
metadata: {name: %s}
spec: {externalNetwork: ext-net, ipFamily: IPv6}
---
`, name)
}

// directAnnotations are the annotations (a YAML flow map) of a Pod carrying the
// ElasticIP eip directly: on eth0, or on the extra interface ext0 where the primary
// CNI's eth0 cannot carry it (flannel's bridge: docs/guide-direct.md#which-primary-cnis-work).
func directAnnotations(c *cluster.Cluster, eip string) string {
	b, err := json.Marshal(directAnnotationMap(c, eip))
	if err != nil {
		panic(err)
	}
	return string(b) // JSON is a YAML flow map
}

// directAnnotationMap is directAnnotations as a Pod's annotations.
func directAnnotationMap(c *cluster.Cluster, eip string) map[string]string {
	if c.DirectInterface() == "eth0" {
		return map[string]string{v1alpha1.AnnotationElasticIP: eip}
	}
	return map[string]string{v1alpha1.AnnotationNetworks: fmt.Sprintf(`[{"interface":"%s","elasticIP":"%s"}]`, c.DirectInterface(), eip)}
}

// testDualStack: a dual-stack Pod with an IPv4 and an IPv6 ElasticIP by NAT (one
// attachment per family on its eth0), and a Pod carrying an IPv6 ElasticIP directly.
// Each works as a user sees it (eipWorks: Attached True with reason Attached, the
// readiness gate True, the external client answered at the address by its address of
// that family), and each Pod's connections to the client arrive from its ElasticIP of
// the family; an extra interface carries what is sent from its address, so the Pod
// binds to it there (docs/guide-direct.md#inside-the-pod).
func testDualStack(t *testing.T, c *cluster.Cluster) {
	ns := namespace(t, c, "dual")
	kubectl(t, c, gatedBoxPod("dual", "")+"---\n"+natYAML("dual")+nat6YAML("dual")+
		eip6YAML("direct6-eip")+gatedBoxPod("direct6", directAnnotations(c, "direct6-eip")), "-n", ns, "apply", "-f", "-")
	waitPods(t, c, ns, "dual", "direct6")
	w, err := c.ServeWhoami(9000)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, u := range []struct {
		pod, eip string
		bind     bool
	}{{"dual", "dual-eip", false}, {"dual", "dual-eip6", false}, {"direct6", "direct6-eip", c.DirectInterface() != "eth0"}} {
		addr := eipWorks(t, c, ns, u.eip, u.pod)
		from := ""
		if u.bind {
			from = addr
		}
		src, err := c.SourceOf(testContext(t, 2*time.Minute), whoamiAddr(w, addr), from, ns, u.pod, "")
		if err != nil || src != addr {
			t.Errorf("%s's connection to the client at %s arrives from %q (%v), want its ElasticIP %s (%s)", u.pod, whoamiAddr(w, addr), src, err, addr, u.eip)
		}
	}
}

// testNDPFollowsPod: a Pod with an IPv6 ElasticIP by NAT runs on one Node, and the
// client's neighbour entry for the address holds that Node's MAC; the Pod re-created
// under its name on the other Node, the attachment follows its new NetworkInterface,
// the advertisement names the new Node, and the client, its stale entry flushed (juneau
// sends no unsolicited advertisement: docs/arp.md#after-a-move), gets the answer from
// the new Node's MAC and reaches the Pod there.
func testNDPFollowsPod(t *testing.T, c *cluster.Cluster) {
	ns := namespace(t, c, "ndp")
	on := func(n *cluster.Node) string { return gatedBoxPod("mover", "") + "  nodeName: " + n.Name + "\n" }
	first, second := c.Nodes[0], c.Nodes[1]
	kubectl(t, c, on(first)+"---\n"+nat6YAML("mover"), "-n", ns, "apply", "-f", "-")
	waitPods(t, c, ns, "mover")
	addr := eipWorks(t, c, ns, "mover-eip6", "mover")
	client := netns.Attach(t, "client", c.ClientNS)
	answeredBy(t, c, client, ns, addr, first)

	kubectl(t, c, "", "-n", ns, "delete", "pod", "mover", "--wait=true")
	kubectl(t, c, on(second), "-n", ns, "apply", "-f", "-")
	waitPods(t, c, ns, "mover")
	if again := eipWorks(t, c, ns, "mover-eip6", "mover"); again != addr {
		t.Fatalf("mover-eip6 has %s after the move, want %s", again, addr)
	}
	answeredBy(t, c, client, ns, addr, second)
}

// answeredBy checks that the advertisement of the address names the Node n, and that
// the client's neighbour entry for it (just filled by eipWorks) holds n's MAC on the
// segment: n answered the client's neighbor solicitation.
func answeredBy(t *testing.T, c *cluster.Cluster, client *netns.NS, ns, addr string, n *cluster.Node) {
	t.Helper()
	var node string
	if err := wait.PollUntilContextTimeout(testContext(t, time.Minute), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		adv, err := c.Juneau.JuneauV1alpha1().ARPAdvertisements().Get(ctx, "eip-"+ns+"-mover-eip6", metav1.GetOptions{})
		if err == nil {
			node = adv.Spec.NodeName
		}
		return node == n.Name, nil
	}); err != nil {
		t.Errorf("the advertisement of %s names Node %q, want %s", addr, node, n.Name)
	}
	want := netns.Attach(t, n.Name, n.NS).MAC("eth0")
	got, ok := client.Neighbour("eth0", addr)
	if !ok || got.String() != want.String() {
		t.Errorf("the client's neighbour entry for %s: %v (usable: %v), want %s's MAC %s", addr, got, ok, n.Name, want)
	}
}

// testAutomaticDualStack: a Pod asking for automatic ElasticIPs of both families
// (juneau.loutres.me/pod-eip-ip-families, docs/automatic.md) gets one ElasticIP per
// family, both labelled with the Pod, each working as a user sees it (eipWorks, which
// also checks the Pod's write-back annotations name it), and its connections to the
// client arrive from the ElasticIP of each family; deleting the Pod releases both (its
// release strategy Follow).
func testAutomaticDualStack(t *testing.T, c *cluster.Cluster) {
	ns := namespace(t, c, "auto6")
	kubectl(t, c, gatedBoxPod("both", `{juneau.loutres.me/pod-with-eip: "true", juneau.loutres.me/pod-eip-ip-families: "IPv4,IPv6", juneau.loutres.me/pod-eip-release-strategy: Follow}`),
		"-n", ns, "apply", "-f", "-")
	byFamily := map[v1alpha1.IPFamily]string{}
	var names []string
	err := wait.PollUntilContextTimeout(testContext(t, 3*time.Minute), 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.Juneau.JuneauV1alpha1().ElasticIPs(ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelPod + "=both"})
		if err != nil {
			return false, nil
		}
		byFamily, names = map[v1alpha1.IPFamily]string{}, nil
		for _, e := range list.Items {
			byFamily[e.Spec.Family()] = e.Name
			names = append(names, e.Name)
		}
		return len(list.Items) == 2 && len(byFamily) == 2, nil
	})
	if err != nil {
		t.Fatalf("the Pod asking for both families has ElasticIPs %v (by family %v), want one IPv4 and one IPv6: %v", names, byFamily, err)
	}
	waitPods(t, c, ns, "both")
	w, err := c.ServeWhoami(9000)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, family := range []v1alpha1.IPFamily{v1alpha1.IPv4, v1alpha1.IPv6} {
		addr := eipWorks(t, c, ns, byFamily[family], "both")
		src, err := c.SourceOf(testContext(t, 2*time.Minute), whoamiAddr(w, addr), "", ns, "both", "")
		if err != nil || src != addr {
			t.Errorf("the Pod's %s connection to the client arrives from %q (%v), want its ElasticIP %s", family, src, err, addr)
		}
	}
	kubectl(t, c, "", "-n", ns, "delete", "pod", "both", "--wait=true")
	for _, name := range names {
		gone(t, "ElasticIP "+name+" of the deleted Pod", 2*time.Minute, func(ctx context.Context) error {
			_, err := c.Juneau.JuneauV1alpha1().ElasticIPs(ns).Get(ctx, name, metav1.GetOptions{})
			return err
		})
	}
	slices.Sort(names)
	t.Logf("automatic ElasticIPs %v released with their Pod", names)
}
