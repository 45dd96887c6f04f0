package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/annotations"
	"github.com/loutres/juneau/pkg/apis/juneau/messages"
	"github.com/loutres/juneau/pkg/apis/juneau/podaddr"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/apis/juneau/validation"
)

// attachmentRules: the spec rules (immutable references in the same namespace), then
// the ElasticIP exists, is not being deleted, is not used directly and has no other
// attachment; the target NetworkInterface exists (or will: see attachmentTarget), is
// not being deleted, carries no ElasticIP directly and has no other attachment.
func (v *Validators) attachmentRules() rules[*v1alpha1.ElasticIPAttachment] {
	return rules[*v1alpha1.ElasticIPAttachment]{
		create: func(ctx context.Context, a *v1alpha1.ElasticIPAttachment) (field.ErrorList, error) {
			if errs := validation.ValidateElasticIPAttachment(a); len(errs) > 0 {
				return errs, nil
			}
			errs, err := v.attachmentElasticIP(ctx, a)
			if err != nil {
				return nil, err
			}
			nicErrs, err := v.attachmentTarget(ctx, a)
			return append(errs, nicErrs...), err
		},
		update: func(_ context.Context, a, old *v1alpha1.ElasticIPAttachment) (field.ErrorList, error) {
			return validation.ValidateElasticIPAttachmentUpdate(a, old), nil
		},
		unchanged: func(a, old *v1alpha1.ElasticIPAttachment) bool { return equality.Semantic.DeepEqual(a.Spec, old.Spec) },
	}
}

func attachmentPaths() (eip, nic *field.Path) {
	spec := field.NewPath("spec")
	return spec.Child("elasticIPRef", "name"), spec.Child("targetRef", "networkInterfaceName")
}

// attachmentElasticIP checks the referenced ElasticIP.
func (v *Validators) attachmentElasticIP(ctx context.Context, a *v1alpha1.ElasticIPAttachment) (field.ErrorList, error) {
	path, _ := attachmentPaths()
	name := a.Spec.ElasticIPRef.Name
	eip, err := v.r.elasticIP(ctx, a.Namespace, name)
	switch {
	case err != nil:
		return nil, err
	case eip == nil:
		return field.ErrorList{field.Invalid(path, name, fmt.Sprintf("ElasticIP %q does not exist in namespace %q", name, a.Namespace))}, nil
	case eip.DeletionTimestamp != nil:
		return field.ErrorList{field.Invalid(path, name, fmt.Sprintf("ElasticIP %q is being deleted", name))}, nil
	}
	return confirmed(ctx, noErrors, func(ctx context.Context, live bool) (field.ErrorList, error) {
		var errs field.ErrorList
		atts, err := v.r.attachmentsOf(ctx, a.Namespace, name, false, live)
		if err != nil {
			return nil, err
		}
		if others := otherActive(atts, a.Name); len(others) > 0 {
			errs = append(errs, field.Invalid(path, name, fmt.Sprintf(
				"ElasticIP %q is already attached by %s %s: an ElasticIP has at most one ElasticIPAttachment",
				name, messages.Plural(len(others), "ElasticIPAttachment"), messages.Names(others))))
		}
		users, err := v.directUsers(ctx, a.Namespace, name, live)
		if err != nil {
			return nil, err
		}
		if len(users) > 0 {
			errs = append(errs, field.Invalid(path, name, fmt.Sprintf(
				"ElasticIP %q is used directly by %s: an ElasticIP is used either by NAT or directly, not both",
				name, strings.Join(users, "; "))))
		}
		return errs, nil
	})
}

// directUsers describes who uses the ElasticIP directly: every NetworkInterface naming
// it (a deleting one may still carry it), and every live Pod whose annotations name it
// (its NetworkInterface may not exist yet).
func (v *Validators) directUsers(ctx context.Context, namespace, eip string, live bool) ([]string, error) {
	nics, err := v.r.nicsNaming(ctx, namespace, eip, live)
	if err != nil {
		return nil, err
	}
	var nicNames, deleting []string
	covered := map[string]bool{}
	for _, n := range nics {
		covered[n.Spec.PodRef.Name] = true
		if n.DeletionTimestamp != nil {
			deleting = append(deleting, n.Name)
		} else {
			nicNames = append(nicNames, n.Name)
		}
	}
	pods, err := v.r.podsNaming(namespace, eip)
	if err != nil {
		return nil, err
	}
	var podNames []string
	for _, p := range pods {
		if !covered[p.Name] && podRunning(p) {
			podNames = append(podNames, p.Name)
		}
	}
	var users []string
	if len(nicNames) > 0 {
		users = append(users, messages.Plural(len(nicNames), "NetworkInterface")+" "+messages.Names(nicNames))
	}
	if len(deleting) > 0 {
		users = append(users, fmt.Sprintf("%s %s (being deleted)", messages.Plural(len(deleting), "NetworkInterface"), messages.Names(deleting)))
	}
	if len(podNames) > 0 {
		users = append(users, fmt.Sprintf("%s %s (in its direct-use annotations)", messages.Plural(len(podNames), "Pod"), messages.Names(podNames)))
	}
	return users, nil
}

// attachmentTarget checks the target NetworkInterface. A NIC that does not exist yet is
// accepted when its Pod exists and will get it: the controller creates NICs only once a
// Pod is scheduled, and a Pod and its attachment are usually applied together.
func (v *Validators) attachmentTarget(ctx context.Context, a *v1alpha1.ElasticIPAttachment) (field.ErrorList, error) {
	_, path := attachmentPaths()
	name := a.Spec.TargetRef.NetworkInterfaceName
	nic, err := v.r.nic(ctx, a.Namespace, name)
	if errors.Is(err, ErrNoBudget) {
		// Missing from the cache, and no live read left to confirm it: the cache's answer
		// stands, as for a re-check, and the Pod decides (pendingNIC). Its annotations
		// are what a NIC is made from, so a NIC the cache has not seen yet is judged
		// the same way. Refusing instead turned every attachment made with its Pod into
		// retries once the webhook read at its limit (docs/performance.md#scale).
		klog.FromContext(ctx).V(2).Info("NetworkInterface not in the cache and the budget of live reads is spent; its Pod decides", "networkInterface", name)
		nic, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	var errs field.ErrorList
	switch {
	case nic == nil:
		detail, err := v.pendingNIC(ctx, a.Namespace, name)
		if err != nil {
			return nil, err
		}
		if detail != "" {
			errs = append(errs, field.Invalid(path, name, detail))
		}
	case nic.DeletionTimestamp != nil:
		errs = append(errs, field.Invalid(path, name, fmt.Sprintf("NetworkInterface %q is being deleted", name)))
	case nic.Spec.ElasticIP != "":
		errs = append(errs, field.Invalid(path, name, fmt.Sprintf(
			"NetworkInterface %q carries ElasticIP %q directly: a NetworkInterface uses an ElasticIP either directly or by NAT, not both",
			name, nic.Spec.ElasticIP)))
	default:
		if detail := familyMissing(nic, v.attachmentFamily(ctx, a)); detail != "" {
			errs = append(errs, field.Invalid(path, name, detail))
		}
	}
	if len(errs) > 0 {
		return errs, nil
	}
	return confirmed(ctx, noErrors, func(ctx context.Context, live bool) (field.ErrorList, error) {
		atts, err := v.r.attachmentsOf(ctx, a.Namespace, name, true, live)
		if err != nil {
			return nil, err
		}
		others, err := v.sameFamily(ctx, a, atts)
		if err != nil {
			return nil, err
		}
		if others := otherActive(others, a.Name); len(others) > 0 {
			return field.ErrorList{field.Invalid(path, name, fmt.Sprintf(
				"NetworkInterface %q is already the target of %s %s for an %s ElasticIP: a NetworkInterface has at most one ElasticIPAttachment per address family",
				name, messages.Plural(len(others), "ElasticIPAttachment"), messages.Names(others), v.attachmentFamily(ctx, a)))}, nil
		}
		return nil, nil
	})
}

// familyMissing says why a NIC whose Pod addresses are known cannot be the NAT target of
// an ElasticIP of family (it has no address of that family: no NAT64), or "" when it
// can or its addresses are not known yet. A Pod's addresses never change.
func familyMissing(nic *v1alpha1.NetworkInterface, family v1alpha1.IPFamily) string {
	addrs := podaddr.Of(nic)
	if _, ok := podaddr.OfFamily(nic, family); ok || len(addrs) == 0 {
		return ""
	}
	var shown []string
	for _, a := range addrs {
		shown = append(shown, a.String())
	}
	return fmt.Sprintf("NetworkInterface %q of Pod %q has no %s address (%s): an %s ElasticIP is translated only to the Pod's address of its own family (no NAT64)",
		nic.Name, nic.Spec.PodRef.Name, family, strings.Join(shown, ", "), family)
}

// attachmentFamily is the family of the ElasticIP an attachment names: its spec.ipFamily
// (IPv4 when it is missing or unreadable, which other rules report).
func (v *Validators) attachmentFamily(ctx context.Context, a *v1alpha1.ElasticIPAttachment) v1alpha1.IPFamily {
	eip, err := v.r.elasticIP(ctx, a.Namespace, a.Spec.ElasticIPRef.Name)
	if err != nil || eip == nil {
		return v1alpha1.IPv4
	}
	return eip.Spec.Family()
}

// sameFamily keeps the attachments whose ElasticIP is of a's ElasticIP's family: a Pod
// may use an IPv4 and an IPv6 ElasticIP at once, each through its own attachment.
func (v *Validators) sameFamily(ctx context.Context, a *v1alpha1.ElasticIPAttachment, atts []*v1alpha1.ElasticIPAttachment) ([]*v1alpha1.ElasticIPAttachment, error) {
	want := v.attachmentFamily(ctx, a)
	var out []*v1alpha1.ElasticIPAttachment
	for _, o := range atts {
		if o.Name == a.Name {
			continue
		}
		if v.attachmentFamily(ctx, o) == want {
			out = append(out, o)
		}
	}
	return out, nil
}

// pendingNIC says why a missing NetworkInterface will not come, or "" when its Pod
// exists and the controller will create it.
func (v *Validators) pendingNIC(ctx context.Context, namespace, name string) (string, error) {
	dot := strings.LastIndexByte(name, '.')
	podName, iface := name[:dot], name[dot+1:] // validated: <pod>.<interface>
	pod, err := v.r.pod(ctx, namespace, podName)
	switch {
	case err != nil:
		return "", err
	case pod == nil:
		return fmt.Sprintf("NetworkInterface %q does not exist in namespace %q, nor does its Pod %q", name, namespace, podName), nil
	case !podRunning(pod):
		return fmt.Sprintf("NetworkInterface %q does not exist and its Pod %q is terminating or finished", name, podName), nil
	case pod.Spec.HostNetwork:
		return fmt.Sprintf("NetworkInterface %q does not exist: Pod %q uses the host network and gets no NetworkInterfaces", name, podName), nil
	}
	nics, errs := annotations.ParseDirect(pod.Annotations)
	if len(errs) > 0 {
		return fmt.Sprintf("NetworkInterface %q does not exist: the annotations of Pod %q cannot be read (%s)", name, podName, messages.OfErrors(errs)), nil
	}
	i := slices.IndexFunc(nics, func(n annotations.DirectNIC) bool { return n.Interface == iface })
	switch {
	case i >= 0 && nics[i].ElasticIP != "":
		return fmt.Sprintf("NetworkInterface %q will carry ElasticIP %q directly (annotations of Pod %q): a NetworkInterface uses an ElasticIP either directly or by NAT, not both",
			name, nics[i].ElasticIP, podName), nil
	case i < 0 && iface != v1alpha1.DefaultInterface:
		return fmt.Sprintf("NetworkInterface %q does not exist: Pod %q has no interface %q", name, podName, iface), nil
	}
	return "", nil
}

// otherActive are the names of the attachments other than self that are not being deleted.
func otherActive(atts []*v1alpha1.ElasticIPAttachment, self string) []string {
	var out []string
	for _, name := range activeNames(atts) {
		if name != self {
			out = append(out, name)
		}
	}
	return out
}

// podRunning reports whether a Pod still uses its NICs: not terminating, not finished.
func podRunning(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}
