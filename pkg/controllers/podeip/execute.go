package podeip

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/annotations"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/controllers/indexes"
	"github.com/loutres/juneau/pkg/status"
)

// execute writes the plan and returns what happened. Creations and deletions that lose
// a race (NotFound, Conflict on a UID precondition, AlreadyExists) are left to the
// event that follows; a patch that loses one is retried; a write the API server refuses
// for good (the webhook, a quota, validation) is reported on the Pod and not retried
// until something changes.
func (c *Controller) execute(ctx context.Context, in inputs, p plan) *executor {
	x := &executor{c: c, ctx: ctx, in: in, p: p}
	for i := range x.p.Slots {
		x.sp = &x.p.Slots[i]
		x.deleteAttachment()
		x.createEIP()
		x.updateEIP()
		x.deleteEIP()
		x.createAttachment()
	}
	x.sp = nil
	x.patchPod()
	x.writeCondition()
	return x
}

type executor struct {
	c   *Controller
	ctx context.Context
	in  inputs
	p   plan
	// sp is the slot whose writes are being made.
	sp       *slotPlan
	failures []problem
	errs     []error
	// refused says the API server refused a write for good (refusal).
	refused bool
}

// subject is what Events about the Pod's objects are recorded on: the Pod while it
// exists, otherwise the object itself.
func (x *executor) subject(obj runtime.Object) runtime.Object {
	if x.in.Pod != nil {
		return x.in.Pod
	}
	return obj
}

// fail records a failed write. One the API server refused for good (refused) becomes
// the Pod's condition and a Warning Event saying it is not retried and what to fix;
// any other is retried with back-off, with a Warning Event saying so unless it only
// lost a race.
func (x *executor) fail(obj runtime.Object, reason, what string, err error) {
	if refused(err) && !status.AnotherObject(err) {
		x.refused = true
		msg := fmt.Sprintf("%s was refused by the API server: %v. This is not retried until something it depends on changes; fix what the refusal names",
			what, err)
		pr := problem{Object: x.subject(obj), Reason: v1alpha1.ReasonWriteRefused, Message: msg}
		x.failures = append(x.failures, pr)
		if x.in.Pod != nil && x.in.State == podActive {
			x.p.Condition = assignedCondition(false, pr.Reason, pr.Message)
		}
		return
	}
	x.errs = append(x.errs, fmt.Errorf("%s: %w", what, err))
	if benign(err) {
		return
	}
	x.failures = append(x.failures, problem{Object: x.subject(obj), Reason: reason, Message: fmt.Sprintf("%s: %v; it is retried", what, err)})
}

// refused reports a refusal that retrying the same write cannot change: the webhook's
// denial or a quota (Forbidden), validation (Invalid, BadRequest), a body too large.
func refused(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsRequestEntityTooLargeError(err)
}

// benign reports a write that lost a race: the object is gone, changed, already made,
// or is another object of the same name now (status.AnotherObject).
func benign(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || status.AnotherObject(err)
}

func (x *executor) deleteAttachment() {
	a := x.sp.DeleteAttachment
	if a == nil {
		return
	}
	uid := a.UID
	err := x.c.client.JuneauV1alpha1().ElasticIPAttachments(a.Namespace).Delete(x.ctx, a.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil {
		if !benign(err) {
			x.fail(a, v1alpha1.EventFailedDelete, fmt.Sprintf("Deleting ElasticIPAttachment %q", a.Name), err)
		}
		return
	}
	klog.FromContext(x.ctx).V(2).Info("Deleted ElasticIPAttachment", "elasticIPAttachment", klog.KObj(a))
	msg := fmt.Sprintf("Deleted ElasticIPAttachment %q: %s", a.Name, leavingReason(x.in.State, x.sp.slot))
	if x.sp.ReleaseStrategy == v1alpha1.ReleaseNever && x.sp.OwnEIP != nil {
		msg += fmt.Sprintf("; ElasticIP %q is kept (release strategy %s)", x.sp.OwnEIP.Name, v1alpha1.ReleaseNever)
	}
	status.Eventf(x.c.recorder, x.subject(a), v1alpha1.EventAttachmentDeleted, "%s", msg)
}

func leavingReason(st podState, s slot) string {
	switch st {
	case podGone:
		return "the Pod is gone"
	case podFinished:
		return "the Pod has finished"
	case podNotAsking:
		return "the Pod no longer asks for an ElasticIP"
	case podActive:
		if !s.active() {
			return fmt.Sprintf("the Pod no longer asks for an %s ElasticIP", s.Family)
		}
	}
	return "it was made for an earlier Pod of this name or for another ElasticIP"
}

func (x *executor) createEIP() {
	eip := x.sp.CreateEIP
	if eip == nil {
		return
	}
	_, err := x.c.client.JuneauV1alpha1().ElasticIPs(eip.Namespace).Create(x.ctx, eip,
		metav1.CreateOptions{FieldManager: v1alpha1.FieldManagerController})
	switch {
	case apierrors.IsAlreadyExists(err):
		return // the cache lags; the ElasticIP's event brings us back
	case err != nil:
		x.fail(eip, v1alpha1.EventFailedCreate, fmt.Sprintf("Creating ElasticIP %q", eip.Name), err)
		return
	}
	klog.FromContext(x.ctx).V(2).Info("Created ElasticIP", "elasticIP", klog.KObj(eip), "externalNetwork", eip.Spec.ExternalNetwork)
	status.Eventf(x.c.recorder, x.in.Pod, v1alpha1.EventElasticIPCreated,
		"Created ElasticIP %q from ExternalNetwork %q", eip.Name, eip.Spec.ExternalNetwork)
}

func (x *executor) updateEIP() {
	eip := x.sp.UpdateEIP
	if eip == nil {
		return
	}
	data, err := eipPatch(x.sp.OwnEIP, eip)
	if err == nil {
		_, err = x.c.client.JuneauV1alpha1().ElasticIPs(eip.Namespace).Patch(x.ctx, eip.Name, types.MergePatchType, data,
			metav1.PatchOptions{FieldManager: v1alpha1.FieldManagerController})
	}
	if err != nil {
		x.fail(eip, v1alpha1.EventFailedUpdate, fmt.Sprintf("Updating ElasticIP %q", eip.Name), err)
		return
	}
	klog.FromContext(x.ctx).V(2).Info("Updated ElasticIP", "elasticIP", klog.KObj(eip))
	before := x.sp.OwnEIP.Annotations[v1alpha1.AnnotationPodGoneSince]
	after := eip.Annotations[v1alpha1.AnnotationPodGoneSince]
	switch {
	case before == "" && after != "":
		status.Eventf(x.c.recorder, eip, v1alpha1.EventReleaseScheduled,
			"Pod %q left: ElasticIP %q will be released at %s (release strategy %s) unless a Pod of that name comes back",
			x.in.Name, eip.Name, x.in.Now.Add(x.sp.RequeueAfter).UTC().Format(time.RFC3339), x.sp.ReleaseStrategy)
	case before != "" && after == "":
		status.Eventf(x.c.recorder, eip, v1alpha1.EventReleaseCancelled,
			"Pod %q is back: ElasticIP %q stays with it", x.in.Name, eip.Name)
	}
}

func (x *executor) deleteEIP() {
	eip := x.sp.DeleteEIP
	if eip == nil {
		return
	}
	uid := eip.UID
	err := x.c.client.JuneauV1alpha1().ElasticIPs(eip.Namespace).Delete(x.ctx, eip.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil {
		if !benign(err) {
			x.fail(eip, v1alpha1.EventFailedDelete, fmt.Sprintf("Releasing ElasticIP %q", eip.Name), err)
		}
		return
	}
	klog.FromContext(x.ctx).V(2).Info("Released ElasticIP", "elasticIP", klog.KObj(eip))
	status.Eventf(x.c.recorder, eip, v1alpha1.EventReleased,
		"Released ElasticIP %q: %s (release strategy %s)", eip.Name, leavingReason(x.in.State, x.sp.slot), x.sp.ReleaseStrategy)
}

// createAttachment creates the Pod's attachment once the ElasticIP is given to the Pod
// (assignments.take): no other Pod has it, in the cache or in this process's memory.
func (x *executor) createAttachment() {
	a := x.sp.CreateAttachment
	if a == nil {
		return
	}
	eipKey, who := indexes.Key(a.Namespace, a.Spec.ElasticIPRef.Name), assigneeOf(x.in.Pod)
	if !x.c.assigned.take(eipKey, who, func() bool {
		others, err := x.c.cachedOthers(a.Namespace, x.in.Name, a.Spec.ElasticIPRef.Name)
		return err != nil || len(others) > 0
	}) {
		return // taken a moment ago: that attachment's event brings this Pod back to wait
	}
	_, err := x.c.client.JuneauV1alpha1().ElasticIPAttachments(a.Namespace).Create(x.ctx, a,
		metav1.CreateOptions{FieldManager: v1alpha1.FieldManagerController})
	switch {
	case apierrors.IsAlreadyExists(err):
		return
	case err != nil:
		x.c.assigned.release(eipKey, who)
		x.fail(a, v1alpha1.EventFailedCreate, fmt.Sprintf("Creating ElasticIPAttachment %q", a.Name), err)
		return
	}
	klog.FromContext(x.ctx).V(2).Info("Created ElasticIPAttachment", "elasticIPAttachment", klog.KObj(a))
	status.Eventf(x.c.recorder, x.in.Pod, v1alpha1.EventAttachmentCreated,
		"Created ElasticIPAttachment %q: ElasticIP %q by NAT to NetworkInterface %q",
		a.Name, a.Spec.ElasticIPRef.Name, a.Spec.TargetRef.NetworkInterfaceName)
}

// patchPod writes the allocated-eip-* annotations with a merge patch of the annotations
// alone. The Pod's UID in the patch makes it fail on a newer Pod of the same name. The
// addresses it writes are written under their locks, once every other Pod carrying them
// has lost them and while the cache still says this Pod holds them (addressbook.go).
func (x *executor) patchPod() {
	if x.p.Annotations == nil {
		return
	}
	pod := x.in.Pod
	key := indexes.Key(pod.Namespace, pod.Name)
	addrs := writtenAddresses(x.p.Annotations)
	if len(addrs) > 0 {
		defer x.c.book.lock(addrs...)()
		if !x.c.stillHolds(x.in, x.p.Slots) {
			return // the holder changed since the plan was made; its event brings us back
		}
		for _, addr := range addrs {
			if err := x.c.takeAddressFromOthers(x.ctx, addr, pod); err != nil {
				x.fail(pod, v1alpha1.EventFailedUpdate, fmt.Sprintf("Writing the allocated ElasticIPs into the annotations of Pod %q", pod.Name), err)
				return
			}
		}
	}
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid": pod.UID, "annotations": x.p.Annotations,
	}})
	if err != nil {
		x.errs = append(x.errs, err)
		return
	}
	_, err = x.c.kube.CoreV1().Pods(pod.Namespace).Patch(x.ctx, pod.Name, types.MergePatchType, data,
		metav1.PatchOptions{FieldManager: v1alpha1.FieldManagerController})
	if err != nil {
		if !benign(err) {
			x.fail(pod, v1alpha1.EventFailedUpdate, fmt.Sprintf("Writing the allocated ElasticIPs into the annotations of Pod %q", pod.Name), err)
		}
		return
	}
	for _, old := range carriedAddresses(pod) {
		if !slices.Contains(addrs, old) {
			x.c.book.erased(old, key)
		}
	}
	if len(addrs) == 0 {
		klog.FromContext(x.ctx).V(2).Info("Removed the allocated ElasticIPs from the Pod's annotations", "addresses", carriedAddresses(pod))
		return
	}
	for _, sp := range x.p.Slots {
		if !sp.Held {
			continue
		}
		eip := sp.Usable
		x.c.book.wrote(eip.Status.Address, key, pod.UID)
		if _, addrKey := annotations.WrittenBackKeys(eip.Spec.Family()); pod.Annotations[addrKey] == eip.Status.Address {
			continue // told before
		}
		klog.FromContext(x.ctx).V(2).Info("Wrote the allocated ElasticIP into the Pod", "elasticIP", eip.Name, "address", eip.Status.Address)
		status.Eventf(x.c.recorder, pod, v1alpha1.EventAllocated, "ElasticIP %q has address %s", eip.Name, eip.Status.Address)
	}
}

// stillHolds reads the ElasticIPs and attachments of the slots the Pod holds again from
// the cache and says whether the Pod still holds every one (holding).
func (c *Controller) stillHolds(in inputs, slots []slotPlan) bool {
	for _, sp := range slots {
		if !sp.Held {
			continue
		}
		eip, err := c.eips.ElasticIPs(in.Namespace).Get(sp.target())
		if err != nil {
			return false
		}
		a, err := c.atts.ElasticIPAttachments(in.Namespace).Get(sp.Name)
		if err != nil {
			return false
		}
		s := sp.slot
		s.Attachment = a
		if !holding(in, s, eip) {
			return false
		}
	}
	return true
}
