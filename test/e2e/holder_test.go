package e2e

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/e2e/harness"
)

// TestSameNamePodDuringElasticIPDeletion: the ElasticIP of a running Pod is deleted
// while a second Pod's NIC waits for it (so the deletion waits too), then the holder
// goes and a Pod of the same name comes back at once. Its new NetworkInterface has the
// holder's name but is another object: the deleting ElasticIP hands it nothing (before,
// matched by name, it could get the address), it is Failed, its Pod does not start, and
// deleting the Pods lets the ElasticIP go. The webhook is left out: it would refuse the
// second Pod while the first runs.
func TestSameNamePodDuringElasticIPDeletion(t *testing.T) {
	c, ns := setupWith(t, harness.Options{NoWebhook: true})
	ctx := testContext(t)
	createElasticIP(t, c, ns, "rc-eip")
	addr := c.WaitElasticIPAvailable(ns, "rc-eip")
	ann := map[string]string{v1alpha1.AnnotationElasticIP: "rc-eip"}
	first := c.RunPod(harness.PodSpec{Namespace: ns, Name: "web", Node: "node-a", Annotations: ann})
	c.ServeTCP(first.NS, "first", 80)
	c.EventuallyDial(c.Client, addr, 80, "first")
	standby := c.CreatePod(harness.PodSpec{Namespace: ns, Name: "standby", Node: "node-b", Annotations: ann})
	c.WaitNIC(ns, "standby.eth0", v1alpha1.NetworkInterfacePending, v1alpha1.ReasonWaitingForElasticIP)
	if err := c.CP.Juneau.JuneauV1alpha1().ElasticIPs(ns).Delete(ctx, "rc-eip", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitElasticIPCondition(ns, "rc-eip", v1alpha1.ConditionAllocated, v1alpha1.ReasonWaitingForNetworkInterfaces)
	c.WaitNIC(ns, "standby.eth0", v1alpha1.NetworkInterfaceFailed, v1alpha1.ReasonElasticIPDeleting)

	first.Gone()
	again := c.CreatePod(harness.PodSpec{Namespace: ns, Name: "web", Node: "node-b", Annotations: ann})
	nic := c.WaitNIC(ns, "web.eth0", v1alpha1.NetworkInterfaceFailed, v1alpha1.ReasonElasticIPDeleting)
	if nic.Spec.PodRef.UID != string(again.Object.UID) || nic.Status.Address != "" {
		t.Errorf("web.eth0 %+v %+v, want the new Pod's, without the address", nic.Spec, nic.Status)
	}
	if err := again.StartWithWait(2); err == nil {
		t.Fatal("the Pod re-created under the holder's name started with the address of an ElasticIP being deleted")
	} else if !strings.Contains(err.Error(), "being deleted") {
		t.Errorf("CNI ADD failed with %v, want it to say the ElasticIP is being deleted", err)
	}
	eip, err := c.CP.Juneau.JuneauV1alpha1().ElasticIPs(ns).Get(ctx, "rc-eip", metav1.GetOptions{})
	if err != nil || eip.Status.Attachment != nil {
		t.Fatalf("the deleting ElasticIP records %+v (%v), want no user", eip.Status.Attachment, err)
	}
	c.WaitGone("no advertisement for the new NIC", func(ctx context.Context) bool {
		list, err := c.CP.Juneau.JuneauV1alpha1().ARPAdvertisements().List(ctx, metav1.ListOptions{
			LabelSelector: v1alpha1.LabelOwnerUID + "=" + string(eip.UID)})
		return err == nil && len(list.Items) == 0
	})

	again.Gone()
	standby.Gone()
	c.WaitGone("the ElasticIP and its address released", func(ctx context.Context) bool {
		_, e1 := c.CP.Juneau.JuneauV1alpha1().ElasticIPs(ns).Get(ctx, "rc-eip", metav1.GetOptions{})
		_, e2 := c.CP.Juneau.JuneauV1alpha1().AllocationClaims().Get(ctx, addr, metav1.GetOptions{})
		return e1 != nil && e2 != nil
	})
}

// TestAnnotationAddedToRunningPod: adding the elastic-ip annotation to a running Pod is
// refused by the webhook, saying the Pod must be re-created.
func TestAnnotationAddedToRunningPod(t *testing.T) {
	c, ns := setup(t)
	ctx := testContext(t)
	createElasticIP(t, c, ns, "late-eip")
	c.RunPod(harness.PodSpec{Namespace: ns, Name: "running", Node: "node-a"})
	r := c.CP.Kubectl(ctx, "", "annotate", "-n", ns, "pod", "running", v1alpha1.AnnotationElasticIP+"=late-eip")
	if r.Err == nil || !strings.Contains(r.Err.Error(), "cannot be added to an existing Pod") ||
		!strings.Contains(r.Err.Error(), "delete the Pod and create it again") {
		t.Fatalf("annotating a running Pod: %v, want a refusal saying to re-create the Pod", r.Err)
	}
}

// TestAnnotationAddedPastTheWebhook: the same annotation added while no webhook runs
// never makes the ElasticIP Attached to the running Pod, which was never plumbed with it
// (before, it did, and every other user of the ElasticIP was blocked): its eth0 stays as
// its network was set up, and a Pod created with the annotation gets the address.
func TestAnnotationAddedPastTheWebhook(t *testing.T) {
	c, ns := setupWith(t, harness.Options{NoWebhook: true})
	ctx := testContext(t)
	createElasticIP(t, c, ns, "late-eip")
	addr := c.WaitElasticIPAvailable(ns, "late-eip")
	c.RunPod(harness.PodSpec{Namespace: ns, Name: "running", Node: "node-a"})
	c.WaitNIC(ns, "running.eth0", v1alpha1.NetworkInterfaceReady, v1alpha1.ReasonReady)
	if r := c.CP.Kubectl(ctx, "", "annotate", "-n", ns, "pod", "running", v1alpha1.AnnotationElasticIP+"=late-eip"); r.Err != nil {
		t.Fatal(r.Err)
	}
	c.WaitGone("a Warning on the Pod about the annotation", func(ctx context.Context) bool {
		evs, err := c.CP.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=running"})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Reason == v1alpha1.ReasonPodNetworkAlreadySetUp && strings.Contains(e.Message, `"running.eth0"`) {
				return true
			}
		}
		return false
	})
	fresh := c.RunPod(harness.PodSpec{Namespace: ns, Name: "fresh", Node: "node-b",
		Annotations: map[string]string{v1alpha1.AnnotationElasticIP: "late-eip"}})
	c.ServeTCP(fresh.NS, "fresh", 80)
	c.EventuallyDial(c.Client, addr, 80, "fresh")
	eip, err := c.CP.Juneau.JuneauV1alpha1().ElasticIPs(ns).Get(ctx, "late-eip", metav1.GetOptions{})
	if err != nil || eip.Status.Attachment == nil || eip.Status.Attachment.Name != "fresh.eth0" {
		t.Errorf("ElasticIP holder %+v %v, want fresh.eth0", eip.Status.Attachment, err)
	}
	nic, err := c.CP.Juneau.JuneauV1alpha1().NetworkInterfaces(ns).Get(ctx, "running.eth0", metav1.GetOptions{})
	if err != nil || nic.Spec.ElasticIP != "" || !meta.IsStatusConditionTrue(nic.Status.Conditions, v1alpha1.ConditionReady) {
		t.Errorf("running.eth0 %+v %v, want it unchanged", nic, err)
	}
}
