package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/e2e/harness"
)

// advertised is an ElasticIP used by NAT from a Pod on one Node, as the client sees it.
type advertised struct {
	ns, eip, pod, node string
	addr               string
	uid                string
}

// TestAdvertisementNames: ElasticIPs "x" in namespace "<ns>-<s>" and "<s>-x" in "<ns>"
// share the name eip-<ns>-<s>-x, and a third one's name makes eip-<namespace>-<name> 260
// characters long. Before, the first two deleted each other's ARPAdvertisement forever
// (ARP answers came and went) and the third never got one (its status stopped
// updating). Now each has its own advertisement, found by its owner's UID; all three
// are answered by their own Node for a minute, during which not one advertisement is
// written (a watch counts every event).
func TestAdvertisementNames(t *testing.T) {
	c, ns := setup(t)
	ctx := testContext(t)
	sub := c.CP.NewNamespace(t, ns) // ns + "-" + a suffix
	suffix := strings.TrimPrefix(sub, ns+"-")
	long := strings.Repeat("l", 260-len(advertisement.PreferredName(ns, "")))
	uses := []*advertised{
		{ns: ns, eip: suffix + "-x", pod: "first", node: "node-a"},
		{ns: sub, eip: "x", pod: "second", node: "node-b"},
		{ns: ns, eip: long, pod: "long", node: "node-b"},
	}
	if a, b := advertisement.PreferredName(uses[0].ns, uses[0].eip), advertisement.PreferredName(uses[1].ns, uses[1].eip); a != b {
		t.Fatalf("the two ElasticIPs were meant to share %q (got %q)", a, b)
	}
	if n := len(advertisement.PreferredName(ns, long)); n != 260 {
		t.Fatalf("the long preferred name has %d characters", n)
	}
	for i, u := range uses {
		createElasticIP(t, c, u.ns, u.eip)
		p := c.RunPod(harness.PodSpec{Namespace: u.ns, Name: u.pod, Node: u.node})
		c.ServeTCP(p.NS, u.pod, 80)
		attach := fmt.Sprintf(`apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIPAttachment
metadata: {name: att-%d}
spec:
  elasticIPRef: {name: %s}
  targetRef: {networkInterfaceName: %s.eth0}
`, i, u.eip, u.pod)
		if r := c.CP.Kubectl(ctx, attach, "apply", "-n", u.ns, "-f", "-"); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	for _, u := range uses {
		u.addr = c.WaitElasticIPWorking(u.ns, u.eip)
		eip, err := c.CP.Juneau.JuneauV1alpha1().ElasticIPs(u.ns).Get(ctx, u.eip, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u.uid = string(eip.UID)
	}

	// Each one's advertisement, found through its owner, is answered on its Node.
	names := map[string]bool{}
	c.WaitGone("every advertisement answered on its Node", func(ctx context.Context) bool {
		clear(names)
		for _, u := range uses {
			ad := ownAdvertisement(ctx, c, u)
			if ad == nil || ad.Spec.NodeName != u.node || ad.Spec.Address != u.addr ||
				!meta.IsStatusConditionTrue(ad.Status.Conditions, v1alpha1.ConditionAnswering) {
				return false
			}
			names[ad.Name] = true
		}
		return len(names) == len(uses)
	})
	for name := range names {
		if len(name) > advertisement.MaxNameLength {
			t.Errorf("advertisement name %q has %d characters", name, len(name))
		}
	}
	if !names[advertisement.PreferredName(ns, suffix+"-x")] {
		t.Errorf("advertisements %v: one of the colliding ElasticIPs should have the name users look up", names)
	}
	if !names[advertisement.HashedName(ns, long)] {
		t.Errorf("advertisements %v: the long name's should be %s", names, advertisement.HashedName(ns, long))
	}

	// A minute of steady state: every address answered by its own Node, and no
	// advertisement written at all.
	list, err := c.CP.Juneau.JuneauV1alpha1().ARPAdvertisements().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.CP.Juneau.JuneauV1alpha1().ARPAdvertisements().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	events := map[watch.EventType]int{}
	var seen []string
	count := func() {
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("the watch ended early")
				}
				if ad, ok := ev.Object.(*v1alpha1.ARPAdvertisement); ok && names[ad.Name] {
					events[ev.Type]++
					seen = append(seen, fmt.Sprintf("%s %s node=%s", ev.Type, ad.Name, ad.Spec.NodeName))
				}
			default:
				return
			}
		}
	}
	rounds := 0
	_ = wait.PollUntilContextTimeout(ctx, 2*time.Second, time.Minute, true, func(context.Context) (bool, error) {
		count()
		for _, u := range uses {
			answeredBy(t, c, u)
		}
		rounds++
		return false, nil // the whole minute
	})
	count()
	if len(seen) > 0 {
		t.Errorf("advertisements were written %d times in a minute of steady state (%v): %s", len(seen), events, strings.Join(seen, "; "))
	}
	if rounds < 10 {
		t.Errorf("only %d rounds of checks in the minute", rounds)
	}
	for _, u := range uses {
		eip, err := c.CP.Juneau.JuneauV1alpha1().ElasticIPs(u.ns).Get(ctx, u.eip, metav1.GetOptions{})
		cond := meta.FindStatusCondition(eip.Status.Conditions, v1alpha1.ConditionAttached)
		if err != nil || cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != v1alpha1.ReasonAttached {
			t.Errorf("ElasticIP %s/%.20s...: Attached %+v %v, want True/Attached in steady state", u.ns, u.eip, cond, err)
		}
	}
}

// ownAdvertisement finds u's advertisement by its owner label, as the controller does.
func ownAdvertisement(ctx context.Context, c *harness.Cluster, u *advertised) *v1alpha1.ARPAdvertisement {
	list, err := c.CP.Juneau.JuneauV1alpha1().ARPAdvertisements().List(ctx, metav1.ListOptions{
		LabelSelector: v1alpha1.LabelOwnerUID + "=" + u.uid})
	if err != nil || len(list.Items) != 1 {
		return nil
	}
	return &list.Items[0]
}

// answeredBy checks that the external client reaches u's Pod at u's address, having
// resolved the address afresh to the MAC of u's Node.
func answeredBy(t *testing.T, c *harness.Cluster, u *advertised) {
	t.Helper()
	c.Client.FlushNeighbour("eth0", u.addr)
	got, err := harness.Dial(c.Client, u.addr, 80)
	if err != nil || got != u.pod+" "+harness.ClientIP {
		t.Errorf("%s (%s): %q %v", u.addr, u.pod, got, err)
		return
	}
	want := c.Nodes[u.node].NS.MAC("ext0").String()
	if mac, ok := c.Client.Neighbour("eth0", u.addr); !ok || mac.String() != want {
		t.Errorf("%s resolved to %v, want %s's %s", u.addr, mac, u.node, want)
	}
}
