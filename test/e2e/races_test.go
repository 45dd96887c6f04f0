package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/e2e/harness"
)

// TestSimultaneousPods: two Pods naming one ElasticIP created at the same instant (both
// pass admission, which sees neither NIC yet; the harness leaves the webhook out to make
// that instant certain): exactly one holds it and starts, the other waits Pending with
// WaitingForElasticIP naming the holder and its CNI ADD fails.
func TestSimultaneousPods(t *testing.T) {
	c, ns := setupWith(t, harness.Options{NoWebhook: true})
	createElasticIP(t, c, ns, "race-eip")
	eip := c.WaitElasticIPAvailable(ns, "race-eip")
	ann := map[string]string{v1alpha1.AnnotationElasticIP: "race-eip"}
	pods := make([]*harness.Pod, 2)
	var wg sync.WaitGroup
	for i, node := range []string{"node-a", "node-b"} {
		wg.Go(func() {
			pods[i] = c.CreatePod(harness.PodSpec{Namespace: ns, Name: "racer-" + node, Node: node, Annotations: ann})
		})
	}
	wg.Wait()
	c.WaitElasticIPUser(ns, "race-eip")
	held, err := c.CP.Juneau.JuneauV1alpha1().ElasticIPs(ns).Get(context.Background(), "race-eip", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holderNIC := held.Status.Attachment.Name
	var winner, loser *harness.Pod
	for _, p := range pods {
		if v1alpha1.NetworkInterfaceName(p.Spec.Name, "eth0") == holderNIC {
			winner = p
		} else {
			loser = p
		}
	}
	if winner == nil || loser == nil {
		t.Fatalf("holder %q is neither Pod", holderNIC)
	}
	nic := c.WaitNIC(ns, v1alpha1.NetworkInterfaceName(loser.Spec.Name, "eth0"), v1alpha1.NetworkInterfacePending, v1alpha1.ReasonWaitingForElasticIP)
	if msg := meta.FindStatusCondition(nic.Status.Conditions, v1alpha1.ConditionReady).Message; !strings.Contains(msg, holderNIC) {
		t.Errorf("loser waits with %q, want it to name %s", msg, holderNIC)
	}
	if err := winner.Start(); err != nil {
		t.Fatalf("the holder's CNI ADD: %v", err)
	}
	c.WaitElasticIPWorking(ns, "race-eip")
	if err := loser.StartWithWait(2); err == nil || !strings.Contains(err.Error(), holderNIC) {
		t.Errorf("the loser's CNI ADD: %v, want a failure naming %s", err, holderNIC)
	}
	c.ServeTCP(winner.NS, "winner", 80)
	c.EventuallyDial(c.Client, eip, 80, "winner")
}

// TestConflictSlipThrough: an attachment created between a Pod and its NIC (the race the
// webhook cannot see; here no webhook runs) makes the ElasticIP Error/Conflict, the NIC
// and the attachment Pending, and nothing is translated or delivered; deleting the
// attachment lets the NIC take the address.
func TestConflictSlipThrough(t *testing.T) {
	c, ns := setupWith(t, harness.Options{NoWebhook: true})
	ctx := testContext(t)
	createElasticIP(t, c, ns, "slip-eip")
	eip := c.WaitElasticIPAvailable(ns, "slip-eip")
	natted := c.RunPod(harness.PodSpec{Namespace: ns, Name: "natted", Node: "node-a"})
	c.ServeTCP(natted.NS, "natted", 80)
	direct := c.CreatePod(harness.PodSpec{Namespace: ns, Name: "direct", Node: "node-b",
		Annotations: map[string]string{v1alpha1.AnnotationElasticIP: "slip-eip"}})
	attach := `apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIPAttachment
metadata: {name: slip-attach}
spec:
  elasticIPRef: {name: slip-eip}
  targetRef: {networkInterfaceName: natted.eth0}
`
	if r := c.CP.Kubectl(ctx, attach, "apply", "-n", ns, "-f", "-"); r.Err != nil {
		t.Fatal(r.Err)
	}
	c.WaitElasticIPCondition(ns, "slip-eip", v1alpha1.ConditionAttached, v1alpha1.ReasonConflict)
	c.WaitNIC(ns, "direct.eth0", v1alpha1.NetworkInterfacePending, v1alpha1.ReasonWaitingForElasticIP)
	c.WaitGone("attachment Pending", func(ctx context.Context) bool {
		a, err := c.CP.Juneau.JuneauV1alpha1().ElasticIPAttachments(ns).Get(ctx, "slip-attach", metav1.GetOptions{})
		return err == nil && a.Status.Phase == v1alpha1.AttachmentPending
	})
	if err := direct.StartWithWait(1); err == nil {
		t.Error("the direct Pod started while its ElasticIP is in conflict")
	}
	if got, err := harness.Dial(c.Client, eip, 80); err == nil {
		t.Errorf("traffic to %s was delivered during the conflict: %q", eip, got)
	}

	if err := c.CP.Juneau.JuneauV1alpha1().ElasticIPAttachments(ns).Delete(ctx, "slip-attach", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitNIC(ns, "direct.eth0", v1alpha1.NetworkInterfaceReady, v1alpha1.ReasonReady)
	if err := direct.Start(); err != nil {
		t.Fatalf("the direct Pod after the conflict: %v", err)
	}
	c.ServeTCP(direct.NS, "direct", 80)
	c.EventuallyDial(c.Client, eip, 80, "direct")
}
