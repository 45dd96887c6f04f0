package podeip

import (
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/annotations"
	"github.com/loutres/juneau/pkg/apis/juneau/holder"
	"github.com/loutres/juneau/pkg/apis/juneau/quote"
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
	// OwnEIP is the ElasticIP named after the Pod, whoever made it.
	OwnEIP *v1alpha1.ElasticIP
	// NamedEIP is the ElasticIP the Pod names in pod-eip-name, when it exists.
	NamedEIP *v1alpha1.ElasticIP
	// Attachment is the ElasticIPAttachment named after the Pod, whoever made it.
	Attachment *v1alpha1.ElasticIPAttachment
	// NIC is the Pod's "<pod>.eth0".
	NIC *v1alpha1.NetworkInterface
	// Blockers are the other active attachments of OwnEIP: they keep it from being
	// deleted (the webhook refuses).
	Blockers []string
	// Others describe who else uses the ElasticIP the Pod wants (holder.InUse wording),
	// read when the Pod is active and has no attachment of its own for it yet: the
	// controller gives an ElasticIP to one Pod only (contention.go).
	Others []string
	// Yield says another, older ElasticIPAttachment uses the ElasticIP the Pod's own
	// attachment names (the two raced): the Pod's own gives way.
	Yield bool
	// Networks are the ExternalNetworks; read only when an ElasticIP is to be created.
	Networks []*v1alpha1.ExternalNetwork
	Now      time.Time
}

// plan is what one sync writes. Objects are fresh or deep copies.
type plan struct {
	CreateEIP        *v1alpha1.ElasticIP
	UpdateEIP        *v1alpha1.ElasticIP
	DeleteEIP        *v1alpha1.ElasticIP
	CreateAttachment *v1alpha1.ElasticIPAttachment
	DeleteAttachment *v1alpha1.ElasticIPAttachment
	// Annotations patches the Pod: the allocated-eip-* values, nil to remove one.
	Annotations map[string]*string
	// Condition is the PodConditionElasticIPAssigned the Pod should have (status, reason
	// and message); nil leaves it as it is.
	Condition *corev1.PodCondition
	// ReleaseStrategy is the strategy applied to a released or kept ElasticIP, for Events.
	ReleaseStrategy string
	// RequeueAfter is when a delayed release falls due.
	RequeueAfter time.Duration
	Problems     []problem
}

// planPod decides what should exist for one Pod key: the ElasticIP named after the Pod
// (pod-with-eip), the ElasticIPAttachment named after the Pod targeting "<pod>.eth0",
// and the annotations written back on the Pod. Objects without the Pod's label are the
// user's: they are reported, never changed. Creation happens one step at a time (the
// attachment once the ElasticIP and the NIC are in the cache), deletion too (the
// ElasticIP once no attachment of ours references it), so each step is level-triggered
// from the caches.
func planPod(in inputs) plan {
	var p plan
	if in.State == podHolding {
		p.Condition = holdingCondition(in)
		return p
	}
	target, usable := in.Name, p.planOwnEIP(in)
	if in.State == podActive && in.Auto.ElasticIPName != "" {
		target, usable = in.Auto.ElasticIPName, p.namedUsable(in)
	}
	p.planAttachment(in, target, usable)
	held := holding(in, usable)
	p.planAnnotations(in, held)
	p.Condition = p.condition(in, target, usable, held)
	return p
}

// planOwnEIP handles the ElasticIP named after the Pod. It returns the ElasticIP when it
// can be attached now.
func (p *plan) planOwnEIP(in inputs) *v1alpha1.ElasticIP {
	eip := in.OwnEIP
	wants := in.State == podActive && in.Auto.Enabled
	switch {
	case eip == nil:
		if wants {
			p.createEIP(in)
		}
		return nil
	case !labelledFor(eip, in.Name):
		if wants {
			p.Problems = append(p.Problems, problem{Object: in.Pod, Reason: v1alpha1.EventElasticIPNameTaken, Message: fmt.Sprintf(
				"ElasticIP %q exists and was not made for this Pod (it lacks the label %s=%s); it is not taken over: delete or rename it",
				eip.Name, v1alpha1.LabelPod, in.Name)})
		}
		return nil
	case eip.DeletionTimestamp != nil:
		return nil
	case wants && ownedByEarlierPod(eip, in.Pod):
		// A Follow ElasticIP of an earlier Pod of this name: released with that Pod.
		p.release(in, releaseDecision{Action: releaseNow}, v1alpha1.ReleaseFollow)
		return nil
	case wants:
		if want := desiredOwnEIP(in); !equality.Semantic.DeepEqual(want, eip) {
			p.UpdateEIP = want
		}
		return eip
	case in.State == podActive && in.Auto.ElasticIPName == eip.Name:
		return eip // the Pod names its own ElasticIP: in use
	}
	recorded := eip.Annotations[v1alpha1.AnnotationReleaseStrategy]
	p.release(in, decideRelease(recorded, eip.Annotations[v1alpha1.AnnotationPodGoneSince], in.Now), recorded)
	return nil
}

// release applies a release decision to the Pod's own ElasticIP.
func (p *plan) release(in inputs, d releaseDecision, strategy string) {
	eip := in.OwnEIP
	p.ReleaseStrategy = strategy
	switch d.Action {
	case releaseNever:
		return
	case releaseLater:
		if d.Mark != "" {
			p.UpdateEIP = eip.DeepCopy()
			if p.UpdateEIP.Annotations == nil {
				p.UpdateEIP.Annotations = map[string]string{}
			}
			p.UpdateEIP.Annotations[v1alpha1.AnnotationPodGoneSince] = d.Mark
		}
		p.RequeueAfter = d.At.Sub(in.Now)
		return
	}
	if a := in.Attachment; a != nil && labelledFor(a, in.Name) && a.Spec.ElasticIPRef.Name == eip.Name {
		return // our attachment goes first; its deletion brings us back
	}
	if len(in.Blockers) > 0 {
		p.Problems = append(p.Problems, problem{Object: eip, Reason: v1alpha1.EventReleaseBlocked, Message: fmt.Sprintf(
			"ElasticIP %q is due for release but ElasticIPAttachments %s still reference it", eip.Name, quote.List(in.Blockers))})
		return
	}
	p.DeleteEIP = eip
}

// createEIP plans the Pod's ElasticIP, or reports why the network is unknown.
func (p *plan) createEIP(in inputs) {
	network, prob := chooseNetwork(in.Pod, in.Auto.ExternalNetwork, in.Networks)
	if prob != nil {
		p.Problems = append(p.Problems, *prob)
		return
	}
	eip := &v1alpha1.ElasticIP{
		ObjectMeta: metav1.ObjectMeta{Name: in.Name, Namespace: in.Namespace},
		Spec:       v1alpha1.ElasticIPSpec{ExternalNetwork: network},
	}
	p.CreateEIP = applyOwnMeta(eip, in)
}

// desiredOwnEIP is the Pod's ElasticIP with the metadata and bandwidth the Pod asks for
// now; the gone-since mark is cleared, since the Pod is here.
func desiredOwnEIP(in inputs) *v1alpha1.ElasticIP {
	return applyOwnMeta(in.OwnEIP.DeepCopy(), in)
}

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
func (p *plan) namedUsable(in inputs) *v1alpha1.ElasticIP {
	name := in.Auto.ElasticIPName
	switch eip := in.NamedEIP; {
	case eip == nil:
		p.Problems = append(p.Problems, problem{Object: in.Pod, Reason: v1alpha1.EventElasticIPNotFound, Message: fmt.Sprintf(
			"ElasticIP %q named by the Pod's annotations does not exist in namespace %q; waiting for it", name, in.Namespace)})
	case eip.DeletionTimestamp != nil:
		p.Problems = append(p.Problems, problem{Object: in.Pod, Reason: v1alpha1.EventElasticIPNotFound, Message: fmt.Sprintf(
			"ElasticIP %q named by the Pod's annotations is being deleted", name)})
	default:
		return eip
	}
	return nil
}

// planAttachment keeps the attachment named after the Pod: created while the Pod is
// active, once the ElasticIP and the Pod's own "<pod>.eth0" are there; deleted when the
// Pod leaves, or when it was made for an earlier Pod or for another ElasticIP (its spec
// is immutable, so it is made again).
func (p *plan) planAttachment(in inputs, target string, eip *v1alpha1.ElasticIP) {
	active := in.State == podActive
	nicName := v1alpha1.NetworkInterfaceName(in.Name, v1alpha1.DefaultInterface)
	if a := in.Attachment; a != nil {
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
			p.DeleteAttachment = a
		case in.Yield:
			p.DeleteAttachment = a
			p.Problems = append(p.Problems, problem{Object: in.Pod, Reason: v1alpha1.ReasonElasticIPInUse, Message: inUseMessage(in, target, in.Others)})
		}
		return
	}
	nic := in.NIC
	if !active || eip == nil || nic == nil || nic.DeletionTimestamp != nil || nic.Spec.PodRef.UID != string(in.Pod.UID) {
		return
	}
	if len(in.Others) > 0 {
		p.Problems = append(p.Problems, problem{Object: in.Pod, Reason: v1alpha1.ReasonElasticIPInUse, Message: inUseMessage(in, target, in.Others)})
		return
	}
	p.CreateAttachment = &v1alpha1.ElasticIPAttachment{
		ObjectMeta: metav1.ObjectMeta{
			Name: in.Name, Namespace: in.Namespace,
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

// holding says the Pod holds its ElasticIP: the ElasticIP's recorded user is the Pod's
// own attachment (by UID), made for this very Pod and translating to its eth0. Only then
// are its name and address the Pod's own to be told (planAnnotations).
func holding(in inputs, eip *v1alpha1.ElasticIP) bool {
	a := in.Attachment
	if in.State != podActive || eip == nil || eip.DeletionTimestamp != nil || eip.Status.Address == "" || a == nil ||
		!isOwnAttachment(a, in.Name) || ownedByEarlierPod(a, in.Pod) || a.DeletionTimestamp != nil ||
		a.Spec.ElasticIPRef.Name != eip.Name || a.Spec.TargetRef.NetworkInterfaceName != v1alpha1.NetworkInterfaceName(in.Name, v1alpha1.DefaultInterface) {
		return false
	}
	return holder.Is(eip.Status.Attachment, holder.Ref(v1alpha1.AttachmentKindElasticIPAttachment, a.Name, a.UID))
}

// planAnnotations writes back what the Pod holds (holding): the name and address of its
// ElasticIP, and for a Pod that asked with the managed-cloud keys also that service's
// names of the same facts (docs/reference.md#automatic), the NetworkInterface's name
// included. A Pod that does not hold an ElasticIP carries none of these: they are
// removed when it never got the ElasticIP it names (another Pod uses it), when its
// ElasticIP was released, deleted or moved on, when it finished, and when it stops
// asking. A terminating Pod keeps what it has until it is gone (it still holds its
// address then), and so does one whose annotations cannot be read. Whoever else carries
// an address the controller writes loses it first (addressBook), so no two Pods carry
// one address.
func (p *plan) planAnnotations(in inputs, held bool) {
	if in.Pod == nil || in.State == podHolding {
		return
	}
	have := in.Pod.Annotations
	if !held {
		for _, k := range allocatedKeys {
			if _, ok := have[k]; ok {
				p.Annotations = map[string]*string{}
				for _, k := range allocatedKeys {
					p.Annotations[k] = nil
				}
				return
			}
		}
		return
	}
	eip := in.target()
	want := map[string]string{
		v1alpha1.AnnotationAllocatedEIPName: eip.Name,
		v1alpha1.AnnotationAllocatedEIPAddr: eip.Status.Address,
	}
	if annotations.UsesManagedCloudKeys(have) {
		want[v1alpha1.AliasAllocatedEIPID] = eip.Name
		want[v1alpha1.AliasAllocatedEIPAddress] = eip.Status.Address
		want[v1alpha1.AliasAllocatedENIID] = v1alpha1.NetworkInterfaceName(in.Name, v1alpha1.DefaultInterface)
	}
	stale := false
	for _, k := range allocatedKeys {
		v, wanted := want[k]
		if got, ok := have[k]; ok != wanted || got != v {
			stale = true
		}
	}
	if !stale {
		return
	}
	p.Annotations = map[string]*string{}
	for _, k := range allocatedKeys {
		if v, ok := want[k]; ok {
			p.Annotations[k] = &v
		} else {
			p.Annotations[k] = nil
		}
	}
}

// targetName is the name of the ElasticIP the active Pod wants: the one it names, or
// its own (named after it).
func (in inputs) targetName() string {
	if in.Auto.ElasticIPName != "" {
		return in.Auto.ElasticIPName
	}
	return in.Name
}

// target is the ElasticIP the active Pod uses: the one it names, or its own.
func (in inputs) target() *v1alpha1.ElasticIP {
	if in.Auto.ElasticIPName != "" {
		return in.NamedEIP
	}
	return in.OwnEIP
}

// allocatedKeys are the annotations the controller writes back on a Pod.
var allocatedKeys = []string{
	v1alpha1.AnnotationAllocatedEIPName, v1alpha1.AnnotationAllocatedEIPAddr,
	v1alpha1.AliasAllocatedEIPID, v1alpha1.AliasAllocatedEIPAddress, v1alpha1.AliasAllocatedENIID,
}
