package podeip

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/holder"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/status"
)

// The Pod's condition juneau.loutres.me/elastic-ip-assigned (docs/automatic.md#the-pods-condition)
// says whether a Pod that asks for an automatic ElasticIP has it, and if not, why: the
// one place a user looks (kubectl describe pod) names what it waits for — another Pod
// using the ElasticIP, exhausted pools, a refused write, a Pod not scheduled yet. The
// controller is its only writer; the node agent quotes it in the readiness gate's
// message while the Pod has no ElasticIP.

// assignedCondition is the condition with the given status, reason and message.
func assignedCondition(ok bool, reason, message string) *corev1.PodCondition {
	status := corev1.ConditionFalse
	if ok {
		status = corev1.ConditionTrue
	}
	return &corev1.PodCondition{Type: v1alpha1.PodConditionElasticIPAssigned, Status: status, Reason: reason, Message: message}
}

// holdingCondition is the condition of a Pod whose request cannot be acted on: a
// terminating Pod keeps what it has (nil), one whose annotations cannot be read or that
// uses the host network is told why.
func holdingCondition(in inputs) *corev1.PodCondition {
	if in.Pod == nil || in.Pod.DeletionTimestamp != nil || in.Problem == nil {
		return nil
	}
	return assignedCondition(false, in.Problem.Reason, in.Problem.Message)
}

// condition is the condition of a Pod that is gone, finished, not asking or active, from
// the plan made for it. A Pod that never asked gets none. True once the Pod holds every
// ElasticIP it asks for (one per family, or the one it names); otherwise False with what
// the first one it lacks waits for. It may add the Warning a Pod hears about when its
// ElasticIP finds no address.
func (p *plan) condition(in inputs) *corev1.PodCondition {
	pod := in.Pod
	switch {
	case pod == nil:
		return nil
	case in.State != podActive:
		if status.PodCondition(pod, v1alpha1.PodConditionElasticIPAssigned) == nil {
			return nil
		}
		msg := "the Pod no longer asks for an automatic ElasticIP"
		if in.State == podFinished {
			msg = "the Pod has finished"
		}
		return assignedCondition(false, v1alpha1.ReasonNotRequested, msg)
	}
	for _, pr := range p.Problems {
		if pr.Object == pod {
			return assignedCondition(false, pr.Reason, pr.Message)
		}
	}
	var held []string
	for _, sp := range p.Slots {
		switch {
		case !sp.active():
		case sp.Held:
			held = append(held, fmt.Sprintf("ElasticIP %q (%s) is attached to this Pod by NAT through ElasticIPAttachment %q",
				sp.Usable.Name, sp.Usable.Status.Address, sp.Attachment.Name))
		default:
			return p.waiting(in, sp)
		}
	}
	if len(held) == 0 {
		return nil
	}
	return assignedCondition(true, v1alpha1.ReasonAssigned, strings.Join(held, "; "))
}

// waiting is the condition of an active Pod whose slot does not hold its ElasticIP yet,
// saying what it waits for.
func (p *plan) waiting(in inputs, sp slotPlan) *corev1.PodCondition {
	target, eip := sp.target(), sp.Usable
	nicName := v1alpha1.NetworkInterfaceName(in.Name, v1alpha1.DefaultInterface)
	switch {
	case eip == nil && sp.OwnEIP != nil && sp.OwnEIP.DeletionTimestamp != nil && sp.Named == "":
		return assignedCondition(false, v1alpha1.ReasonElasticIPNotReady, fmt.Sprintf(
			"ElasticIP %q is being deleted; a new one is made for this Pod once it is gone", target))
	case eip == nil:
		return assignedCondition(false, v1alpha1.ReasonElasticIPNotReady, fmt.Sprintf("ElasticIP %q is being created", target))
	case eip.Status.Address == "":
		c := meta.FindStatusCondition(eip.Status.Conditions, v1alpha1.ConditionAllocated)
		if c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonNamespaceNotAdmitted {
			// The network stopped admitting the namespace after the Pod was admitted (or
			// the ElasticIP was made while the webhook was away): not a routine step, so
			// the Pod is told, as for a quota (docs/automatic.md#tenancy).
			msg := fmt.Sprintf("ElasticIP %q gets no address: %s", eip.Name, c.Message)
			p.Problems = append(p.Problems, problem{Object: in.Pod, Reason: v1alpha1.ReasonNamespaceNotAdmitted, Message: msg})
			return assignedCondition(false, v1alpha1.ReasonNamespaceNotAdmitted, msg)
		}
		if c != nil && c.Reason == v1alpha1.ReasonNoAddressAvailable {
			msg := fmt.Sprintf("ElasticIP %q has no address: %s. It gets one as soon as an address of its network is released. "+
				"A rolling update that adds a Pod before removing one (maxSurge) needs a spare address for it: add addresses to the pools, or roll with maxSurge 0 and maxUnavailable 1",
				eip.Name, c.Message)
			p.Problems = append(p.Problems, problem{Object: in.Pod, Reason: v1alpha1.ReasonNoAddressAvailable, Message: msg})
			return assignedCondition(false, v1alpha1.ReasonNoAddressAvailable, msg)
		}
		return assignedCondition(false, v1alpha1.ReasonElasticIPNotReady, holder.WaitingFor(eip, v1alpha1.AttachmentReference{}))
	case in.NIC == nil || in.NIC.Spec.PodRef.UID != string(in.Pod.UID):
		return assignedCondition(false, v1alpha1.ReasonWaitingForNetworkInterface, fmt.Sprintf(
			"NetworkInterface %q of this Pod does not exist yet: it is made once the Pod is scheduled to a Node", nicName))
	case sp.Attachment == nil || !isOwnAttachment(sp.Attachment, sp.Name, in.Name) || sp.Attachment.DeletionTimestamp != nil:
		return assignedCondition(false, v1alpha1.ReasonWaitingForElasticIP, fmt.Sprintf(
			"ElasticIPAttachment %q of ElasticIP %q to NetworkInterface %q is being created", sp.Name, eip.Name, nicName))
	}
	a := sp.Attachment
	return assignedCondition(false, v1alpha1.ReasonWaitingForElasticIP,
		holder.WaitingFor(eip, holder.Ref(v1alpha1.AttachmentKindElasticIPAttachment, a.Name, a.UID)))
}

// conditionChanged reports whether the Pod's condition differs from want in status,
// reason or message. A Pod without the condition is not given one for a routine step
// on the way to its ElasticIP (routine): a Pod that gets its ElasticIP at once has one
// write of it, True; one that waited keeps being told how far it got.
func conditionChanged(pod *corev1.Pod, want *corev1.PodCondition) bool {
	c := status.PodCondition(pod, string(want.Type))
	if c == nil {
		return !routine(want)
	}
	return c.Status != want.Status || c.Reason != want.Reason || c.Message != want.Message
}

// routine says the condition is a step every Pod passes through in a second or two.
func routine(c *corev1.PodCondition) bool {
	switch c.Reason {
	case v1alpha1.ReasonElasticIPNotReady, v1alpha1.ReasonWaitingForNetworkInterface, v1alpha1.ReasonWaitingForElasticIP:
		return c.Status == corev1.ConditionFalse
	}
	return false
}

// writeCondition sets the Pod's condition with a strategic merge patch of pods/status
// (conditions merge by type, so the kubelet's and the node agent's stay untouched),
// guarded by the Pod's UID. The transition time changes only when the status does.
func (x *executor) writeCondition() {
	want, pod := x.p.Condition, x.in.Pod
	if want == nil || pod == nil || !conditionChanged(pod, want) {
		return
	}
	cond := *want
	cond.LastTransitionTime = metav1.NewTime(x.c.Clock.Now())
	if old := status.PodCondition(pod, string(want.Type)); old != nil && old.Status == want.Status {
		cond.LastTransitionTime = old.LastTransitionTime
	}
	data, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status":   map[string]any{"conditions": []corev1.PodCondition{cond}},
	})
	if err == nil {
		_, err = x.c.kube.CoreV1().Pods(pod.Namespace).Patch(x.ctx, pod.Name, types.StrategicMergePatchType, data,
			metav1.PatchOptions{FieldManager: v1alpha1.FieldManagerController}, "status")
	}
	if err != nil {
		if !benign(err) {
			x.fail(pod, v1alpha1.EventFailedUpdate, fmt.Sprintf("Setting condition %s of Pod %q", want.Type, pod.Name), err)
		}
		return
	}
	klog.FromContext(x.ctx).V(2).Info("Set the Pod's condition", "type", want.Type, "status", want.Status, "reason", want.Reason)
}
