package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loutres/juneau/pkg/apis/juneau/annotations"
	"github.com/loutres/juneau/pkg/apis/juneau/holder"
	"github.com/loutres/juneau/pkg/apis/juneau/messages"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// podRules: the annotation grammar (annotations.ValidatePod), then for every NIC that
// names an ElasticIP directly: the ElasticIP is not attached by NAT and is not held by
// another running Pod's NIC; for an ElasticIP named in pod-eip-name: no other Pod uses
// it; for pod-with-eip: the network it allocates from admits the Pod's namespace
// (checkAutoNetwork). Updates are checked only when the juneau annotations a user writes change (the
// controller's write-back of allocated-eip-* is not one), and the direct-use
// annotations never change on an existing Pod.
func (v *Validators) podRules() rules[*corev1.Pod] {
	return rules[*corev1.Pod]{
		create: func(ctx context.Context, p *corev1.Pod) (field.ErrorList, error) { return v.checkPod(ctx, p, nil) },
		update: func(ctx context.Context, p, old *corev1.Pod) (field.ErrorList, error) {
			// The grammar's errors come first: they say the most about the annotations.
			if errs := append(annotations.ValidatePod(p.Annotations), directAnnotationsChanged(p, old)...); len(errs) > 0 {
				return errs, nil
			}
			return v.checkPod(ctx, p, old)
		},
		unchanged: func(p, old *corev1.Pod) bool {
			return maps.Equal(requestAnnotations(p.Annotations), requestAnnotations(old.Annotations))
		},
	}
}

// requestAnnotations are the annotations through which a Pod asks for ElasticIPs.
func requestAnnotations(all map[string]string) map[string]string {
	out := map[string]string{}
	compat := annotations.CompatibilityKeys()
	written := annotations.WrittenBack()
	for k, val := range all {
		switch {
		case slices.Contains(written, k):
		case strings.HasPrefix(k, annotations.Prefix), slices.Contains(compat, k):
			out[k] = val
		}
	}
	return out
}

// directAnnotationsChanged refuses adding, changing or removing a direct-use annotation
// on an existing Pod (docs/reference.md#direct-annotations): they are read when the
// Pod's network is set up, and the CNI plugin has plumbed the Pod with what they said
// then, so a change could only name an ElasticIP the Pod never carries.
func directAnnotationsChanged(pod, old *corev1.Pod) field.ErrorList {
	var errs field.ErrorList
	for _, k := range []string{v1alpha1.AnnotationElasticIP, v1alpha1.AnnotationNetworks} {
		was, had := old.Annotations[k]
		is, has := pod.Annotations[k]
		var what string
		switch {
		case had && has && was != is:
			what = "changed on"
		case had && !has:
			what = "removed from"
		case !had && has:
			what = "added to"
		default:
			continue
		}
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "annotations").Key(k), fmt.Sprintf(
			"cannot be %s an existing Pod: the annotations naming ElasticIPs are read when the Pod's network is set up; delete the Pod and create it again with the annotations it should have",
			what)))
	}
	return errs
}

func (v *Validators) checkPod(ctx context.Context, pod, old *corev1.Pod) (field.ErrorList, error) {
	if errs := annotations.ValidatePod(pod.Annotations); len(errs) > 0 {
		return errs, nil
	}
	errs, err := v.checkDirect(ctx, pod, old)
	if err != nil {
		return nil, err
	}
	autoErrs, err := v.checkAuto(ctx, pod, old)
	if err != nil {
		return nil, err
	}
	tenancyErrs, err := v.checkAutoNetwork(ctx, pod, old)
	return append(append(errs, autoErrs...), tenancyErrs...), err
}

// checkDirect checks every NIC that names an ElasticIP directly, on creation (their
// annotations never change on an existing Pod).
func (v *Validators) checkDirect(ctx context.Context, pod, old *corev1.Pod) (field.ErrorList, error) {
	nics, _ := annotations.ParseDirect(pod.Annotations)
	if old != nil {
		if oldNICs, errs := annotations.ParseDirect(old.Annotations); len(errs) == 0 && slices.Equal(nics, oldNICs) {
			return nil, nil // only the automatic-ElasticIP annotations changed
		}
	}
	identity := annotations.AllocationIdentity(pod.Labels, pod.Annotations)
	var errs field.ErrorList
	for _, n := range nics {
		if n.ElasticIP == "" {
			continue
		}
		detail, err := v.directConflict(ctx, pod, n.ElasticIP, identity)
		if err != nil {
			return nil, err
		}
		if detail != "" {
			errs = append(errs, field.Invalid(directPath(pod.Annotations, n), n.ElasticIP, detail))
		}
	}
	return errs, nil
}

// checkAuto checks the ElasticIP a Pod names in pod-eip-name (or the managed-cloud
// pod-eip-instanceid), when it is created or names another one: another Pod must not
// use it (docs/automatic.md#one-elasticip-one-pod), as for direct use. What this cannot
// see — two Pods naming one free ElasticIP admitted together — the controller decides:
// one gets it, the other waits and is told why.
func (v *Validators) checkAuto(ctx context.Context, pod, old *corev1.Pod) (field.ErrorList, error) {
	auto, _ := annotations.ParseAuto(pod.Annotations)
	if auto.ElasticIPName == "" {
		return nil, nil
	}
	if old != nil {
		if was, errs := annotations.ParseAuto(old.Annotations); len(errs) == 0 && was.ElasticIPName == auto.ElasticIPName {
			return nil, nil
		}
	}
	users, err := confirmed(ctx, func(r []string) bool { return len(r) == 0 },
		func(ctx context.Context, live bool) ([]string, error) {
			return v.autoUsers(ctx, pod, auto.ElasticIPName, live)
		})
	if err != nil || len(users) == 0 {
		return nil, err
	}
	return field.ErrorList{field.Invalid(annotations.AutoPath(pod.Annotations, auto), auto.ElasticIPName,
		holder.InUse(auto.ElasticIPName, users)+
			": an ElasticIP serves one Pod at a time; name an ElasticIP no other Pod uses, or delete what uses it first")}, nil
}

// autoUsers describes who, other than the Pod (or an earlier Pod of its name), uses the
// ElasticIP: an active ElasticIPAttachment, unless it was made for a Pod that is gone or
// terminating (it goes with that Pod, and the new Pod takes the ElasticIP over), or
// targets a terminating Pod; a NetworkInterface of a running Pod carrying it directly.
func (v *Validators) autoUsers(ctx context.Context, pod *corev1.Pod, eip string, live bool) ([]string, error) {
	ns := pod.Namespace
	atts, err := v.r.attachmentsOf(ctx, ns, eip, false, live)
	if err != nil {
		return nil, err
	}
	var users []string
	for _, a := range atts {
		podName := holder.PodOf(a)
		if a.DeletionTimestamp != nil || podName == pod.Name {
			continue
		}
		user, err := v.r.pod(ctx, ns, podName)
		if err != nil {
			return nil, err
		}
		automatic := a.Labels[v1alpha1.LabelPod] != ""
		switch {
		case user != nil && !podRunning(user):
			continue // terminating or finished: it hands over
		case user == nil && automatic:
			continue // made for a Pod that is gone: it goes too
		case user == nil:
			users = append(users, holder.AttachmentUser(a, ""))
		default:
			users = append(users, holder.AttachmentUser(a, podName))
		}
	}
	nics, err := v.r.nicsNaming(ctx, ns, eip, live)
	if err != nil {
		return nil, err
	}
	for _, n := range nics {
		if n.Spec.CreatedAfterPodNetwork || n.Spec.PodRef.Name == pod.Name {
			continue
		}
		user, err := v.r.pod(ctx, ns, n.Spec.PodRef.Name)
		if err != nil {
			return nil, err
		}
		if user != nil && string(user.UID) == n.Spec.PodRef.UID && podRunning(user) {
			users = append(users, holder.DirectUser(n))
		}
	}
	return users, nil
}

// directPath is the field path where the annotations give n its ElasticIP: the
// elastic-ip annotation, or the elasticIP field of its entry in the networks list.
func directPath(ann map[string]string, n annotations.DirectNIC) *field.Path {
	base := field.NewPath("metadata", "annotations")
	if n.Interface == v1alpha1.DefaultInterface && ann[v1alpha1.AnnotationElasticIP] == n.ElasticIP {
		return base.Key(v1alpha1.AnnotationElasticIP)
	}
	path := base.Key(v1alpha1.AnnotationNetworks)
	var entries []struct {
		Interface string `json:"interface"`
	}
	// The annotation parsed cleanly before this is called; the decode only finds the index.
	_ = json.Unmarshal([]byte(ann[v1alpha1.AnnotationNetworks]), &entries)
	for i, e := range entries {
		if e.Interface == n.Interface {
			return path.Index(i).Child("elasticIP")
		}
	}
	return path
}

// directConflict says why the Pod cannot use the ElasticIP directly, or "": an
// ElasticIPAttachment uses it, or a NIC of another running Pod holds it. A holder whose
// Pod is terminating, finished or gone, or that has the Pod's allocationIdentity (a
// re-created KubeVirt launcher), hands over: the new Pod's NIC waits for it.
func (v *Validators) directConflict(ctx context.Context, pod *corev1.Pod, eipName, identity string) (string, error) {
	ns := pod.Namespace
	atts, err := confirmed(ctx, func(r []string) bool { return len(r) == 0 },
		func(ctx context.Context, live bool) ([]string, error) {
			atts, err := v.r.attachmentsOf(ctx, ns, eipName, false, live)
			return activeNames(atts), err
		})
	if err != nil {
		return "", err
	}
	if len(atts) > 0 {
		return fmt.Sprintf("ElasticIP %q is attached by NAT through %s %s: an ElasticIP is used either by NAT or directly, not both",
			eipName, messages.Plural(len(atts), "ElasticIPAttachment"), messages.Names(atts)), nil
	}
	eip, err := v.r.elasticIP(ctx, ns, eipName)
	if err != nil {
		return "", err
	}
	holders, err := confirmed(ctx, func(r []string) bool { return len(r) == 0 },
		func(ctx context.Context, live bool) ([]string, error) {
			nics, err := v.r.nicsNaming(ctx, ns, eipName, live)
			if err != nil {
				return nil, err
			}
			var holders []string
			for _, nic := range nics {
				who, err := v.holderInTheWay(ctx, pod, eip, nic, identity)
				if err != nil {
					return nil, err
				}
				if who != "" {
					holders = append(holders, who)
				}
			}
			return holders, nil
		})
	if err != nil || len(holders) == 0 {
		return "", err
	}
	return fmt.Sprintf("ElasticIP %q is held by %s: another Pod can take it over only once that Pod is terminating, or when both have the same allocationIdentity",
		eipName, strings.Join(holders, "; ")), nil
}

// holderInTheWay describes the running Pod whose NIC holds the ElasticIP, or returns ""
// when the NIC is no obstacle: it is the Pod's own, or was made after its Pod's network
// was set up (never plumbed), or is a deleting NIC the ElasticIP did not pick (by UID),
// or its Pod is gone, terminating or finished, or shares the identity.
func (v *Validators) holderInTheWay(ctx context.Context, pod *corev1.Pod, eip *v1alpha1.ElasticIP,
	nic *v1alpha1.NetworkInterface, identity string) (string, error) {
	if nic.Spec.PodRef.UID == string(pod.UID) && pod.UID != "" {
		return "", nil
	}
	if nic.Spec.CreatedAfterPodNetwork {
		return "", nil // never plumbed: it carries nothing (docs/reference.md#networkinterface)
	}
	picked := eip != nil && holder.Is(eip.Status.Attachment, holder.Ref(v1alpha1.AttachmentKindNetworkInterface, nic.Name, nic.UID))
	if nic.DeletionTimestamp != nil && !picked {
		return "", nil
	}
	holder, err := v.r.pod(ctx, nic.Namespace, nic.Spec.PodRef.Name)
	if err != nil || holder == nil || string(holder.UID) != nic.Spec.PodRef.UID || !podRunning(holder) {
		return "", err
	}
	holderID := nic.Spec.AllocationIdentity
	if holderID == "" {
		holderID = annotations.AllocationIdentity(holder.Labels, holder.Annotations)
	}
	if identity != "" && holderID == identity {
		return "", nil
	}
	return fmt.Sprintf("NetworkInterface %q of running Pod %q", nic.Name, holder.Name), nil
}
