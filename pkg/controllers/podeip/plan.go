package podeip

import (
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/annotations"
	"github.com/loutres/juneau/pkg/apis/juneau/holder"
	"github.com/loutres/juneau/pkg/apis/juneau/messages"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// inputs is everything the plan for one Pod key depends on, read from the caches.
type inputs struct {
	Namespace, Name string
	// Pod is nil when it is gone.
	Pod   *corev1.Pod
	State podState
	// Problem is what classify found wrong with the Pod (host network, unreadable
	// annotations); nil normally.
	Problem *problem
	// Auto is the Pod's request; meaningful when State is podActive.
	Auto     annotations.AutoEIP
	Stateful bool
	// Slots are the ElasticIPs the Pod may have, one per family, IPv4 first.
	Slots []slot
	// NIC is the Pod's "<pod>.eth0".
	NIC *v1alpha1.NetworkInterface
	// Networks are the ExternalNetworks; read only when an ElasticIP is to be created.
	Networks []*v1alpha1.ExternalNetwork
	Now      time.Time
}

// slot is one ElasticIP a Pod may have with its attachment (docs/automatic.md#families):
// its own ElasticIP of a family — named after the Pod for IPv4, "<pod>-ipv6" for IPv6 —
// translated to "<pod>.eth0" by an attachment of the same name; or, in the IPv4 slot, the
// ElasticIP the Pod names in pod-eip-name, attached through the attachment named after
// the Pod. Both slots are always read, so that what a Pod no longer asks for is released.
type slot struct {
	Family v1alpha1.IPFamily
	// Name is the name of the slot's own ElasticIP and of its attachment.
	Name string
	// Wants: the Pod is active and asks for an ElasticIP of its own of this family.
	Wants bool
	// Named is the ElasticIP the Pod names in pod-eip-name, when this slot attaches it.
	Named string
	// OwnEIP is the ElasticIP of the slot's name, whoever made it.
	OwnEIP *v1alpha1.ElasticIP
	// NamedEIP is the ElasticIP Named, when it exists.
	NamedEIP *v1alpha1.ElasticIP
	// Attachment is the ElasticIPAttachment of the slot's name, whoever made it.
	Attachment *v1alpha1.ElasticIPAttachment
	// Blockers are the other active attachments of OwnEIP: they keep it from being
	// deleted (the webhook refuses).
	Blockers []string
	// Others describe who else uses the ElasticIP the slot wants (holder.InUse wording),
	// read when it has no attachment of its own for it yet: the controller gives an
	// ElasticIP to one Pod only (contention.go).
	Others []string
	// Yield says another, older ElasticIPAttachment uses the ElasticIP the slot's own
	// attachment names (the two raced): the slot's own gives way.
	Yield bool
}

// slotName is the name of a Pod's own ElasticIP (and attachment) of a family.
func slotName(pod string, f v1alpha1.IPFamily) string {
	if f == v1alpha1.IPv6 {
		return pod + "-ipv6"
	}
	return pod
}

// active says the Pod wants an ElasticIP through this slot.
func (s slot) active() bool { return s.Wants || s.Named != "" }

// target is the name of the ElasticIP the slot attaches: the named one, or its own.
func (s slot) target() string {
	if s.Named != "" {
		return s.Named
	}
	return s.Name
}

// plan is what one sync writes. Objects are fresh or deep copies.
type plan struct {
	Slots []slotPlan
	// Annotations patches the Pod: the allocated-eip-* values, nil to remove one.
	Annotations map[string]*string
	// Condition is the PodConditionElasticIPAssigned the Pod should have (status, reason
	// and message); nil leaves it as it is.
	Condition *corev1.PodCondition
	// RequeueAfter is when the first delayed release falls due.
	RequeueAfter time.Duration
	Problems     []problem
}

// slotPlan is what one sync writes for one slot.
type slotPlan struct {
	slot
	CreateEIP        *v1alpha1.ElasticIP
	UpdateEIP        *v1alpha1.ElasticIP
	DeleteEIP        *v1alpha1.ElasticIP
	CreateAttachment *v1alpha1.ElasticIPAttachment
	DeleteAttachment *v1alpha1.ElasticIPAttachment
	// ReleaseStrategy is the strategy applied to a released or kept ElasticIP, for Events.
	ReleaseStrategy string
	// RequeueAfter is when a delayed release of the slot's ElasticIP falls due.
	RequeueAfter time.Duration
	// Usable is the ElasticIP the slot attaches, when it can be attached now.
	Usable *v1alpha1.ElasticIP
	// Held says the Pod holds Usable (holding).
	Held bool
}

// planPod decides what should exist for one Pod key: for each family it asks for, the
// ElasticIP of its own (pod-with-eip) or the one it names (pod-eip-name), the
// ElasticIPAttachment translating it to "<pod>.eth0", and the annotations written back
// on the Pod. Objects without the Pod's label are the user's: they are reported, never
// changed. Creation happens one step at a time (the attachment once the ElasticIP and
// the NIC are in the cache), deletion too (the ElasticIP once no attachment of ours
// references it), so each step is level-triggered from the caches.
func planPod(in inputs) plan {
	var p plan
	if in.State == podHolding {
		p.Condition = holdingCondition(in)
		return p
	}
	for _, s := range in.Slots {
		sp := slotPlan{slot: s}
		sp.Usable = p.planOwnEIP(in, &sp)
		if s.Named != "" {
			sp.Usable = p.namedUsable(in, s)
		}
		p.planAttachment(in, &sp)
		sp.Held = holding(in, s, sp.Usable)
		if sp.RequeueAfter > 0 && (p.RequeueAfter == 0 || sp.RequeueAfter < p.RequeueAfter) {
			p.RequeueAfter = sp.RequeueAfter
		}
		p.Slots = append(p.Slots, sp)
	}
	p.planAnnotations(in)
	p.Condition = p.condition(in)
	return p
}

// planOwnEIP handles the slot's own ElasticIP. It returns the ElasticIP when it can be
// attached now.
func (p *plan) planOwnEIP(in inputs, sp *slotPlan) *v1alpha1.ElasticIP {
	eip := sp.OwnEIP
	switch {
	case eip == nil:
		if sp.Wants {
			sp.CreateEIP = p.newEIP(in, sp.slot)
		}
		return nil
	case !labelledFor(eip, in.Name):
		if sp.Wants {
			p.Problems = append(p.Problems, problem{Object: in.Pod, Reason: v1alpha1.EventElasticIPNameTaken, Message: fmt.Sprintf(
				"ElasticIP %q exists and was not made for this Pod (it lacks the label %s=%s); it is not taken over: delete or rename it",
				eip.Name, v1alpha1.LabelPod, in.Name)})
		}
		return nil
	case eip.DeletionTimestamp != nil:
		return nil
	case sp.Wants && ownedByEarlierPod(eip, in.Pod):
		// A Follow ElasticIP of an earlier Pod of this name: released with that Pod.
		p.release(in, sp, releaseDecision{Action: releaseNow}, v1alpha1.ReleaseFollow)
		return nil
	case sp.Wants:
		if want := applyOwnMeta(eip.DeepCopy(), in); !equality.Semantic.DeepEqual(want, eip) {
			sp.UpdateEIP = want
		}
		return eip
	case in.State == podActive && in.Auto.ElasticIPName == eip.Name:
		return eip // the Pod names its own ElasticIP: in use
	}
	recorded := eip.Annotations[v1alpha1.AnnotationReleaseStrategy]
	p.release(in, sp, decideRelease(recorded, eip.Annotations[v1alpha1.AnnotationPodGoneSince], in.Now), recorded)
	return nil
}

// release applies a release decision to the slot's own ElasticIP.
func (p *plan) release(in inputs, sp *slotPlan, d releaseDecision, strategy string) {
	eip := sp.OwnEIP
	sp.ReleaseStrategy = strategy
	switch d.Action {
	case releaseNever:
		return
	case releaseLater:
		if d.Mark != "" {
			sp.UpdateEIP = eip.DeepCopy()
			if sp.UpdateEIP.Annotations == nil {
				sp.UpdateEIP.Annotations = map[string]string{}
			}
			sp.UpdateEIP.Annotations[v1alpha1.AnnotationPodGoneSince] = d.Mark
		}
		sp.RequeueAfter = d.At.Sub(in.Now)
		return
	}
	if a := sp.Attachment; a != nil && labelledFor(a, in.Name) && a.Spec.ElasticIPRef.Name == eip.Name {
		return // our attachment goes first; its deletion brings us back
	}
	if len(sp.Blockers) > 0 {
		p.Problems = append(p.Problems, problem{Object: eip, Reason: v1alpha1.EventReleaseBlocked, Message: fmt.Sprintf(
			"ElasticIP %q is due for release but ElasticIPAttachments %s still reference it", eip.Name, messages.Names(sp.Blockers))})
		return
	}
	sp.DeleteEIP = eip
}

// newEIP is the slot's own ElasticIP to create, or nil with the reason the network is
// unknown reported.
func (p *plan) newEIP(in inputs, s slot) *v1alpha1.ElasticIP {
	network, prob := chooseNetwork(in.Pod, in.Auto.ExternalNetwork, in.Networks)
	if prob != nil {
		if !slices.ContainsFunc(p.Problems, func(o problem) bool { return o.Reason == prob.Reason && o.Message == prob.Message }) {
			p.Problems = append(p.Problems, *prob)
		}
		return nil
	}
	eip := &v1alpha1.ElasticIP{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: in.Namespace},
		Spec:       v1alpha1.ElasticIPSpec{ExternalNetwork: network},
	}
	if s.Family == v1alpha1.IPv6 {
		eip.Spec.IPFamily = v1alpha1.IPv6
	}
	return applyOwnMeta(eip, in)
}

// applyOwnMeta gives the Pod's own ElasticIP the metadata and bandwidth the Pod asks for
// now; the gone-since mark is cleared, since the Pod is here.
func applyOwnMeta(eip *v1alpha1.ElasticIP, in inputs) *v1alpha1.ElasticIP {
	rs := in.Auto.EffectiveRelease(in.Stateful)
	eip.Labels = withEntry(eip.Labels, v1alpha1.LabelPod, in.Name)
	eip.Annotations = withEntry(eip.Annotations, v1alpha1.AnnotationReleaseStrategy, formatRelease(rs))
	delete(eip.Annotations, v1alpha1.AnnotationPodGoneSince)
	// Only a Follow ElasticIP belongs to this very Pod; one that outlives it must not be
	// collected with it, nor be mistaken for an earlier Pod's by the next one.
	var owner *corev1.Pod
	if rs.Kind == annotations.ReleaseFollow {
		owner = in.Pod
	}
	eip.OwnerReferences = withPodOwner(eip.OwnerReferences, in.Name, owner)
	// The eip-bandwidth annotation, where the Pod has it, decides the limit; without it
	// the ElasticIP's own spec.bandwidthMbps stands, so a user may set or change it
	// there (docs/automatic.md#bandwidth).
	if in.Auto.BandwidthMbps != nil {
		eip.Spec.BandwidthMbps = in.Auto.BandwidthMbps
	}
	return eip
}

func withEntry(m map[string]string, k, v string) map[string]string {
	out := maps.Clone(m)
	if out == nil {
		out = map[string]string{}
	}
	out[k] = v
	return out
}

// namedUsable returns the ElasticIP named in pod-eip-name when it can be attached, and
// reports why not otherwise.
func (p *plan) namedUsable(in inputs, s slot) *v1alpha1.ElasticIP {
	switch eip := s.NamedEIP; {
	case eip == nil:
		p.Problems = append(p.Problems, problem{Object: in.Pod, Reason: v1alpha1.EventElasticIPNotFound, Message: fmt.Sprintf(
			"ElasticIP %q named by the Pod's annotations does not exist in namespace %q; waiting for it", s.Named, in.Namespace)})
	case eip.DeletionTimestamp != nil:
		p.Problems = append(p.Problems, problem{Object: in.Pod, Reason: v1alpha1.EventElasticIPNotFound, Message: fmt.Sprintf(
			"ElasticIP %q named by the Pod's annotations is being deleted", s.Named)})
	default:
		return eip
	}
	return nil
}

// planAttachment keeps the slot's attachment: created while the slot is active, once the
// ElasticIP and the Pod's own "<pod>.eth0" are there and nobody else uses the ElasticIP;
// deleted when the Pod leaves or stops asking, when it was made for an earlier Pod or
// for another ElasticIP (its spec is immutable, so it is made again), or when an older
// attachment of the ElasticIP it names was there first.
func (p *plan) planAttachment(in inputs, sp *slotPlan) {
	active := in.State == podActive && sp.active()
	target := sp.target()
	nicName := v1alpha1.NetworkInterfaceName(in.Name, v1alpha1.DefaultInterface)
	if a := sp.Attachment; a != nil {
		switch {
		case !labelledFor(a, in.Name):
			if active {
				p.Problems = append(p.Problems, problem{Object: in.Pod, Reason: v1alpha1.EventAttachmentNameTaken, Message: fmt.Sprintf(
					"ElasticIPAttachment %q exists and was not made for this Pod (it lacks the label %s=%s); it is not taken over: delete or rename it",
					a.Name, v1alpha1.LabelPod, in.Name)})
			}
		case a.DeletionTimestamp != nil:
		case !active, ownedByEarlierPod(a, in.Pod), a.Spec.ElasticIPRef.Name != target,
			a.Spec.TargetRef.NetworkInterfaceName != nicName:
			sp.DeleteAttachment = a
		case sp.Yield:
			sp.DeleteAttachment = a
			p.Problems = append(p.Problems, problem{Object: in.Pod, Reason: v1alpha1.ReasonElasticIPInUse, Message: inUseMessage(in, target, sp.Others)})
		}
		return
	}
	nic := in.NIC
	if !active || sp.Usable == nil || nic == nil || nic.DeletionTimestamp != nil || nic.Spec.PodRef.UID != string(in.Pod.UID) {
		return
	}
	if len(sp.Others) > 0 {
		p.Problems = append(p.Problems, problem{Object: in.Pod, Reason: v1alpha1.ReasonElasticIPInUse, Message: inUseMessage(in, target, sp.Others)})
		return
	}
	sp.CreateAttachment = &v1alpha1.ElasticIPAttachment{
		ObjectMeta: metav1.ObjectMeta{
			Name: sp.Name, Namespace: in.Namespace,
			Labels:          map[string]string{v1alpha1.LabelPod: in.Name},
			OwnerReferences: []metav1.OwnerReference{podOwnerRef(in.Pod)},
		},
		Spec: v1alpha1.ElasticIPAttachmentSpec{
			ElasticIPRef: v1alpha1.ElasticIPReference{Name: target},
			TargetRef:    v1alpha1.AttachmentTarget{NetworkInterfaceName: nicName},
		},
	}
}

// inUseMessage tells a Pod whose ElasticIP another user has why it waits and what to do.
func inUseMessage(in inputs, target string, others []string) string {
	return holder.InUse(target, others) + fmt.Sprintf(
		": an ElasticIP serves one Pod at a time, so this Pod waits and takes it over once that use ends; to have an address now, name another ElasticIP in %s",
		annotations.AutoPath(in.Pod.Annotations, in.Auto))
}

// holding says the Pod holds the slot's ElasticIP eip: the ElasticIP's recorded user is
// the slot's own attachment (by UID), made for this very Pod and translating to its
// eth0. Only then are its name and address the Pod's own to be told (planAnnotations).
func holding(in inputs, s slot, eip *v1alpha1.ElasticIP) bool {
	a := s.Attachment
	if in.State != podActive || !s.active() || eip == nil || eip.DeletionTimestamp != nil || eip.Status.Address == "" || a == nil ||
		!isOwnAttachment(a, s.Name, in.Name) || ownedByEarlierPod(a, in.Pod) || a.DeletionTimestamp != nil ||
		a.Spec.ElasticIPRef.Name != eip.Name || a.Spec.TargetRef.NetworkInterfaceName != v1alpha1.NetworkInterfaceName(in.Name, v1alpha1.DefaultInterface) {
		return false
	}
	return holder.Is(eip.Status.Attachment, holder.Ref(v1alpha1.AttachmentKindElasticIPAttachment, a.Name, a.UID))
}
