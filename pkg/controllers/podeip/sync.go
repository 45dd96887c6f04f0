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
	in, prob, err := c.read(namespace, name)
	if err != nil {
		return 0, err
	}
	p := planPod(in)
	problems := p.Problems
	if prob != nil {
		problems = append([]problem{*prob}, problems...)
	}
	failures, err := c.execute(ctx, in, p)
	for _, pr := range c.reported.fresh(key, append(problems, failures...)) {
		status.Eventf(c.recorder, pr.Object, pr.Reason, "%s", pr.Message)
	}
	return p.RequeueAfter, err
}

// read gathers the inputs of one Pod key from the caches.
func (c *Controller) read(namespace, name string) (inputs, *problem, error) {
	in := inputs{Namespace: namespace, Name: name, Now: c.clock.Now()}
	var errs [6]error
	in.Pod, errs[0] = orNil(c.pods.Pods(namespace).Get(name))
	state, auto, prob := classify(in.Pod)
	in.State, in.Auto, in.Stateful = state, auto, isStateful(in.Pod, c.stateful)
	in.OwnEIP, errs[1] = orNil(c.eips.ElasticIPs(namespace).Get(name))
	in.Attachment, errs[2] = orNil(c.atts.ElasticIPAttachments(namespace).Get(name))
	if state == podActive && auto.ElasticIPName != "" {
		in.NamedEIP, errs[3] = orNil(c.eips.ElasticIPs(namespace).Get(auto.ElasticIPName))
	}
	if in.Pod != nil {
		in.NIC, errs[4] = orNil(c.nics.NetworkInterfaces(namespace).Get(v1alpha1.NetworkInterfaceName(name, v1alpha1.DefaultInterface)))
	}
	if in.OwnEIP != nil {
		in.Blockers, errs[5] = c.blockers(in)
	}
	if err := errors.Join(errs[:]...); err != nil {
		return in, nil, err
	}
	if state == podActive && auto.Enabled && in.OwnEIP == nil {
		nets, err := c.networks.List(labels.Everything())
		if err != nil {
			return in, nil, err
		}
		in.Networks = nets
	}
	return in, prob, nil
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

// execute writes the plan. It returns the failures worth a Warning Event and the
// error that makes the key retry. Creations and deletions that lose a race (NotFound,
// Conflict on a UID precondition, AlreadyExists) are left to the event that follows;
// a patch that loses one is retried.
func (c *Controller) execute(ctx context.Context, in inputs, p plan) ([]problem, error) {
	x := executor{c: c, ctx: ctx, in: in, p: p}
	x.deleteAttachment()
	x.createEIP()
	x.updateEIP()
	x.deleteEIP()
	x.createAttachment()
	x.patchPod()
	return x.failures, errors.Join(x.errs...)
}

type executor struct {
	c        *Controller
	ctx      context.Context
	in       inputs
	p        plan
	failures []problem
	errs     []error
}

// subject is what Events about the Pod's objects are recorded on: the Pod while it
// exists, otherwise the object itself.
func (x *executor) subject(obj runtime.Object) runtime.Object {
	if x.in.Pod != nil {
		return x.in.Pod
	}
	return obj
}

// fail records a failed write for a retry, and for a Warning Event unless it only lost
// a race.
func (x *executor) fail(obj runtime.Object, reason, what string, err error) {
	x.errs = append(x.errs, fmt.Errorf("%s: %w", what, err))
	if benign(err) {
		return
	}
	x.failures = append(x.failures, problem{Object: x.subject(obj), Reason: reason, Message: fmt.Sprintf("%s: %v", what, err)})
}

func benign(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
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

func (x *executor) createAttachment() {
	a := x.p.CreateAttachment
	if a == nil {
		return
	}
	_, err := x.c.client.JuneauV1alpha1().ElasticIPAttachments(a.Namespace).Create(x.ctx, a,
		metav1.CreateOptions{FieldManager: v1alpha1.FieldManagerController})
	switch {
	case apierrors.IsAlreadyExists(err):
		return
	case err != nil:
		x.fail(a, v1alpha1.EventFailedCreate, fmt.Sprintf("Creating ElasticIPAttachment %q", a.Name), err)
		return
	}
	klog.FromContext(x.ctx).V(2).Info("Created ElasticIPAttachment", "elasticIPAttachment", klog.KObj(a))
	status.Eventf(x.c.recorder, x.in.Pod, v1alpha1.EventAttachmentCreated,
		"Created ElasticIPAttachment %q: ElasticIP %q by NAT to NetworkInterface %q",
		a.Name, a.Spec.ElasticIPRef.Name, a.Spec.TargetRef.NetworkInterfaceName)
}

// patchPod writes the allocated-eip-* annotations with a merge patch of the annotations
// alone. The Pod's UID in the patch makes it fail on a newer Pod of the same name.
func (x *executor) patchPod() {
	if x.p.Annotations == nil {
		return
	}
	pod := x.in.Pod
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
	name, addr := x.p.Annotations[v1alpha1.AnnotationAllocatedEIPName], x.p.Annotations[v1alpha1.AnnotationAllocatedEIPAddr]
	if name == nil || addr == nil {
		return
	}
	klog.FromContext(x.ctx).V(2).Info("Wrote the allocated ElasticIP into the Pod", "elasticIP", *name, "address", *addr)
	status.Eventf(x.c.recorder, pod, v1alpha1.EventAllocated, "ElasticIP %q has address %s", *name, *addr)
}
