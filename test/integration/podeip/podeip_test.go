package podeip

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/status"
	"github.com/loutres/juneau/test/framework"
)

// withEIP asks for an automatic ElasticIP from network, plus more annotations.
func withEIP(network string, kv ...string) map[string]string {
	m := map[string]string{v1alpha1.AnnotationPodWithEIP: "true", v1alpha1.AnnotationEIPExternalNetwork: network}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// TestFollow: pod-with-eip gives a Deployment's Pod a labelled ElasticIP (bandwidth
// from the annotation) and an attachment that becomes Attached; the address is written
// back. Deleting the Pod releases the ElasticIP and its AllocationClaim.
func TestFollow(t *testing.T) {
	cp := framework.Shared(t)
	startController(t, cp, "controller")
	ns := cp.NewNamespace(t, "follow")
	net := network(t, cp, "follow", false, "10.225.51.10-10.225.51.19")
	replicaSet := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d8f", UID: "rs-uid", Controller: ptr.To(true)}
	createPod(t, cp, ns, podSpec("web", withEIP(net, v1alpha1.AnnotationEIPBandwidth, "50"), replicaSet), "10.244.1.10")

	eip := waitAllocated(t, cp, ns, "web", "web")
	if eip.Labels[v1alpha1.LabelPod] != "web" || eip.Spec.ExternalNetwork != net ||
		eip.Spec.BandwidthMbps == nil || *eip.Spec.BandwidthMbps != 50 ||
		eip.Annotations[v1alpha1.AnnotationReleaseStrategy] != v1alpha1.ReleaseFollow {
		t.Errorf("ElasticIP = %s, bandwidth %v", eipString(eip), eip.Spec.BandwidthMbps)
	}
	if !strings.HasPrefix(eip.Status.Address, "10.225.51.1") || !claimed(cp, eip.Status.Address) {
		t.Errorf("address %q not reserved from the pool", eip.Status.Address)
	}
	for _, reason := range []string{v1alpha1.EventElasticIPCreated, v1alpha1.EventAttachmentCreated} {
		waitEvent(t, cp, ns, "Pod", "web", reason)
	}
	if msg := waitEvent(t, cp, ns, "Pod", "web", v1alpha1.EventAllocated); !strings.Contains(msg, eip.Status.Address) {
		t.Errorf("allocation Event %q does not give the address", msg)
	}

	forceDeletePod(t, cp, ns, "web")
	waitGone(t, "attachment", func() bool { _, ok := getAttachment(cp, ns, "web"); return ok })
	waitGone(t, "ElasticIP", func() bool { _, ok := getEIP(cp, ns, "web"); return ok })
	waitGone(t, "AllocationClaim "+eip.Status.Address, func() bool { return claimed(cp, eip.Status.Address) })
	waitEvent(t, cp, ns, "ElasticIP", "web", v1alpha1.EventReleased)
}

// TestDelayedReleaseAcrossRestart: with a 3s strategy the ElasticIP outlives its Pod by
// 3s, also when the controller restarts in between: the gone-since mark is in the API.
func TestDelayedReleaseAcrossRestart(t *testing.T) {
	cp := framework.Shared(t)
	ctrl := startController(t, cp, "controller-1")
	ns := cp.NewNamespace(t, "delayed")
	net := network(t, cp, "delayed", false, "10.225.51.20-10.225.51.29")
	createPod(t, cp, ns, podSpec("timed", withEIP(net, v1alpha1.AnnotationReleaseStrategy, "3s")), "10.244.1.20")
	eip := waitAllocated(t, cp, ns, "timed", "timed")

	forceDeletePod(t, cp, ns, "timed")
	var mark time.Time
	framework.Eventually(t, "gone-since mark", func(context.Context) (bool, string) {
		e, ok := getEIP(cp, ns, "timed")
		if !ok {
			return false, eipString(eip)
		}
		eip = e
		var err error
		mark, err = time.Parse(time.RFC3339, e.Annotations[v1alpha1.AnnotationPodGoneSince])
		return err == nil, eipString(eip)
	})
	waitGone(t, "attachment", func() bool { _, ok := getAttachment(cp, ns, "timed"); return ok })

	ctrl.Stop()
	if e, ok := getEIP(cp, ns, "timed"); !ok || e.DeletionTimestamp != nil {
		t.Fatalf("released before the delay: %s", eipString(e))
	}
	startController(t, cp, "controller-2")

	// Released by the new controller, not before the mark plus the delay, and on the
	// recorded mark: the restart does not start the delay again.
	var lastSeen time.Time
	recorded := mark.Format(time.RFC3339)
	framework.Eventually(t, "released by the restarted controller", func(context.Context) (bool, string) {
		e, ok := getEIP(cp, ns, "timed")
		if ok && e.DeletionTimestamp == nil {
			lastSeen = time.Now()
			if got := e.Annotations[v1alpha1.AnnotationPodGoneSince]; got != recorded {
				t.Errorf("gone-since rewritten after the restart: %q, was %q", got, recorded)
			}
		}
		return !ok, "still there"
	})
	if early := mark.Add(3 * time.Second).Sub(lastSeen); early > 500*time.Millisecond {
		t.Errorf("released %v before the mark (%v) plus 3s", early, mark)
	}
	waitGone(t, "AllocationClaim", func() bool { return claimed(cp, eip.Status.Address) })
	waitEvent(t, cp, ns, "ElasticIP", "timed", v1alpha1.EventReleaseScheduled)
}

// TestNeverKeeps: with Never the attachment goes with the Pod, the ElasticIP and its
// reservation stay.
func TestNeverKeeps(t *testing.T) {
	cp := framework.Shared(t)
	startController(t, cp, "controller")
	ns := cp.NewNamespace(t, "never")
	net := network(t, cp, "never", false, "10.225.51.30-10.225.51.39")
	createPod(t, cp, ns, podSpec("keep", withEIP(net, v1alpha1.AnnotationReleaseStrategy, "Never")), "10.244.1.30")
	eip := waitAllocated(t, cp, ns, "keep", "keep")
	if len(eip.OwnerReferences) != 0 {
		t.Errorf("a kept ElasticIP must not be owned by its Pod: %v", eip.OwnerReferences)
	}

	forceDeletePod(t, cp, ns, "keep")
	waitGone(t, "attachment", func() bool { _, ok := getAttachment(cp, ns, "keep"); return ok })
	waitEvent(t, cp, ns, "ElasticIPAttachment", "keep", v1alpha1.EventAttachmentDeleted)
	framework.Eventually(t, "ElasticIP unused but kept", func(context.Context) (bool, string) {
		e, ok := getEIP(cp, ns, "keep")
		if ok {
			eip = e
		}
		return ok && e.Status.Phase == v1alpha1.ElasticIPAvailable, eipString(eip)
	})
	if eip.DeletionTimestamp != nil || eip.Status.Address == "" || !claimed(cp, eip.Status.Address) {
		t.Errorf("ElasticIP not kept: %s", eipString(eip))
	}
}

// TestStatefulPodsGetTheirAddressBack: Pods of a StatefulSet, of a kind listed in
// --stateful-workload-kinds, and Pods created directly, re-created under the same name
// get the same ElasticIP.
func TestStatefulPodsGetTheirAddressBack(t *testing.T) {
	cp := framework.Shared(t)
	startController(t, cp, "controller", "--stateful-workload-kinds=apps.kruise.io/StatefulSet")
	ns := cp.NewNamespace(t, "stateful")
	net := network(t, cp, "stateful", false, "10.225.51.40-10.225.51.49")
	owners := map[string][]metav1.OwnerReference{
		"db-0":   {statefulSetOwner("apps/v1")},
		"kdb-0":  {statefulSetOwner("apps.kruise.io/v1beta1")},
		"direct": nil,
	}
	podIPs := map[string][2]string{"db-0": {"10.244.1.40", "10.244.2.40"}, "kdb-0": {"10.244.1.41", "10.244.2.41"},
		"direct": {"10.244.1.42", "10.244.2.42"}}
	first := map[string]*v1alpha1.ElasticIP{}
	for name, owner := range owners {
		createPod(t, cp, ns, podSpec(name, withEIP(net), owner...), podIPs[name][0])
	}
	for name := range owners {
		first[name] = waitAllocated(t, cp, ns, name, name)
		if got := first[name].Annotations[v1alpha1.AnnotationReleaseStrategy]; got != "10m0s" {
			t.Errorf("%s: strategy %q, want the stateful default 10m0s", name, got)
		}
		forceDeletePod(t, cp, ns, name)
	}
	for name := range owners {
		waitGone(t, name+" attachment", func() bool { _, ok := getAttachment(cp, ns, name); return ok })
		framework.Eventually(t, name+" gone-since mark", func(context.Context) (bool, string) {
			e, ok := getEIP(cp, ns, name)
			return ok && e.Annotations[v1alpha1.AnnotationPodGoneSince] != "", eipString(e)
		})
	}

	for name, owner := range owners {
		createPod(t, cp, ns, podSpec(name, withEIP(net), owner...), podIPs[name][1])
	}
	for name := range owners {
		eip := waitAllocated(t, cp, ns, name, name)
		if eip.UID != first[name].UID || eip.Status.Address != first[name].Status.Address {
			t.Errorf("%s: got ElasticIP %s %s back, want %s %s", name, eip.UID, eip.Status.Address, first[name].UID, first[name].Status.Address)
		}
		framework.Eventually(t, name+" mark cleared", func(context.Context) (bool, string) {
			e, ok := getEIP(cp, ns, name)
			if !ok {
				return false, eipString(e)
			}
			_, marked := e.Annotations[v1alpha1.AnnotationPodGoneSince]
			return !marked, eipString(e)
		})
		att, _ := getAttachment(cp, ns, name)
		pod, _ := getPod(cp, ns, name)
		if len(att.OwnerReferences) != 1 || att.OwnerReferences[0].UID != pod.UID {
			t.Errorf("%s: attachment owners %v, want the new Pod %s", name, att.OwnerReferences, pod.UID)
		}
	}
}

// TestNamedElasticIP: pod-eip-name (here by its alias pod-eip-instanceid) attaches an
// existing ElasticIP; the attachment goes with the Pod, the ElasticIP never does.
func TestNamedElasticIP(t *testing.T) {
	cp := framework.Shared(t)
	startController(t, cp, "controller")
	ns := cp.NewNamespace(t, "named")
	net := network(t, cp, "named", false, "10.225.51.50-10.225.51.59")
	if _, err := cp.Juneau.JuneauV1alpha1().ElasticIPs(ns).Create(context.Background(), &v1alpha1.ElasticIP{
		ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Spec: v1alpha1.ElasticIPSpec{ExternalNetwork: net},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPod(t, cp, ns, podSpec("app", map[string]string{v1alpha1.AliasPodEIPInstance: "shared"}), "10.244.1.50")
	eip := waitAllocated(t, cp, ns, "app", "shared")
	if _, ok := getEIP(cp, ns, "app"); ok {
		t.Error("an ElasticIP was allocated besides the named one")
	}

	forceDeletePod(t, cp, ns, "app")
	waitGone(t, "attachment", func() bool { _, ok := getAttachment(cp, ns, "app"); return ok })
	framework.Eventually(t, "named ElasticIP unused", func(context.Context) (bool, string) {
		e, ok := getEIP(cp, ns, "shared")
		return ok && e.Status.Phase == v1alpha1.ElasticIPAvailable, eipString(e)
	})
	if e, ok := getEIP(cp, ns, "shared"); !ok || e.DeletionTimestamp != nil || e.UID != eip.UID || e.Labels[v1alpha1.LabelPod] != "" {
		t.Errorf("the named ElasticIP was touched: %s", eipString(e))
	}
}

// TestUserElasticIPNotTakenOver: an ElasticIP of the wanted name made by a user is
// reported on the Pod and left alone; once the user deletes it the Pod gets its own.
func TestUserElasticIPNotTakenOver(t *testing.T) {
	cp := framework.Shared(t)
	startController(t, cp, "controller")
	ns := cp.NewNamespace(t, "taken")
	net := network(t, cp, "taken", false, "10.225.51.60-10.225.51.69")
	user, err := cp.Juneau.JuneauV1alpha1().ElasticIPs(ns).Create(context.Background(), &v1alpha1.ElasticIP{
		ObjectMeta: metav1.ObjectMeta{Name: "busy"}, Spec: v1alpha1.ElasticIPSpec{ExternalNetwork: net},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createPod(t, cp, ns, podSpec("busy", withEIP(net)), "10.244.1.60")
	msg := waitEvent(t, cp, ns, "Pod", "busy", v1alpha1.EventElasticIPNameTaken)
	if !strings.Contains(msg, `ElasticIP "busy"`) {
		t.Errorf("Event message %q does not name the ElasticIP", msg)
	}
	if _, ok := getAttachment(cp, ns, "busy"); ok {
		t.Error("an attachment was made for the user's ElasticIP")
	}
	if e, _ := getEIP(cp, ns, "busy"); e.Labels[v1alpha1.LabelPod] != "" || e.UID != user.UID || len(e.OwnerReferences) != 0 {
		t.Errorf("the user's ElasticIP was changed: %s", eipString(e))
	}

	if err := cp.Juneau.JuneauV1alpha1().ElasticIPs(ns).Delete(context.Background(), "busy", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eip := waitAllocated(t, cp, ns, "busy", "busy")
	if eip.UID == user.UID || eip.Labels[v1alpha1.LabelPod] != "busy" {
		t.Errorf("ElasticIP after the user's went: %s", eipString(eip))
	}
}

// aliasManifest uses only the managed-cloud annotation keys and the default network.
const aliasManifest = `apiVersion: v1
kind: Pod
metadata:
  name: legacy
  annotations:
    network.alibabacloud.com/pod-with-eip: "true"
    network.alibabacloud.com/eip-bandwidth: "5"
    network.alibabacloud.com/pod-eip-release-strategy: "Follow"
spec:
  nodeName: node-a
  containers:
  - name: c
    image: nginx:1.27
`

// TestAliasOnlyManifest: a manifest written for the managed service works unchanged,
// taking its ElasticIP from the default ExternalNetwork.
func TestAliasOnlyManifest(t *testing.T) {
	cp := framework.Shared(t)
	startController(t, cp, "controller")
	ns := cp.NewNamespace(t, "alias")
	net := network(t, cp, "alias-default", true, "10.225.51.70-10.225.51.79")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if r := cp.Kubectl(ctx, aliasManifest, "apply", "-n", ns, "-f", "-"); r.Err != nil {
		t.Fatalf("kubectl apply: %v\n%s", r.Err, r.Stderr)
	}
	pod, ok := getPod(cp, ns, "legacy")
	if !ok {
		t.Fatal("Pod not created")
	}
	setPodIP(t, cp, pod, "10.244.1.70")
	eip := waitAllocated(t, cp, ns, "legacy", "legacy")
	if eip.Spec.ExternalNetwork != net || eip.Spec.BandwidthMbps == nil || *eip.Spec.BandwidthMbps != 5 {
		t.Errorf("ElasticIP = %s, network %q, bandwidth %v", eipString(eip), eip.Spec.ExternalNetwork, eip.Spec.BandwidthMbps)
	}
	forceDeletePod(t, cp, ns, "legacy")
	waitGone(t, "ElasticIP", func() bool { _, ok := getEIP(cp, ns, "legacy"); return ok })
}

// TestQuotaLimitsAutomaticElasticIPs: a ResourceQuota on ElasticIPs counts automatic
// ones too: past it, the Pod is told by its condition that the quota refused its
// ElasticIP, naming the quota.
func TestQuotaLimitsAutomaticElasticIPs(t *testing.T) {
	cp := framework.Shared(t)
	startController(t, cp, "controller")
	ns := cp.NewNamespace(t, "quota")
	net := network(t, cp, "quota", false, "10.225.51.30-10.225.51.39")
	ctx := context.Background()
	count := corev1.ResourceName("count/elasticips." + v1alpha1.GroupName)
	q, err := cp.Kube.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "eips"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{count: resource.MustParse("1")}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// What kube-controller-manager's quota controller writes first (this control plane
	// runs none): the API server's quota admission counts from there.
	q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{count: resource.MustParse("0")}}
	if _, err := cp.Kube.CoreV1().ResourceQuotas(ns).UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	createPod(t, cp, ns, podSpec("first", withEIP(net)), "10.244.1.30")
	waitAllocated(t, cp, ns, "first", "first")
	createPod(t, cp, ns, podSpec("second", withEIP(net)), "10.244.1.31")
	framework.Eventually(t, "Pod second told the quota refused its ElasticIP", func(context.Context) (bool, string) {
		p, _ := getPod(cp, ns, "second")
		c := status.PodCondition(p, v1alpha1.PodConditionElasticIPAssigned)
		if c == nil {
			return false, "no condition"
		}
		return c.Status == corev1.ConditionFalse && c.Reason == v1alpha1.ReasonWriteRefused &&
			strings.Contains(c.Message, "exceeded quota: eips"), fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
	})
	if _, ok := getEIP(cp, ns, "second"); ok {
		t.Error("an ElasticIP exists for Pod second beyond the quota")
	}
}
