package podeip

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/controllers/indexes"
	"github.com/loutres/juneau/pkg/status"
)

// sync reconciles one Pod key and schedules the next look when a release falls due.
func (c *Controller) sync(ctx context.Context, key string) error {
	after, err := c.reconcile(ctx, key)
	if after > 0 {
		c.loop.AddAfter(key, after)
	}
	return err
}

// reconcile reads the caches, plans and writes; it returns when a delayed release of
// the Pod's ElasticIP falls due (0: nothing pending).
func (c *Controller) reconcile(ctx context.Context, key string) (time.Duration, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("pod", klog.KRef(namespace, name)))
	in, err := c.read(namespace, name)
	if err != nil {
		return 0, err
	}
	c.tidyAssignments(in)
	p := planPod(in)
	problems := p.Problems
	if in.Problem != nil {
		problems = append([]problem{*in.Problem}, problems...)
	}
	x := c.execute(ctx, in, p)
	for _, pr := range c.reported.fresh(key, append(problems, x.failures...)) {
		status.Eventf(c.recorder, pr.Object, pr.Reason, "%s", pr.Message)
	}
	after := p.RequeueAfter
	if x.refused && (after == 0 || after > refusedRecheck) {
		after = refusedRecheck
	}
	return after, errors.Join(x.errs...)
}

// refusedRecheck is how soon a write the API server refused is tried again when nothing
// it watches changes before: the refusal may rest on what the controller does not watch
// (a quota, a webhook's rule), and a slow look costs nothing.
const refusedRecheck = time.Minute

// tidyAssignments forgets what was given to a Pod that no longer wants it, and what its
// own attachment, now in the cache, says by itself (contention.go).
func (c *Controller) tidyAssignments(in inputs) {
	podKey := indexes.Key(in.Namespace, in.Name)
	if in.State != podActive {
		if in.State != podHolding {
			c.assigned.forget(podKey, "")
		}
		return
	}
	target := in.targetName()
	c.assigned.forget(podKey, indexes.Key(in.Namespace, target))
	if a := in.Attachment; a != nil && isOwnAttachment(a, in.Name) && a.Spec.ElasticIPRef.Name == target {
		c.assigned.release(indexes.Key(in.Namespace, target), assigneeOf(in.Pod))
	}
}

// read gathers the inputs of one Pod key from the caches.
func (c *Controller) read(namespace, name string) (inputs, error) {
	in := inputs{Namespace: namespace, Name: name, Now: c.clock.Now()}
	var errs [7]error
	in.Pod, errs[0] = orNil(c.pods.Pods(namespace).Get(name))
	in.State, in.Auto, in.Problem = classify(in.Pod)
	in.Stateful = isStateful(in.Pod, c.stateful)
	in.OwnEIP, errs[1] = orNil(c.eips.ElasticIPs(namespace).Get(name))
	in.Attachment, errs[2] = orNil(c.atts.ElasticIPAttachments(namespace).Get(name))
	if in.State == podActive && in.Auto.ElasticIPName != "" {
		in.NamedEIP, errs[3] = orNil(c.eips.ElasticIPs(namespace).Get(in.Auto.ElasticIPName))
	}
	if in.Pod != nil {
		in.NIC, errs[4] = orNil(c.nics.NetworkInterfaces(namespace).Get(v1alpha1.NetworkInterfaceName(name, v1alpha1.DefaultInterface)))
	}
	if in.OwnEIP != nil {
		in.Blockers, errs[5] = c.blockers(in)
	}
	if in.State == podActive {
		errs[6] = c.readOthers(&in)
	}
	if err := errors.Join(errs[:]...); err != nil {
		return in, err
	}
	if in.State == podActive && in.Auto.Enabled && in.OwnEIP == nil {
		nets, err := c.networks.List(labels.Everything())
		if err != nil {
			return in, err
		}
		in.Networks = nets
	}
	return in, nil
}

// readOthers fills in.Others and in.Yield for an active Pod: who else uses the ElasticIP
// it wants, when it has no attachment of its own for it; and, when it has one for an
// ElasticIP it names, whether an older attachment of that ElasticIP makes it give way.
func (c *Controller) readOthers(in *inputs) error {
	target := in.targetName()
	a := in.Attachment
	if a == nil || !isOwnAttachment(a, in.Name) || a.DeletionTimestamp != nil || a.Spec.ElasticIPRef.Name != target || ownedByEarlierPod(a, in.Pod) {
		var err error
		in.Others, err = c.otherUsers(in.Namespace, in.Name, in.Pod.UID, target)
		return err
	}
	if in.Auto.ElasticIPName == "" {
		return nil
	}
	atts, err := indexes.ByIndex[*v1alpha1.ElasticIPAttachment](c.attInf, indexes.AttachmentByElasticIP, indexes.Key(in.Namespace, target))
	if err != nil {
		return err
	}
	if in.Yield = olderAttachment(a, atts); in.Yield {
		in.Others, err = c.cachedOthers(in.Namespace, in.Name, target)
	}
	return err
}

// blockers are the active attachments referencing the Pod's own ElasticIP, other than
// the Pod's own attachment.
func (c *Controller) blockers(in inputs) ([]string, error) {
	atts, err := indexes.ByIndex[*v1alpha1.ElasticIPAttachment](c.attInf, indexes.AttachmentByElasticIP,
		indexes.Key(in.Namespace, in.OwnEIP.Name))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, a := range atts {
		if a.DeletionTimestamp == nil && !(a.Name == in.Name && labelledFor(a, in.Name)) {
			out = append(out, a.Name)
		}
	}
	return out, nil
}

func orNil[T any](obj *T, err error) (*T, error) {
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return obj, err
}

// execute writes the plan and returns what happened. Creations and deletions that lose
// a race (NotFound, Conflict on a UID precondition, AlreadyExists) are left to the
// event that follows; a patch that loses one is retried; a write the API server refuses
// for good (the webhook, a quota, validation) is reported on the Pod and not retried
// until something changes.
func (c *Controller) execute(ctx context.Context, in inputs, p plan) *executor {
	x := &executor{c: c, ctx: ctx, in: in, p: p}
	x.deleteAttachment()
	x.createEIP()
	x.updateEIP()
	x.deleteEIP()
	x.createAttachment()
	x.patchPod()
	x.writeCondition()
	return x
}

type executor struct {
	c        *Controller
	ctx      context.Context
	in       inputs
	p        plan
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
	if refused(err) && !anotherObject(err) {
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
// or is another object of the same name now (anotherObject).
func benign(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || anotherObject(err)
}

// anotherObject reports a patch whose metadata.uid no longer matches: the object of that
// name was deleted and made again (a StatefulSet's Pod). The API server answers such a
// patch as an invalid change of the immutable metadata.uid.
func anotherObject(err error) bool {
	if !apierrors.IsInvalid(err) {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Field == "metadata.uid" {
			return true
		}
	}
	return false
}

func (x *executor) deleteAttachment() {
	a := x.p.DeleteAttachment
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
	msg := fmt.Sprintf("Deleted ElasticIPAttachment %q: %s", a.Name, leavingReason(x.in.State))
	if x.p.ReleaseStrategy == v1alpha1.ReleaseNever && x.in.OwnEIP != nil {
		msg += fmt.Sprintf("; ElasticIP %q is kept (release strategy %s)", x.in.OwnEIP.Name, v1alpha1.ReleaseNever)
	}
	status.Eventf(x.c.recorder, x.subject(a), v1alpha1.EventAttachmentDeleted, "%s", msg)
}

func leavingReason(s podState) string {
	switch s {
	case podGone:
		return "the Pod is gone"
	case podFinished:
		return "the Pod has finished"
	case podNotAsking:
		return "the Pod no longer asks for an ElasticIP"
	}
	return "it was made for an earlier Pod of this name or for another ElasticIP"
}

func (x *executor) createEIP() {
	eip := x.p.CreateEIP
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
	eip := x.p.UpdateEIP
	if eip == nil {
		return
	}
	data, err := eipPatch(x.in.OwnEIP, eip)
	if err == nil {
		_, err = x.c.client.JuneauV1alpha1().ElasticIPs(eip.Namespace).Patch(x.ctx, eip.Name, types.MergePatchType, data,
			metav1.PatchOptions{FieldManager: v1alpha1.FieldManagerController})
	}
	if err != nil {
		x.fail(eip, v1alpha1.EventFailedUpdate, fmt.Sprintf("Updating ElasticIP %q", eip.Name), err)
		return
	}
	klog.FromContext(x.ctx).V(2).Info("Updated ElasticIP", "elasticIP", klog.KObj(eip))
	before := x.in.OwnEIP.Annotations[v1alpha1.AnnotationPodGoneSince]
	after := eip.Annotations[v1alpha1.AnnotationPodGoneSince]
	switch {
	case before == "" && after != "":
		status.Eventf(x.c.recorder, eip, v1alpha1.EventReleaseScheduled,
			"Pod %q left: ElasticIP %q will be released at %s (release strategy %s) unless a Pod of that name comes back",
			x.in.Name, eip.Name, x.in.Now.Add(x.p.RequeueAfter).UTC().Format(time.RFC3339), x.p.ReleaseStrategy)
	case before != "" && after == "":
		status.Eventf(x.c.recorder, eip, v1alpha1.EventReleaseCancelled,
			"Pod %q is back: ElasticIP %q stays with it", x.in.Name, eip.Name)
	}
}

func (x *executor) deleteEIP() {
	eip := x.p.DeleteEIP
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
		"Released ElasticIP %q: %s (release strategy %s)", eip.Name, leavingReason(x.in.State), x.p.ReleaseStrategy)
}

// createAttachment creates the Pod's attachment once the ElasticIP is given to the Pod
// (assignments.take): no other Pod has it, in the cache or in this process's memory.
func (x *executor) createAttachment() {
	a := x.p.CreateAttachment
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
// alone. The Pod's UID in the patch makes it fail on a newer Pod of the same name. An
// address is written under its lock, once every other Pod carrying it has lost it and
// while the cache still says this Pod holds it (addressbook.go).
func (x *executor) patchPod() {
	if x.p.Annotations == nil {
		return
	}
	pod := x.in.Pod
	key := indexes.Key(pod.Namespace, pod.Name)
	name, addr := x.p.Annotations[v1alpha1.AnnotationAllocatedEIPName], x.p.Annotations[v1alpha1.AnnotationAllocatedEIPAddr]
	if addr != nil {
		defer x.c.book.lock(*addr)()
		if !x.c.stillHolds(x.in) {
			return // the holder changed since the plan was made; its event brings us back
		}
		if err := x.c.takeAddressFromOthers(x.ctx, *addr, pod); err != nil {
			x.fail(pod, v1alpha1.EventFailedUpdate, fmt.Sprintf("Writing the allocated ElasticIP into the annotations of Pod %q", pod.Name), err)
			return
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
			x.fail(pod, v1alpha1.EventFailedUpdate, fmt.Sprintf("Writing the allocated ElasticIP into the annotations of Pod %q", pod.Name), err)
		}
		return
	}
	for _, old := range carriedAddresses(pod) {
		if addr == nil || old != *addr {
			x.c.book.erased(old, key)
		}
	}
	if addr == nil {
		klog.FromContext(x.ctx).V(2).Info("Removed the allocated ElasticIP from the Pod's annotations", "addresses", carriedAddresses(pod))
		return
	}
	x.c.book.wrote(*addr, key, pod.UID)
	klog.FromContext(x.ctx).V(2).Info("Wrote the allocated ElasticIP into the Pod", "elasticIP", *name, "address", *addr)
	status.Eventf(x.c.recorder, pod, v1alpha1.EventAllocated, "ElasticIP %q has address %s", *name, *addr)
}

// stillHolds reads the Pod's ElasticIP and attachment again from the cache and says
// whether the Pod still holds it (holding).
func (c *Controller) stillHolds(in inputs) bool {
	eip, err := c.eips.ElasticIPs(in.Namespace).Get(in.targetName())
	if err != nil {
		return false
	}
	a, err := c.atts.ElasticIPAttachments(in.Namespace).Get(in.Name)
	if err != nil {
		return false
	}
	in.Attachment = a
	return holding(in, eip)
}
