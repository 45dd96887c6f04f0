package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/e2e/harness"
	"github.com/loutres/juneau/test/framework"
)

// pool6 is the IPv6 AddressPool of the dual-stack tests, on the external segment.
const pool6 = "fd00:225:51::1000-fd00:225:51::1fff"

// setupDualStack starts a dual-stack cluster with a far client and gives ext-net an
// IPv6 pool beside its IPv4 one.
func setupDualStack(t *testing.T) (*harness.Cluster, string) {
	t.Helper()
	c, ns := setupWith(t, harness.Options{DualStack: true, FarClient: true})
	ctx := context.Background()
	j := c.CP.Juneau.JuneauV1alpha1()
	if _, err := j.AddressPools().Create(ctx, &v1alpha1.AddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: "ext-pool6"},
		Spec:       v1alpha1.AddressPoolSpec{AdvertiseMode: v1alpha1.AdvertiseARP, Addresses: []string{pool6}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	net, err := j.ExternalNetworks().Get(ctx, "ext-net", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	net.Spec.AddressPools = append(net.Spec.AddressPools, "ext-pool6")
	if _, err := j.ExternalNetworks().Update(ctx, net, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c, ns
}

// TestIPv6 runs on one dual-stack cluster: an IPv6 ElasticIP attached by NAT to a
// dual-stack Pod is reached from the external client (which the Pod sees as itself),
// the Pod's outbound IPv6 traffic leaves with the ElasticIP as source and untracked,
// an IPv4 ElasticIP serves the same Pod at once, Path MTU Discovery and traceroute work
// through the NAT, the Neighbor Discovery answer follows the Pod to the other Node, and
// an IPv6 ElasticIP carried directly by a Pod's eth0 is reached as it is.
func TestIPv6(t *testing.T) {
	c, ns := setupDualStack(t)
	ctx := testContext(t)
	web := c.RunPod(harness.PodSpec{Namespace: ns, Name: "web", Node: "node-a"})
	if len(web.IPs) != 2 {
		t.Fatalf("web got %v from the CNI chain, want an IPv4 and an IPv6 address", web.IPs)
	}
	c.ServeTCP6(web.NS, "web6", 80)
	c.ServeTCP(web.NS, "web4", 80)
	manifest := `apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIP
metadata: {name: web6}
spec: {externalNetwork: ext-net, ipFamily: IPv6}
---
apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIPAttachment
metadata: {name: web6-attach}
spec:
  elasticIPRef: {name: web6}
  targetRef: {networkInterfaceName: web.eth0}
---
apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIP
metadata: {name: web4}
spec: {externalNetwork: ext-net}
---
apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIPAttachment
metadata: {name: web4-attach}
spec:
  elasticIPRef: {name: web4}
  targetRef: {networkInterfaceName: web.eth0}
`
	if r := c.CP.Kubectl(ctx, manifest, "apply", "-n", ns, "-f", "-"); r.Err != nil {
		t.Fatalf("%v: %s", r.Err, r.Stderr)
	}
	eip6 := c.WaitElasticIPWorking(ns, "web6")
	eip4 := c.WaitElasticIPWorking(ns, "web4")
	if a := mustAddr(t, eip6); !a.Is6() || !iprange.Contain([]iprange.Range{mustRange(t, pool6)}, a) {
		t.Fatalf("web6 got %s, want an address of %s", eip6, pool6)
	}
	claim, err := c.CP.Juneau.JuneauV1alpha1().AllocationClaims().Get(ctx, iprange.ClaimName(mustAddr(t, eip6)), metav1.GetOptions{})
	if err != nil || claim.Spec.Address != eip6 {
		t.Fatalf("AllocationClaim of %s: %+v, %v", eip6, claim, err)
	}
	att, err := c.CP.Juneau.JuneauV1alpha1().ElasticIPAttachments(ns).Get(ctx, "web6-attach", metav1.GetOptions{})
	if err != nil || att.Status.PodIP != web.IPs[1] {
		t.Fatalf("web6-attach translates to %q (%v), want the Pod's IPv6 address %s", att.Status.PodIP, err, web.IPs[1])
	}
	node := c.Nodes["node-a"].NS

	t.Run("inbound through NAT", func(t *testing.T) {
		c.EventuallyDial(c.Client, eip6, 80, "web6")
		node.MustRun("conntrack", "-F")
		got, err := harness.Dial(c.Client, eip6, 80)
		if want := "web6 " + harness.ClientIP6; err != nil || got != want {
			t.Errorf("the Pod saw %q (%v), want %q (the client's real address)", got, err, want)
		}
	})
	t.Run("outbound source", func(t *testing.T) {
		server := c.ServeTCP6(c.Client, "client", 9000)
		got := c.EventuallyDial(web.NS, harness.ClientIP6, 9000, "client")
		if want := "client " + eip6; got != want {
			t.Errorf("the client saw %q, want %q (the ElasticIP as source)", got, want)
		}
		for _, seen := range server.Seen() {
			if seen != eip6 {
				t.Errorf("client saw a connection from %s, want only %s", seen, eip6)
			}
		}
		if out := node.MustRun("conntrack", "-L", "-f", "ipv6"); strings.Contains(out, eip6) {
			t.Errorf("conntrack saw translated flows:\n%s", out)
		}
	})
	t.Run("IPv4 and IPv6 ElasticIPs on one Pod", func(t *testing.T) {
		got := c.EventuallyDial(c.Client, eip4, 80, "web4")
		if want := "web4 " + harness.ClientIP; got != want {
			t.Errorf("over IPv4 the Pod saw %q, want %q", got, want)
		}
		if got, err := harness.Dial(c.Client, eip6, 80); err != nil || !strings.HasPrefix(got, "web6 ") {
			t.Errorf("over IPv6 meanwhile: %q (%v)", got, err)
		}
		server := c.ServeTCP(c.Client, "client4", 9001)
		if got := c.EventuallyDial(web.NS, harness.ClientIP, 9001, "client4"); got != "client4 "+eip4 {
			t.Errorf("the client saw %q over IPv4, want the IPv4 ElasticIP %s as source", got, eip4)
		}
		_ = server
	})
	t.Run("PMTUD through a small-MTU IPv6 router", func(t *testing.T) {
		// The router's far link has IPv6's minimum MTU: its Packet Too Big, addressed to
		// the ElasticIP, must be rewritten to the Pod for the transfer to complete.
		transferLearnsPathMTU(t, c, web.NS, "tcp6", harness.FarClientIP6)
	})
	t.Run("traceroute through NAT", func(t *testing.T) {
		eventually(t, c, "traceroute -6 from the Pod to the far client", func() error {
			out, err := web.NS.Output("traceroute", "-6", "-n", "-q", "1", "-w", "2", "-m", "5", harness.FarClientIP6)
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			// Hop 1 is node-a (not translated), hop 2 the router, whose Time Exceeded is
			// addressed to the ElasticIP and rewritten to the Pod, hop 3 the far client.
			for _, hop := range []string{harness.RouterIP6, harness.FarClientIP6} {
				if !strings.Contains(out, " "+hop+" ") {
					return fmt.Errorf("no hop %s in:\n%s", hop, out)
				}
			}
			return nil
		})
	})
	t.Run("NDP answer follows the Pod", func(t *testing.T) {
		macA, macB := c.Nodes["node-a"].NS.MAC("ext0"), c.Nodes["node-b"].NS.MAC("ext0")
		c.Client.FlushNeighbour("eth0", eip6)
		c.EventuallyDial(c.Client, eip6, 80, "web6")
		if mac, ok := c.Client.Neighbour("eth0", eip6); !ok || mac.String() != macA.String() {
			t.Fatalf("the client resolved %s to %v, want node-a's %s", eip6, mac, macA)
		}
		web.Gone()
		moved := c.RunPod(harness.PodSpec{Namespace: ns, Name: "web", Node: "node-b"})
		c.ServeTCP6(moved.NS, "moved", 80)
		c.WaitGone("web6-attach on node-b", func(ctx context.Context) bool {
			a, err := c.CP.Juneau.JuneauV1alpha1().ElasticIPAttachments(ns).Get(ctx, "web6-attach", metav1.GetOptions{})
			return err == nil && a.Status.Phase == v1alpha1.AttachmentAttached && a.Status.NodeName == "node-b" && a.Status.PodIP == moved.IPs[1]
		})
		c.Client.FlushNeighbour("eth0", eip6)
		got := c.EventuallyDial(c.Client, eip6, 80, "moved")
		if want := "moved " + harness.ClientIP6; got != want {
			t.Errorf("after the move the Pod saw %q, want %q", got, want)
		}
		if mac, ok := c.Client.Neighbour("eth0", eip6); !ok || mac.String() != macB.String() {
			t.Errorf("after the move the client resolved %s to %v, want node-b's %s", eip6, mac, macB)
		}
	})
	t.Run("direct use", func(t *testing.T) {
		if _, err := c.CP.Juneau.JuneauV1alpha1().ElasticIPs(ns).Create(ctx, &v1alpha1.ElasticIP{
			ObjectMeta: metav1.ObjectMeta{Name: "edge6"},
			Spec:       v1alpha1.ElasticIPSpec{ExternalNetwork: "ext-net", IPFamily: v1alpha1.IPv6},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eip := c.WaitElasticIPAvailable(ns, "edge6")
		edge := c.RunPod(harness.PodSpec{Namespace: ns, Name: "edge", Node: "node-a",
			Annotations: map[string]string{v1alpha1.AnnotationElasticIP: "edge6"}})
		nic := c.WaitNIC(ns, "edge.eth0", v1alpha1.NetworkInterfaceReady, v1alpha1.ReasonReady)
		if nic.Status.Address != eip+"/128" {
			t.Errorf("edge.eth0 holds %q, want %s/128", nic.Status.Address, eip)
		}
		if out := edge.NS.MustRun("ip", "-6", "addr", "show", "dev", "eth0"); !strings.Contains(out, eip+"/128") {
			t.Errorf("eth0 inside the Pod lacks %s/128:\n%s", eip, out)
		}
		c.ServeTCP6(edge.NS, "edge", 80)
		got := c.EventuallyDial(c.Client, eip, 80, "edge")
		if want := "edge " + harness.ClientIP6; got != want {
			t.Errorf("the Pod saw %q, want %q", got, want)
		}
		c.ServeTCP6(c.Client, "client-direct", 9002)
		if got := c.EventuallyDial(edge.NS, harness.ClientIP6, 9002, "client-direct"); got != "client-direct "+eip {
			t.Errorf("the client saw %q, want the ElasticIP %s as source", got, eip)
		}
	})
}

// TestIPv6ElasticIPOnIPv4OnlyPod: an IPv6 ElasticIP attached to a Pod without an IPv6
// address is an error that says so; nothing is translated (no NAT64). The webhook
// refuses the attachment when the Pod's addresses are known; made before the Pod has
// them, the attachment turns Error once they are.
func TestIPv6ElasticIPOnIPv4OnlyPod(t *testing.T) {
	c, ns := setup(t) // IPv4-only Pods
	ctx := testContext(t)
	j := c.CP.Juneau.JuneauV1alpha1()
	if _, err := j.AddressPools().Create(ctx, &v1alpha1.AddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: "ext-pool6"},
		Spec:       v1alpha1.AddressPoolSpec{AdvertiseMode: v1alpha1.AdvertiseARP, Addresses: []string{pool6}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.ExternalNetworks().Create(ctx, &v1alpha1.ExternalNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: "ext-net6"},
		Spec:       v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseARP, AddressPools: []string{"ext-pool6"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	old := c.CreatePod(harness.PodSpec{Namespace: ns, Name: "old", Node: "node-a"}) // no network yet
	manifest := `apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIP
metadata: {name: old6}
spec: {externalNetwork: ext-net6, ipFamily: IPv6}
---
apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIPAttachment
metadata: {name: old6-attach}
spec:
  elasticIPRef: {name: old6}
  targetRef: {networkInterfaceName: old.eth0}
`
	if r := c.CP.Kubectl(ctx, manifest, "apply", "-n", ns, "-f", "-"); r.Err != nil {
		t.Fatalf("%v: %s", r.Err, r.Stderr)
	}
	if err := old.Start(); err != nil {
		t.Fatal(err)
	}
	var last *v1alpha1.ElasticIPAttachment
	framework.EventuallyWithin(t, time.Minute, "old6-attach Error AddressFamilyMismatch", func(ctx context.Context) (bool, string) {
		a, err := j.ElasticIPAttachments(ns).Get(ctx, "old6-attach", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		last = a
		for _, cond := range a.Status.Conditions {
			if cond.Type == v1alpha1.ConditionReady && cond.Reason == v1alpha1.ReasonAddressFamilyMismatch {
				return a.Status.Phase == v1alpha1.AttachmentError, cond.Message
			}
		}
		return false, fmt.Sprintf("%+v", a.Status)
	})
	msg := last.Status.Conditions[0].Message
	if !containsAll(msg, `ElasticIP "old6" is IPv6`, `Pod "old"`, "no NAT64") {
		t.Errorf("message %q does not say what is wrong", msg)
	}
	if last.Status.PodIP != "" {
		t.Errorf("podIP = %q, want none", last.Status.PodIP)
	}
	r := c.CP.Kubectl(ctx, "", "get", "elasticipattachment", "-n", ns, "old6-attach")
	if r.Err != nil || !strings.Contains(r.Stdout, "Error") {
		t.Errorf("kubectl get: %v\n%s", r.Err, r.Stdout)
	}

	// Once the Pod's addresses are known, the webhook refuses such an attachment.
	refused := strings.NewReplacer("old6", "new6").Replace(manifest)
	r = c.CP.Kubectl(ctx, refused, "apply", "-n", ns, "-f", "-")
	if r.Err == nil || !containsAll(r.Stderr, "spec.targetRef.networkInterfaceName", `NetworkInterface "old.eth0" of Pod "old" has no IPv6 address`, "no NAT64") {
		t.Errorf("a second IPv6 attachment to the IPv4-only Pod: err=%v stderr=%q, want a refusal naming the NetworkInterface", r.Err, r.Stderr)
	}
}

func mustRange(t *testing.T, s string) iprange.Range {
	t.Helper()
	r, err := iprange.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
