package networkinterface

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/messages"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/controllers/indexes"
	applyv1alpha1 "github.com/loutres/juneau/pkg/generated/applyconfiguration/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/status"
)

// sync reconciles the NICs of one Pod key: delete the unwanted, create the missing,
// update mutable spec fields, then write each NIC's status.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	logger := klog.FromContext(ctx).WithValues("pod", klog.KRef(namespace, name))
	ctx = klog.NewContext(ctx, logger)

	pod, err := c.pods.Pods(namespace).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		pod = nil
	case err != nil:
		return err
	}
	existing, err := indexes.ByIndex[*v1alpha1.NetworkInterface](c.nicInf, indexes.NICByPod, key)
	if err != nil {
		return err
	}
	w := wantedNICs(pod)
	p := planNICs(pod, w, existing)
	c.reportProblems(pod, key, w.Problems, p.Kept)
	if len(p.Replacing) > 0 {
		logger.V(2).Info("Waiting for old NetworkInterfaces to be gone before making them again", "names", p.Replacing)
	}

	var errs []error
	for _, nic := range p.Delete {
		errs = append(errs, c.deleteNIC(ctx, nic))
	}
	current := p.Current
	for _, nic := range p.Create {
		created, err := c.client.JuneauV1alpha1().NetworkInterfaces(nic.Namespace).Create(ctx, nic,
			metav1.CreateOptions{FieldManager: v1alpha1.FieldManagerController})
		if err != nil {
			errs = append(errs, fmt.Errorf("creating NetworkInterface %s/%s: %w", nic.Namespace, nic.Name, err))
			continue
		}
		logger.V(2).Info("Created NetworkInterface", "networkInterface", klog.KObj(created))
		current = append(current, created)
	}
	for _, nic := range p.Update {
		updated, err := c.client.JuneauV1alpha1().NetworkInterfaces(nic.Namespace).Update(ctx, nic,
			metav1.UpdateOptions{FieldManager: v1alpha1.FieldManagerController})
		if err != nil {
			errs = append(errs, fmt.Errorf("updating NetworkInterface %s/%s: %w", nic.Namespace, nic.Name, err))
			continue
		}
		current = replaceByName(current, updated)
	}
	for _, nic := range current {
		errs = append(errs, c.writeStatus(ctx, nic, pod))
	}
	return errors.Join(errs...)
}

// deleteNIC deletes one NIC, guarded by its UID so a newer NIC of the same name is
// never removed by a decision about an older one.
func (c *Controller) deleteNIC(ctx context.Context, nic *v1alpha1.NetworkInterface) error {
	uid := nic.UID
	err := c.client.JuneauV1alpha1().NetworkInterfaces(nic.Namespace).Delete(ctx, nic.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Already gone, or replaced by a newer NIC whose own events bring us back.
		return nil
	case err != nil:
		return fmt.Errorf("deleting NetworkInterface %s/%s: %w", nic.Namespace, nic.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted NetworkInterface", "networkInterface", klog.KObj(nic))
	return nil
}

// reportProblems emits a Warning Event on the Pod when its annotation problem appears
// or changes: annotations that cannot be read, or NICs kept although the annotations no
// longer describe them.
func (c *Controller) reportProblems(pod *corev1.Pod, key string, problems field.ErrorList, kept []string) {
	if pod == nil {
		c.reported.changed(key, "")
		return
	}
	reason, msg := v1alpha1.EventInvalidAnnotations, problemMessage(problems)
	if msg != "" {
		msg = "No NetworkInterfaces are made for this Pod while its annotations cannot be read: " + msg
	} else if len(kept) > 0 {
		reason = v1alpha1.ReasonPodNetworkAlreadySetUp
		msg = fmt.Sprintf("The Pod's network was set up with %s, which its annotations no longer describe: they are kept, "+
			"and annotations naming ElasticIPs take effect only when the Pod is re-created",
			messages.Kinds("NetworkInterface", kept))
	}
	if msg == "" {
		c.reported.changed(key, "")
		return
	}
	if !c.reported.changed(key, string(pod.UID)+"\x00"+msg) {
		return
	}
	status.Eventf(c.recorder, pod, reason, "%s", msg)
}

// problemMessage joins the errors, each naming its field path.
func problemMessage(problems field.ErrorList) string {
	if len(problems) == 0 {
		return ""
	}
	return messages.OfErrors(problems)
}

// writeStatus applies a NIC's status when it changed, and emits an Event when the Ready
// condition of a direct NIC changes.
func (c *Controller) writeStatus(ctx context.Context, nic *v1alpha1.NetworkInterface, pod *corev1.Pod) error {
	var eip *v1alpha1.ElasticIP
	if nic.Spec.ElasticIP != "" {
		got, err := c.eips.ElasticIPs(nic.Namespace).Get(nic.Spec.ElasticIP)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return err
		default:
			eip = got
		}
	}
	merged := nicStatus(nic, pod, eip)
	merged.SandboxAddresses = nic.Status.SandboxAddresses // the node agent's field
	merged.Conditions = status.Merge(nic.Status.Conditions, merged.Conditions, metav1.NewTime(c.Clock.Now()))
	if equality.Semantic.DeepEqual(merged, nic.Status) {
		return nil
	}
	ready := meta.FindStatusCondition(merged.Conditions, v1alpha1.ConditionReady)
	w := c.status
	// A Vpc NIC only mirrors its Pod's IP; Events are kept for direct NICs, whose
	// readiness says whether the Pod got its ElasticIP.
	if nic.Spec.ElasticIP != "" {
		w.Events = []status.Announced{{Type: v1alpha1.ConditionReady, Policy: readyEvents}}
	}
	_, err := w.Write(ctx, nic, statusApply(nic, merged, ready), nic.Status.Conditions, merged.Conditions,
		"phase", merged.Phase, "address", merged.Address, "reason", ready.Reason)
	return err
}

// statusApply is the apply configuration of the fields this controller owns in a NIC's
// status; a field left out (an address the NIC lost) is removed.
func statusApply(nic *v1alpha1.NetworkInterface, st v1alpha1.NetworkInterfaceStatus, ready *metav1.Condition) *applyv1alpha1.NetworkInterfaceApplyConfiguration {
	sa := applyv1alpha1.NetworkInterfaceStatus().WithPhase(st.Phase)
	if st.Address != "" {
		sa.WithAddress(st.Address)
	}
	sa.WithAddresses(st.Addresses...)
	for _, r := range st.Routes {
		ra := applyv1alpha1.Route().WithDestination(r.Destination).WithOnLink(r.OnLink)
		if r.Gateway != "" {
			ra.WithGateway(r.Gateway)
		}
		if r.Table != 0 {
			ra.WithTable(r.Table)
		}
		sa.WithRoutes(ra)
	}
	for _, r := range st.Rules {
		sa.WithRules(applyv1alpha1.RoutingRule().WithFrom(r.From).WithTable(r.Table).WithPriority(r.Priority))
	}
	if ready != nil {
		sa.WithConditions(status.Apply(*ready))
	}
	return applyv1alpha1.NetworkInterface(nic.Name, nic.Namespace).WithStatus(sa)
}

func replaceByName(nics []*v1alpha1.NetworkInterface, nic *v1alpha1.NetworkInterface) []*v1alpha1.NetworkInterface {
	for i := range nics {
		if nics[i].Name == nic.Name {
			nics[i] = nic
			return nics
		}
	}
	return append(nics, nic)
}

// readyEvents: becoming Ready is Normal, losing Ready is a Warning, a new reason for
// waiting is Normal; the first status of a new NIC is not announced when it is waiting
// (waiting is where every NIC starts).
var readyEvents = status.Policy{Quiet: metav1.ConditionFalse, WarnOnLoss: true}
