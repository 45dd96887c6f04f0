package networkinterface

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loutres/juneau/pkg/apis/juneau/annotations"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// wanted is what a Pod asks for.
type wanted struct {
	// NICs are the NetworkInterfaces the Pod should have, eth0 first.
	NICs []*v1alpha1.NetworkInterface
	// Manage says whether NICs are created and deleted to match. It is false while the
	// Pod is terminating (its NICs stay until the Pod object is gone: a deleting NIC may
	// still carry an ElasticIP) and while its annotations cannot be read (nothing is
	// guessed: the NICs already there, built from annotations that were readable, are
	// left alone until the annotations are fixed or the Pod goes away).
	Manage bool
	// Problems are the annotation errors, for a Warning Event on the Pod.
	Problems field.ErrorList
	// NetworkUp says the Pod's network is already set up (it has its IP): the CNI
	// plugin plumbed it with the NICs that existed then. Those are never replaced, and a
	// direct NIC made now is marked spec.createdAfterPodNetwork (docs/reference.md#networkinterface).
	NetworkUp bool
}

// podKind is the GroupVersionKind of the ownerReference to a Pod.
var podKind = corev1.SchemeGroupVersion.WithKind("Pod")

// wantedNICs computes the NICs of a Pod (nil when it does not exist). Pods that are not
// scheduled, use the host network or have finished want none.
func wantedNICs(pod *corev1.Pod) wanted {
	switch {
	case pod == nil, pod.Spec.NodeName == "", pod.Spec.HostNetwork,
		pod.Status.Phase == corev1.PodSucceeded, pod.Status.Phase == corev1.PodFailed:
		return wanted{Manage: true}
	case pod.DeletionTimestamp != nil:
		return wanted{}
	}
	direct, errs := annotations.ParseDirect(pod.Annotations)
	if len(errs) > 0 {
		return wanted{Problems: errs}
	}
	ifaces := []annotations.DirectNIC{{Interface: v1alpha1.DefaultInterface}}
	for _, d := range direct {
		if d.Interface == v1alpha1.DefaultInterface {
			ifaces[0] = d
			continue
		}
		ifaces = append(ifaces, d)
	}
	w := wanted{Manage: true, NetworkUp: podNetworkSetUp(pod)}
	for _, d := range ifaces {
		name := v1alpha1.NetworkInterfaceName(pod.Name, d.Interface)
		if msgs := utilvalidation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			// Only a Pod name near the 253-character limit gets here.
			return wanted{Problems: field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), pod.Name,
				fmt.Sprintf("NetworkInterface name %q is not a valid object name: %s", name, strings.Join(msgs, "; ")))}}
		}
		nic := buildNIC(pod, name, d)
		nic.Spec.CreatedAfterPodNetwork = w.NetworkUp && d.ElasticIP != ""
		w.NICs = append(w.NICs, nic)
	}
	return w
}

// podNetworkSetUp reports whether the Pod's sandbox network is up: it has a Pod IP, or
// the kubelet says it is ready to start containers. The CNI plugin has then run for it,
// with the direct NICs that existed at that moment: CNI ADD waits for every direct NIC
// to hold its ElasticIP, so a Pod cannot get its IP before its direct NICs exist, and a
// direct NIC made afterwards comes from annotations the Pod did not have then.
func podNetworkSetUp(pod *corev1.Pod) bool {
	if pod.Status.PodIP != "" || len(pod.Status.PodIPs) > 0 {
		return true
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReadyToStartContainers && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// buildNIC is the NetworkInterface for one interface of a Pod. Its ownerReference is a
// controller reference without blockOwnerDeletion: the controller deletes NICs itself
// (clusters without a garbage collector included), a Pod deletion must never wait for
// its NICs, and setting blockOwnerDeletion would need update rights on pods/finalizers.
func buildNIC(pod *corev1.Pod, name string, d annotations.DirectNIC) *v1alpha1.NetworkInterface {
	ref := metav1.NewControllerRef(pod, podKind)
	ref.BlockOwnerDeletion = nil
	return &v1alpha1.NetworkInterface{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       pod.Namespace,
			OwnerReferences: []metav1.OwnerReference{*ref},
		},
		Spec: v1alpha1.NetworkInterfaceSpec{
			PodRef: v1alpha1.PodReference{
				Name:      pod.Name,
				UID:       string(pod.UID),
				Interface: d.Interface,
			},
			NodeName:           pod.Spec.NodeName,
			ElasticIP:          d.ElasticIP,
			AllocationIdentity: annotations.AllocationIdentity(pod.Labels, pod.Annotations),
		},
	}
}

// plan is what one sync writes.
type plan struct {
	Delete  []*v1alpha1.NetworkInterface
	Create  []*v1alpha1.NetworkInterface
	Update  []*v1alpha1.NetworkInterface // copies with the spec to write
	Current []*v1alpha1.NetworkInterface // existing NICs of the Pod whose status to keep
	// Replacing names wanted NICs whose old object must be gone before they are made
	// again; the old one's delete event brings the Pod back to the queue.
	Replacing []string
	// Kept names NICs the annotations no longer describe that stay, because the Pod's
	// network was set up with them.
	Kept []string
}

// planNICs compares what a Pod wants with the NICs that name it. pod is nil when the Pod
// does not exist. A NIC of another Pod UID belongs to an earlier Pod of the same name,
// which is gone: it is always deleted, and its replacement waits for the deletion. So
// does a NIC whose spec.elasticIP (immutable) no longer matches the annotations, unless
// the Pod's network is already set up: the NICs it was set up with are what it carries,
// and they stay until the Pod goes (the webhook refuses such annotation changes; they
// take effect only in a re-created Pod).
func planNICs(pod *corev1.Pod, w wanted, existing []*v1alpha1.NetworkInterface) plan {
	var p plan
	byName := map[string]*v1alpha1.NetworkInterface{}
	for _, nic := range existing {
		byName[nic.Name] = nic
	}
	blocked := map[string]bool{} // names whose old NIC must be gone first
	for _, nic := range sortedByName(existing) {
		stale := pod == nil || nic.Spec.PodRef.UID != string(pod.UID)
		if !stale {
			p.Current = append(p.Current, nic)
			continue
		}
		blocked[nic.Name] = true
		if nic.DeletionTimestamp == nil {
			p.Delete = append(p.Delete, nic)
		}
	}
	if !w.Manage {
		return p
	}
	want := map[string]*v1alpha1.NetworkInterface{}
	for _, nic := range w.NICs {
		want[nic.Name] = nic
	}
	current := p.Current
	p.Current = nil
	for _, nic := range current {
		desired, ok := want[nic.Name]
		changed := !ok || desired.Spec.ElasticIP != nic.Spec.ElasticIP || nic.Spec.PodRef.Interface != desired.Spec.PodRef.Interface
		switch {
		case changed && w.NetworkUp && nic.DeletionTimestamp == nil:
			p.Kept = append(p.Kept, nic.Name)
			blocked[nic.Name] = true
			p.Current = append(p.Current, nic)
		case changed:
			blocked[nic.Name] = ok
			if nic.DeletionTimestamp == nil {
				p.Delete = append(p.Delete, nic)
			}
		case nic.DeletionTimestamp != nil:
			// Made again once gone; until then it may still carry its ElasticIP, so its
			// status is kept up to date.
			blocked[nic.Name] = true
			p.Current = append(p.Current, nic)
		default:
			p.Current = append(p.Current, nic)
			if spec := updatedSpec(nic.Spec, desired.Spec); spec != nil {
				upd := nic.DeepCopy()
				upd.Spec = *spec
				p.Update = append(p.Update, upd)
			}
		}
	}
	for _, nic := range w.NICs {
		if _, exists := byName[nic.Name]; exists {
			if blocked[nic.Name] && !slices.Contains(p.Kept, nic.Name) {
				p.Replacing = append(p.Replacing, nic.Name)
			}
			continue
		}
		p.Create = append(p.Create, nic)
	}
	return p
}

// updatedSpec returns the spec to write when a mutable field differs, nil otherwise:
// nodeName only from empty to set, allocationIdentity freely (labels can change).
func updatedSpec(have, want v1alpha1.NetworkInterfaceSpec) *v1alpha1.NetworkInterfaceSpec {
	out := have
	if out.NodeName == "" {
		out.NodeName = want.NodeName
	}
	out.AllocationIdentity = want.AllocationIdentity
	if equality.Semantic.DeepEqual(out, have) {
		return nil
	}
	return &out
}

func sortedByName(nics []*v1alpha1.NetworkInterface) []*v1alpha1.NetworkInterface {
	out := slices.Clone(nics)
	slices.SortFunc(out, func(a, b *v1alpha1.NetworkInterface) int { return strings.Compare(a.Name, b.Name) })
	return out
}
