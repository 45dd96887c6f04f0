package controller

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/annotations"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/framework"
)

// createPod creates a Pod bound to node (there is no scheduler or kubelet) and, when
// podIP is set, writes it to the Pod's status as a kubelet would. A Pod whose
// annotations ask for direct NICs gets its IP only once they exist, as with the CNI
// plugin, which sets up no Pod network before its direct NICs are there.
func createPod(t *testing.T, cp *framework.ControlPlane, ns, name, node, podIP string, ann map[string]string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod, err := cp.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}},
			TerminationGracePeriodSeconds: ptr.To[int64](30)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	direct, _ := annotations.ParseDirect(ann)
	for _, d := range direct {
		nicName := v1alpha1.NetworkInterfaceName(name, d.Interface)
		framework.Eventually(t, "NetworkInterface "+nicName+" before the Pod's network", func(context.Context) (bool, string) {
			nic := getNIC(cp, ns, nicName)
			return nic != nil && nic.Spec.PodRef.UID == string(pod.UID), nicString(nic)
		})
	}
	if podIP != "" {
		pod.Status.Phase = corev1.PodRunning
		pod.Status.PodIP = podIP
		pod.Status.PodIPs = []corev1.PodIP{{IP: podIP}}
		if pod, err = cp.Kube.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return pod
}

// forceDeletePod removes a Pod at once, as a kubelet does once its containers are gone.
func forceDeletePod(t *testing.T, cp *framework.ControlPlane, ns, name string) {
	t.Helper()
	if err := cp.Kube.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
}

func attach(t *testing.T, cp *framework.ControlPlane, ns, name, eip, nic string) {
	t.Helper()
	if _, err := cp.Juneau.JuneauV1alpha1().ElasticIPAttachments(ns).Create(context.Background(), &v1alpha1.ElasticIPAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ElasticIPAttachmentSpec{ElasticIPRef: v1alpha1.ElasticIPReference{Name: eip},
			TargetRef: v1alpha1.AttachmentTarget{NetworkInterfaceName: nic}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func getNIC(cp *framework.ControlPlane, ns, name string) *v1alpha1.NetworkInterface {
	nic, err := cp.Juneau.JuneauV1alpha1().NetworkInterfaces(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return nic
}

func nicString(nic *v1alpha1.NetworkInterface) string {
	if nic == nil {
		return "<none>"
	}
	c := meta.FindStatusCondition(nic.Status.Conditions, v1alpha1.ConditionReady)
	if c == nil {
		return string(nic.Status.Phase)
	}
	return string(nic.Status.Phase) + " " + nic.Status.Address + " " + c.Reason + ": " + c.Message
}

func waitNIC(t *testing.T, cp *framework.ControlPlane, ns, name string, phase v1alpha1.NetworkInterfacePhase, reason string) *v1alpha1.NetworkInterface {
	t.Helper()
	var nic *v1alpha1.NetworkInterface
	framework.Eventually(t, "NetworkInterface "+name+" "+string(phase)+"/"+reason, func(ctx context.Context) (bool, string) {
		nic = getNIC(cp, ns, name)
		if nic == nil {
			return false, nicString(nic)
		}
		c := meta.FindStatusCondition(nic.Status.Conditions, v1alpha1.ConditionReady)
		return nic.Status.Phase == phase && c != nil && c.Reason == reason, nicString(nic)
	})
	return nic
}

func getAdvert(cp *framework.ControlPlane, name string) *v1alpha1.ARPAdvertisement {
	ad, err := cp.Juneau.JuneauV1alpha1().ARPAdvertisements().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return ad
}

var spaces = regexp.MustCompile(`\s+`)

// TestReadmeExample: pool 10.225.51.0/24 (arp) → ext-net → nginx-eip attached by NAT to
// nginx.eth0 and web-eip carried directly by web.eth0, as kubectl shows them (README.md).
func TestReadmeExample(t *testing.T) {
	cp := framework.Shared(t)
	startController(t, cp, "controller")
	ns := cp.NewNamespace(t, "scenario")
	ctx := testContext(t, time.Minute)
	network(t, cp, "scenario-net", v1alpha1.AdvertiseARP, "10.225.51.0/24")

	createEIP(t, cp, ns, "nginx-eip", "scenario-net", "10.225.51.5")
	createEIP(t, cp, ns, "web-eip", "scenario-net", "10.225.51.6")
	createPod(t, cp, ns, "nginx", "node-a", "10.244.1.5", nil)
	createPod(t, cp, ns, "web", "node-b", "10.244.2.6", map[string]string{v1alpha1.AnnotationElasticIP: "web-eip"})
	attach(t, cp, ns, "nginx-eip-attach", "nginx-eip", "nginx.eth0")

	// Used, but no Node answers ARP for the address yet: kubectl get says ATTACHED False.
	eip := waitEIP(t, cp, ns, "nginx-eip", "Attached, not answered", phaseReason(v1alpha1.ElasticIPAttached, v1alpha1.ConditionAttached, v1alpha1.ReasonNotAnswering))
	if msg := condition(eip, v1alpha1.ConditionAttached).Message; !strings.Contains(msg, `Node "node-a" does not answer ARP for "10.225.51.5" yet`) {
		t.Errorf("Attached message %q", msg)
	}
	r := cp.Kubectl(ctx, "", "get", "elasticip", "-n", ns, "nginx-eip", "--no-headers")
	if got := spaces.ReplaceAllString(strings.TrimSpace(r.Stdout), " "); r.Err != nil || got != "nginx-eip scenario-net 10.225.51.5 ElasticIPAttachment nginx-eip-attach Attached True False" {
		t.Errorf("kubectl get elasticip before any Node answers: %q %v", got, r.Err)
	}
	answerARP(t, cp)
	waitEIP(t, cp, ns, "nginx-eip", "Attached", phaseReason(v1alpha1.ElasticIPAttached, v1alpha1.ConditionAttached, v1alpha1.ReasonAttached))
	waitEIP(t, cp, ns, "web-eip", "Attached", phaseReason(v1alpha1.ElasticIPAttached, v1alpha1.ConditionAttached, v1alpha1.ReasonAttached))
	web := waitNIC(t, cp, ns, "web.eth0", v1alpha1.NetworkInterfaceReady, v1alpha1.ReasonReady)
	if web.Status.Address != "10.225.51.6/32" || len(web.Status.Routes) != 1 || web.Status.Routes[0].Gateway != v1alpha1.DirectGateway {
		t.Errorf("web.eth0 status = %+v", web.Status)
	}

	r = cp.Kubectl(ctx, "", "get", "elasticip", "-n", ns, "--sort-by=.metadata.name")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	want := []string{
		"NAME EXTERNALNETWORK ADDRESS ATTACHMENTKIND ATTACHMENT PHASE ALLOCATED ATTACHED",
		"nginx-eip scenario-net 10.225.51.5 ElasticIPAttachment nginx-eip-attach Attached True True",
		"web-eip scenario-net 10.225.51.6 NetworkInterface web.eth0 Attached True True",
	}
	for i := range want {
		if i >= len(lines) || spaces.ReplaceAllString(lines[i], " ") != want[i] {
			t.Errorf("kubectl get elasticip:\n%s\nwant line %d %q", r.Stdout, i, want[i])
		}
	}
	framework.Eventually(t, "attachment Attached", func(ctx context.Context) (bool, string) {
		a, err := cp.Juneau.JuneauV1alpha1().ElasticIPAttachments(ns).Get(ctx, "nginx-eip-attach", metav1.GetOptions{})
		return err == nil && a.Status.Phase == v1alpha1.AttachmentAttached && a.Status.PodIP == "10.244.1.5" && a.Status.NodeName == "node-a" && a.Status.ElasticIP == "10.225.51.5", ""
	})

	for eip, node := range map[string]string{"nginx-eip": "node-a", "web-eip": "node-b"} {
		name := advertisement.PreferredName(ns, eip)
		framework.Eventually(t, "advertisement "+name, func(context.Context) (bool, string) {
			ad := getAdvert(cp, name)
			return ad != nil && ad.Spec.NodeName == node, ""
		})
	}
	// ANSWERING is the Answering condition the agent of the Node writes (answerARP here).
	r = cp.Kubectl(ctx, "", "get", "arpadvertisement", advertisement.PreferredName(ns, "nginx-eip"))
	if got := spaces.ReplaceAllString(r.Stdout, " "); r.Err != nil || !strings.HasPrefix(got, "NAME EXTERNALNETWORK ADDRESS NODE ANSWERING AGE ") ||
		!strings.Contains(got, "scenario-net 10.225.51.5 node-a True ") {
		t.Errorf("kubectl get arpadvertisement: %q %v", r.Stdout, r.Err)
	}
	r = cp.Kubectl(ctx, "", "describe", "elasticip", "-n", ns, "web-eip")
	if r.Err != nil || !strings.Contains(r.Stdout, `used by NetworkInterface "web.eth0"`) {
		t.Errorf("describe: %q %v", r.Stdout, r.Err)
	}
}

// TestConflictAndResolution: an attachment slipping in beside a direct NIC is a Conflict
// (ElasticIP Error, NIC and attachment Pending, no advertisement); deleting either side
// lets the other take the address at once.
func TestConflictAndResolution(t *testing.T) {
	cp := framework.Shared(t)
	startController(t, cp, "controller")
	ns := cp.NewNamespace(t, "conflict")
	answerARP(t, cp)
	network(t, cp, "conflict-net", v1alpha1.AdvertiseARP, "10.225.52.0/24")
	createEIP(t, cp, ns, "gw", "conflict-net", "")
	createPod(t, cp, ns, "direct", "node-a", "10.244.1.7", map[string]string{v1alpha1.AnnotationElasticIP: "gw"})
	createPod(t, cp, ns, "natted", "node-b", "10.244.2.7", nil)
	waitNIC(t, cp, ns, "direct.eth0", v1alpha1.NetworkInterfaceReady, v1alpha1.ReasonReady)

	attach(t, cp, ns, "gw-attach", "gw", "natted.eth0")
	eip := waitEIP(t, cp, ns, "gw", "Error/Conflict", phaseReason(v1alpha1.ElasticIPError, v1alpha1.ConditionAttached, v1alpha1.ReasonConflict))
	msg := condition(eip, v1alpha1.ConditionAttached).Message
	if !strings.Contains(msg, `"gw-attach"`) || !strings.Contains(msg, `"direct.eth0"`) {
		t.Errorf("conflict message %q does not name both", msg)
	}
	nic := waitNIC(t, cp, ns, "direct.eth0", v1alpha1.NetworkInterfacePending, v1alpha1.ReasonWaitingForElasticIP)
	if nic.Status.Address != "" || !strings.Contains(meta.FindStatusCondition(nic.Status.Conditions, v1alpha1.ConditionReady).Message, "gw-attach") {
		t.Errorf("losing NIC status = %s", nicString(nic))
	}
	framework.Eventually(t, "attachment Pending", func(ctx context.Context) (bool, string) {
		a, err := cp.Juneau.JuneauV1alpha1().ElasticIPAttachments(ns).Get(ctx, "gw-attach", metav1.GetOptions{})
		return err == nil && a.Status.Phase == v1alpha1.AttachmentPending, ""
	})
	framework.Eventually(t, "no advertisement in conflict", func(context.Context) (bool, string) {
		return getAdvert(cp, advertisement.PreferredName(ns, "gw")) == nil, "advertisement still there"
	})

	// Deleting the attachment hands the address to the NIC.
	if err := cp.Juneau.JuneauV1alpha1().ElasticIPAttachments(ns).Delete(context.Background(), "gw-attach", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eip = waitEIP(t, cp, ns, "gw", "Attached to the NIC", phaseReason(v1alpha1.ElasticIPAttached, v1alpha1.ConditionAttached, v1alpha1.ReasonAttached))
	if eip.Status.Attachment == nil || eip.Status.Attachment.Name != "direct.eth0" {
		t.Errorf("holder = %v", eip.Status.Attachment)
	}
	waitNIC(t, cp, ns, "direct.eth0", v1alpha1.NetworkInterfaceReady, v1alpha1.ReasonReady)

	// Conflict again, then the NIC's Pod goes: the attachment takes the address.
	attach(t, cp, ns, "gw-attach", "gw", "natted.eth0")
	waitEIP(t, cp, ns, "gw", "Error/Conflict", phaseReason(v1alpha1.ElasticIPError, v1alpha1.ConditionAttached, v1alpha1.ReasonConflict))
	forceDeletePod(t, cp, ns, "direct")
	eip = waitEIP(t, cp, ns, "gw", "Attached to the attachment", phaseReason(v1alpha1.ElasticIPAttached, v1alpha1.ConditionAttached, v1alpha1.ReasonAttached))
	if eip.Status.Attachment == nil || eip.Status.Attachment.Kind != v1alpha1.AttachmentKindElasticIPAttachment {
		t.Errorf("holder = %v", eip.Status.Attachment)
	}
	framework.Eventually(t, "advertisement on node-b", func(context.Context) (bool, string) {
		ad := getAdvert(cp, advertisement.PreferredName(ns, "gw"))
		return ad != nil && ad.Spec.NodeName == "node-b", ""
	})
}

// TestHandoverAndMove: the holder NIC is being deleted (held by a finalizer): it keeps
// the address; a new Pod's NIC waits. Once it is gone the new NIC takes the address on
// another Node, and the advertisement moves in place (same UID).
func TestHandoverAndMove(t *testing.T) {
	cp := framework.Shared(t)
	startController(t, cp, "controller")
	ns := cp.NewNamespace(t, "handover")
	ctx := context.Background()
	network(t, cp, "handover-net", v1alpha1.AdvertiseARP, "10.225.53.0/24")
	createEIP(t, cp, ns, "vm-eip", "handover-net", "")
	createPod(t, cp, ns, "old", "node-a", "10.244.1.8", map[string]string{v1alpha1.AnnotationElasticIP: "vm-eip"})
	waitNIC(t, cp, ns, "old.eth0", v1alpha1.NetworkInterfaceReady, v1alpha1.ReasonReady)
	advertName := advertisement.PreferredName(ns, "vm-eip")
	var uid types.UID
	framework.Eventually(t, "advertisement on node-a", func(context.Context) (bool, string) {
		ad := getAdvert(cp, advertName)
		if ad != nil && ad.Spec.NodeName == "node-a" {
			uid = ad.UID
			return true, ""
		}
		return false, ""
	})

	// Hold old.eth0 in deletion with a finalizer of the test's own.
	const hold = "test.juneau.loutres.me/hold"
	patch := []byte(`{"metadata":{"finalizers":["` + hold + `"]}}`)
	if _, err := cp.Juneau.JuneauV1alpha1().NetworkInterfaces(ns).Patch(ctx, "old.eth0", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	forceDeletePod(t, cp, ns, "old")
	createPod(t, cp, ns, "new", "node-b", "10.244.2.8", map[string]string{v1alpha1.AnnotationElasticIP: "vm-eip"})
	nic := waitNIC(t, cp, ns, "new.eth0", v1alpha1.NetworkInterfacePending, v1alpha1.ReasonWaitingForElasticIP)
	if msg := meta.FindStatusCondition(nic.Status.Conditions, v1alpha1.ConditionReady).Message; !strings.Contains(msg, `"old.eth0"`) {
		t.Errorf("waiting message %q does not name the holder", msg)
	}
	eip := waitEIP(t, cp, ns, "vm-eip", "still held by the deleting NIC", func(e *v1alpha1.ElasticIP) bool {
		return e.Status.Attachment != nil && e.Status.Attachment.Name == "old.eth0"
	})
	if getNIC(cp, ns, "old.eth0").DeletionTimestamp == nil {
		t.Fatal("old.eth0 is not being deleted")
	}

	// The holder goes away: the new NIC takes the address and the advertisement moves.
	if _, err := cp.Juneau.JuneauV1alpha1().NetworkInterfaces(ns).Patch(ctx, "old.eth0", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eip = waitEIP(t, cp, ns, "vm-eip", "held by new.eth0", func(e *v1alpha1.ElasticIP) bool {
		return e.Status.Attachment != nil && e.Status.Attachment.Name == "new.eth0" && e.Status.Phase == v1alpha1.ElasticIPAttached
	})
	waitNIC(t, cp, ns, "new.eth0", v1alpha1.NetworkInterfaceReady, v1alpha1.ReasonReady)
	framework.Eventually(t, "advertisement moved to node-b", func(context.Context) (bool, string) {
		ad := getAdvert(cp, advertName)
		return ad != nil && ad.Spec.NodeName == "node-b", ""
	})
	if ad := getAdvert(cp, advertName); ad.UID != uid {
		t.Errorf("advertisement UID changed: %s → %s (want a move in place)", uid, ad.UID)
	}
	_ = eip
}

// TestWaitingForHandover: with no recorded holder (after an Error), a deleting NIC blocks
// everyone with WaitingForHandover until it is gone.
func TestWaitingForHandover(t *testing.T) {
	cp := framework.Shared(t)
	startController(t, cp, "controller")
	ns := cp.NewNamespace(t, "waiting")
	ctx := context.Background()
	network(t, cp, "waiting-net", v1alpha1.AdvertiseARP, "10.225.54.0/24")
	createEIP(t, cp, ns, "e", "waiting-net", "")
	createPod(t, cp, ns, "a", "node-a", "10.244.1.9", map[string]string{v1alpha1.AnnotationElasticIP: "e"})
	createPod(t, cp, ns, "n", "node-b", "10.244.2.9", nil)
	waitNIC(t, cp, ns, "a.eth0", v1alpha1.NetworkInterfaceReady, v1alpha1.ReasonReady)
	// A conflict erases the record of the holder.
	attach(t, cp, ns, "e-attach", "e", "n.eth0")
	waitEIP(t, cp, ns, "e", "Error/Conflict", phaseReason(v1alpha1.ElasticIPError, v1alpha1.ConditionAttached, v1alpha1.ReasonConflict))
	const hold = "test.juneau.loutres.me/hold"
	if _, err := cp.Juneau.JuneauV1alpha1().NetworkInterfaces(ns).Patch(ctx, "a.eth0", types.MergePatchType, []byte(`{"metadata":{"finalizers":["`+hold+`"]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	forceDeletePod(t, cp, ns, "a")
	// The NetworkInterface controller deletes a.eth0 once it sees its Pod gone. Until
	// then a.eth0 is a live NIC, and were the attachment deleted now, the ElasticIP
	// would rightly pick it (the oldest NIC) and keep it while it is deleted: wait.
	framework.Eventually(t, "a.eth0 being deleted", func(context.Context) (bool, string) {
		nic := getNIC(cp, ns, "a.eth0")
		return nic != nil && nic.DeletionTimestamp != nil, nicString(getNIC(cp, ns, "a.eth0"))
	})
	createPod(t, cp, ns, "b", "node-b", "10.244.2.10", map[string]string{v1alpha1.AnnotationElasticIP: "e"})
	// The ElasticIP controller names b.eth0 in its conflict only once its NIC cache holds
	// b.eth0, so that cache also holds the earlier deletion of a.eth0 (one watch delivers
	// a kind's events in order): the next decision sees a.eth0 as deleting.
	waitEIP(t, cp, ns, "e", "Error/Conflict naming b.eth0", func(e *v1alpha1.ElasticIP) bool {
		c := condition(e, v1alpha1.ConditionAttached)
		return c.Reason == v1alpha1.ReasonConflict && strings.Contains(c.Message, `"b.eth0"`)
	})
	if err := cp.Juneau.JuneauV1alpha1().ElasticIPAttachments(ns).Delete(ctx, "e-attach", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eip := waitEIP(t, cp, ns, "e", "Available/WaitingForHandover", phaseReason(v1alpha1.ElasticIPAvailable, v1alpha1.ConditionAttached, v1alpha1.ReasonWaitingForHandover))
	if msg := condition(eip, v1alpha1.ConditionAttached).Message; !strings.Contains(msg, `"a.eth0"`) {
		t.Errorf("message %q does not name the deleting NIC", msg)
	}
	waitNIC(t, cp, ns, "b.eth0", v1alpha1.NetworkInterfacePending, v1alpha1.ReasonWaitingForElasticIP)
	if _, err := cp.Juneau.JuneauV1alpha1().NetworkInterfaces(ns).Patch(ctx, "a.eth0", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNIC(t, cp, ns, "b.eth0", v1alpha1.NetworkInterfaceReady, v1alpha1.ReasonReady)
}

// TestDeletionWaitsForNICs: a deleting ElasticIP a Pod's NIC carries keeps its claim and
// advertisement (WaitingForNetworkInterfaces) until the Pod is gone.
func TestDeletionWaitsForNICs(t *testing.T) {
	cp := framework.Shared(t)
	startController(t, cp, "controller")
	ns := cp.NewNamespace(t, "deletion")
	answerARP(t, cp)
	ctx := context.Background()
	network(t, cp, "deletion-net", v1alpha1.AdvertiseARP, "10.225.55.0/24")
	createEIP(t, cp, ns, "e", "deletion-net", "")
	createPod(t, cp, ns, "p", "node-a", "10.244.1.11", map[string]string{v1alpha1.AnnotationElasticIP: "e"})
	eip := waitEIP(t, cp, ns, "e", "Attached", phaseReason(v1alpha1.ElasticIPAttached, v1alpha1.ConditionAttached, v1alpha1.ReasonAttached))
	if err := cp.Juneau.JuneauV1alpha1().ElasticIPs(ns).Delete(ctx, "e", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eip = waitEIP(t, cp, ns, "e", "WaitingForNetworkInterfaces", func(e *v1alpha1.ElasticIP) bool {
		return condition(e, v1alpha1.ConditionAllocated).Reason == v1alpha1.ReasonWaitingForNetworkInterfaces
	})
	if msg := condition(eip, v1alpha1.ConditionAllocated).Message; !strings.Contains(msg, `"p.eth0"`) {
		t.Errorf("message %q does not list the NIC", msg)
	}
	if claims := claimsOf(t, cp, ns); len(claims) != 1 {
		t.Errorf("claims = %v, want the reservation kept", sortedKeys(claims))
	}
	if getAdvert(cp, advertisement.PreferredName(ns, "e")) == nil {
		t.Error("advertisement deleted while the Pod still carries the address")
	}
	waitNIC(t, cp, ns, "p.eth0", v1alpha1.NetworkInterfaceReady, v1alpha1.ReasonReady)

	forceDeletePod(t, cp, ns, "p")
	framework.Eventually(t, "everything released", func(ctx context.Context) (bool, string) {
		_, err := cp.Juneau.JuneauV1alpha1().ElasticIPs(ns).Get(ctx, "e", metav1.GetOptions{})
		return err != nil && len(claimsOf(t, cp, ns)) == 0 && getAdvert(cp, advertisement.PreferredName(ns, "e")) == nil, ""
	})
}
