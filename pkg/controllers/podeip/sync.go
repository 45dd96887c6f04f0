package podeip

import (
	"context"
	"errors"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
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
		c.Loop.AddAfter(key, after)
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
// own attachments, now in the cache, say by themselves (contention.go).
func (c *Controller) tidyAssignments(in inputs) {
	podKey := indexes.Key(in.Namespace, in.Name)
	if in.State != podActive {
		if in.State != podHolding {
			c.assigned.forget(podKey)
		}
		return
	}
	var wanted []string
	for _, s := range in.Slots {
		if !s.active() {
			continue
		}
		key := indexes.Key(in.Namespace, s.target())
		wanted = append(wanted, key)
		if a := s.Attachment; a != nil && isOwnAttachment(a, s.Name, in.Name) && a.Spec.ElasticIPRef.Name == s.target() {
			c.assigned.release(key, assigneeOf(in.Pod))
		}
	}
	c.assigned.forget(podKey, wanted...)
}

// read gathers the inputs of one Pod key from the caches.
func (c *Controller) read(namespace, name string) (inputs, error) {
	in := inputs{Namespace: namespace, Name: name, Now: c.Clock.Now()}
	var errs []error
	var err error
	in.Pod, err = orNil(c.pods.Pods(namespace).Get(name))
	errs = append(errs, err)
	in.State, in.Auto, in.Problem = classify(in.Pod)
	in.Stateful = isStateful(in.Pod, c.stateful)
	if in.Pod != nil {
		in.NIC, err = orNil(c.nics.NetworkInterfaces(namespace).Get(v1alpha1.NetworkInterfaceName(name, v1alpha1.DefaultInterface)))
		errs = append(errs, err)
	}
	needNetworks := false
	for _, f := range []v1alpha1.IPFamily{v1alpha1.IPv4, v1alpha1.IPv6} {
		s, err := c.readSlot(in, f)
		errs = append(errs, err)
		needNetworks = needNetworks || s.Wants && s.OwnEIP == nil
		in.Slots = append(in.Slots, s)
	}
	if err := errors.Join(errs...); err != nil {
		return in, err
	}
	if needNetworks {
		nets, err := c.networks.List(labels.Everything())
		if err != nil {
			return in, err
		}
		in.Networks = nets
	}
	return in, nil
}

// readSlot reads the slot of a family (plan.go: slot).
func (c *Controller) readSlot(in inputs, f v1alpha1.IPFamily) (slot, error) {
	s := slot{Family: f, Name: slotName(in.Name, f)}
	active := in.State == podActive
	s.Wants = active && in.Auto.Enabled && slices.Contains(in.Auto.IPFamilies(), f)
	if active && f == v1alpha1.IPv4 {
		s.Named = in.Auto.ElasticIPName
	}
	var errs [5]error
	s.OwnEIP, errs[0] = orNil(c.eips.ElasticIPs(in.Namespace).Get(s.Name))
	s.Attachment, errs[1] = orNil(c.atts.ElasticIPAttachments(in.Namespace).Get(s.Name))
	if s.Named != "" {
		s.NamedEIP, errs[2] = orNil(c.eips.ElasticIPs(in.Namespace).Get(s.Named))
	}
	if s.OwnEIP != nil {
		s.Blockers, errs[3] = c.blockers(in.Namespace, in.Name, s)
	}
	if active && s.active() {
		errs[4] = c.readOthers(in, &s)
	}
	return s, errors.Join(errs[:]...)
}

// readOthers fills s.Others and s.Yield for an active slot: who else uses the ElasticIP
// it wants, when it has no attachment of its own for it; and, when it has one for an
// ElasticIP the Pod names, whether an older attachment of that ElasticIP makes it give
// way.
func (c *Controller) readOthers(in inputs, s *slot) error {
	target := s.target()
	a := s.Attachment
	if a == nil || !isOwnAttachment(a, s.Name, in.Name) || a.DeletionTimestamp != nil || a.Spec.ElasticIPRef.Name != target || ownedByEarlierPod(a, in.Pod) {
		var err error
		s.Others, err = c.otherUsers(in.Namespace, in.Name, in.Pod.UID, target)
		return err
	}
	if s.Named == "" {
		return nil
	}
	atts, err := indexes.ByIndex[*v1alpha1.ElasticIPAttachment](c.attInf, indexes.AttachmentByElasticIP, indexes.Key(in.Namespace, target))
	if err != nil {
		return err
	}
	if s.Yield = olderAttachment(a, atts); s.Yield {
		s.Others, err = c.cachedOthers(in.Namespace, in.Name, target)
	}
	return err
}

// blockers are the active attachments referencing the slot's own ElasticIP, other than
// the slot's own attachment.
func (c *Controller) blockers(namespace, pod string, s slot) ([]string, error) {
	atts, err := indexes.ByIndex[*v1alpha1.ElasticIPAttachment](c.attInf, indexes.AttachmentByElasticIP,
		indexes.Key(namespace, s.OwnEIP.Name))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, a := range atts {
		if a.DeletionTimestamp == nil && !(a.Name == s.Name && labelledFor(a, pod)) {
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
