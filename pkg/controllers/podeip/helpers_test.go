package podeip

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

const testNS = "ns"

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// newPod is a running, scheduled Pod of a ReplicaSet (a Deployment's Pod, which follows
// its Pod by default) with a Pod IP and the given annotations; ownerless and ownedBy
// change its controller.
func newPod(name string, ann map[string]string, mods ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, UID: types.UID("uid-" + name), Annotations: ann,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "uid-rs", Controller: ptr.To(true)}}},
		Spec:   corev1.PodSpec{NodeName: "node-a"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.1.5"},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func withUID(uid string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.UID = types.UID(uid) }
}

func ownedBy(apiVersion, kind string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "web", UID: "uid-owner", Controller: ptr.To(true)}}
	}
}

// ownerless makes a Pod created directly, without a controller.
func ownerless(p *corev1.Pod) { p.OwnerReferences = nil }

func phase(ph corev1.PodPhase) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Status.Phase = ph }
}

// settingUp: the kubelet has not reported the Pod's IPs yet.
func settingUp(p *corev1.Pod) { p.Status.PodIP, p.Status.PodIPs = "", nil }

// gate lists juneau's readiness gate on the Pod, its condition of the given status (none
// for "").
func gate(st corev1.ConditionStatus) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: v1alpha1.PodConditionElasticIP}}
		if st != "" {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: v1alpha1.PodConditionElasticIP, Status: st})
		}
	}
}

func terminating(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: t0} }

func auto(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// withEIP asks for an automatic ElasticIP from network (empty: the default).
func withEIP(network string, kv ...string) map[string]string {
	m := auto(kv...)
	m[v1alpha1.AnnotationPodWithEIP] = "true"
	if network != "" {
		m[v1alpha1.AnnotationEIPExternalNetwork] = network
	}
	return m
}

// ownEIP is the automatic ElasticIP of pod, as the controller makes it for a Follow
// strategy (owner: the Pod), or with another strategy (no owner).
func ownEIP(pod *corev1.Pod, strategy string, mods ...func(*v1alpha1.ElasticIP)) *v1alpha1.ElasticIP {
	e := &v1alpha1.ElasticIP{
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: testNS, UID: types.UID("eip-uid-" + pod.Name), ResourceVersion: "1",
			Labels:      map[string]string{v1alpha1.LabelPod: pod.Name},
			Annotations: map[string]string{v1alpha1.AnnotationReleaseStrategy: strategy},
		},
		Spec: v1alpha1.ElasticIPSpec{ExternalNetwork: "ext-net"},
	}
	if strategy == v1alpha1.ReleaseFollow {
		e.OwnerReferences = []metav1.OwnerReference{podOwnerRef(pod)}
	}
	for _, m := range mods {
		m(e)
	}
	return e
}

func userEIP(name string, mods ...func(*v1alpha1.ElasticIP)) *v1alpha1.ElasticIP {
	e := &v1alpha1.ElasticIP{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, UID: types.UID("eip-uid-" + name), ResourceVersion: "1"},
		Spec:       v1alpha1.ElasticIPSpec{ExternalNetwork: "ext-net"},
	}
	for _, m := range mods {
		m(e)
	}
	return e
}

func address(a string) func(*v1alpha1.ElasticIP) {
	return func(e *v1alpha1.ElasticIP) { e.Status.Address = a }
}

func bandwidth(mbps int32) func(*v1alpha1.ElasticIP) {
	return func(e *v1alpha1.ElasticIP) { e.Spec.BandwidthMbps = ptr.To(mbps) }
}

func goneSince(v string) func(*v1alpha1.ElasticIP) {
	return func(e *v1alpha1.ElasticIP) { e.Annotations[v1alpha1.AnnotationPodGoneSince] = v }
}

func eipDeleting(e *v1alpha1.ElasticIP) { e.DeletionTimestamp = &metav1.Time{Time: t0} }

// heldBy records the attachment as the ElasticIP's user, as the ElasticIP controller does.
func heldBy(a *v1alpha1.ElasticIPAttachment) func(*v1alpha1.ElasticIP) {
	return func(e *v1alpha1.ElasticIP) {
		e.Status.Attachment = &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindElasticIPAttachment, Name: a.Name, UID: a.UID}
	}
}

// younger makes an attachment a minute younger than one made at t0.
func younger(a *v1alpha1.ElasticIPAttachment) *v1alpha1.ElasticIPAttachment {
	a.CreationTimestamp = metav1.NewTime(t0.Add(time.Minute))
	return a
}

// ownAttachment is the attachment the controller makes for pod.
func ownAttachment(pod *corev1.Pod, eip string) *v1alpha1.ElasticIPAttachment {
	return &v1alpha1.ElasticIPAttachment{
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: testNS, UID: types.UID("att-uid-" + pod.Name), CreationTimestamp: metav1.NewTime(t0),
			Labels:          map[string]string{v1alpha1.LabelPod: pod.Name},
			OwnerReferences: []metav1.OwnerReference{podOwnerRef(pod)},
		},
		Spec: v1alpha1.ElasticIPAttachmentSpec{
			ElasticIPRef: v1alpha1.ElasticIPReference{Name: eip},
			TargetRef:    v1alpha1.AttachmentTarget{NetworkInterfaceName: pod.Name + ".eth0"},
		},
	}
}

func userAttachment(name, eip, nic string) *v1alpha1.ElasticIPAttachment {
	return &v1alpha1.ElasticIPAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, UID: types.UID("att-uid-" + name)},
		Spec: v1alpha1.ElasticIPAttachmentSpec{
			ElasticIPRef: v1alpha1.ElasticIPReference{Name: eip},
			TargetRef:    v1alpha1.AttachmentTarget{NetworkInterfaceName: nic},
		},
	}
}

func nicOf(pod *corev1.Pod) *v1alpha1.NetworkInterface {
	return &v1alpha1.NetworkInterface{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name + ".eth0", Namespace: testNS, UID: types.UID("nic-uid-" + pod.Name)},
		Spec: v1alpha1.NetworkInterfaceSpec{
			PodRef:   v1alpha1.PodReference{Name: pod.Name, UID: string(pod.UID), Interface: "eth0"},
			NodeName: pod.Spec.NodeName,
		},
	}
}

func network(name string, isDefault bool) *v1alpha1.ExternalNetwork {
	n := &v1alpha1.ExternalNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseARP, AddressPools: []string{name + "-pool"}},
	}
	if isDefault {
		n.Annotations = map[string]string{v1alpha1.AnnotationDefaultNetwork: "true"}
	}
	return n
}

// summary describes a plan as sorted lines, so table tests read as what happens.
func summary(p plan) []string {
	var out []string
	for _, sp := range p.Slots {
		if e := sp.CreateEIP; e != nil {
			out = append(out, fmt.Sprintf("create eip %s network=%s %s", e.Name, e.Spec.ExternalNetwork, eipMeta(e)))
		}
		if e := sp.UpdateEIP; e != nil {
			out = append(out, fmt.Sprintf("update eip %s %s", e.Name, eipMeta(e)))
		}
		if e := sp.DeleteEIP; e != nil {
			out = append(out, "delete eip "+e.Name)
		}
		if a := sp.CreateAttachment; a != nil {
			out = append(out, fmt.Sprintf("create attachment %s eip=%s nic=%s label=%s owner=%s", a.Name,
				a.Spec.ElasticIPRef.Name, a.Spec.TargetRef.NetworkInterfaceName, a.Labels[v1alpha1.LabelPod], owner(a.OwnerReferences)))
		}
		if a := sp.DeleteAttachment; a != nil {
			out = append(out, "delete attachment "+a.Name)
		}
	}
	if p.Annotations != nil {
		n, a := p.Annotations[v1alpha1.AnnotationAllocatedEIPName], p.Annotations[v1alpha1.AnnotationAllocatedEIPAddr]
		n6, a6 := p.Annotations[v1alpha1.AnnotationAllocatedEIPName6], p.Annotations[v1alpha1.AnnotationAllocatedEIPAddr6]
		if n != nil && a != nil {
			out = append(out, fmt.Sprintf("annotate %s %s", *n, *a))
		}
		if n6 != nil && a6 != nil {
			out = append(out, fmt.Sprintf("annotate ipv6 %s %s", *n6, *a6))
		}
		if (n == nil || a == nil) && (n6 == nil || a6 == nil) {
			out = append(out, fmt.Sprintf("remove %d annotations", len(p.Annotations)))
		}
		if id, addr := p.Annotations[v1alpha1.AliasAllocatedEIPID], p.Annotations[v1alpha1.AliasAllocatedEIPAddress]; id != nil && addr != nil {
			eni := "-"
			if e := p.Annotations[v1alpha1.AliasAllocatedENIID]; e != nil {
				eni = *e
			}
			out = append(out, fmt.Sprintf("annotate managed-cloud %s %s %s", *id, *addr, eni))
		}
	}
	if p.RequeueAfter != 0 {
		out = append(out, "requeue "+p.RequeueAfter.String())
	}
	for _, pr := range p.Problems {
		out = append(out, "problem "+pr.Reason)
	}
	slices.Sort(out)
	return out
}

func eipMeta(e *v1alpha1.ElasticIP) string {
	var b strings.Builder
	fmt.Fprintf(&b, "label=%s strategy=%s owner=%s", e.Labels[v1alpha1.LabelPod],
		e.Annotations[v1alpha1.AnnotationReleaseStrategy], owner(e.OwnerReferences))
	if e.Spec.IPFamily != "" {
		fmt.Fprintf(&b, " family=%s", e.Spec.IPFamily)
	}
	if e.Spec.BandwidthMbps != nil {
		fmt.Fprintf(&b, " bw=%d", *e.Spec.BandwidthMbps)
	}
	if g, ok := e.Annotations[v1alpha1.AnnotationPodGoneSince]; ok {
		fmt.Fprintf(&b, " gone=%s", g)
	}
	return b.String()
}

func owner(refs []metav1.OwnerReference) string {
	for _, r := range refs {
		if r.Kind == "Pod" {
			return string(r.UID)
		}
	}
	return "-"
}
