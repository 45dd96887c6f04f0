package cached

import (
	"unique"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// Lean is the transform of the caches that keep objects whole but for
// metadata.managedFields (WithoutManagedFields), with one copy of the strings that
// thousands of cached objects repeat instead of one per object: the keys of labels and
// annotations, finalizers, owners' kinds and API versions, and the type, status and
// reason of juneau's conditions. A decoder allocates each of those anew for every
// object (docs/performance.md#fewer-pod-conditions-and-one-copy-of-repeated-strings).
// Values that name one object (a label's value, a message) are left as they are.
// Objects without metadata pass unchanged; leaning twice is leaning once.
func Lean(obj any) (any, error) {
	obj, _ = WithoutManagedFields(obj)
	if m, err := apimeta.Accessor(obj); err == nil {
		internMeta(m)
	}
	cs := conditionsOf(obj)
	for i := range cs {
		cs[i].Type, cs[i].Reason = intern(cs[i].Type), intern(cs[i].Reason)
		cs[i].Status = metav1.ConditionStatus(intern(string(cs[i].Status)))
	}
	return obj, nil
}

// conditionsOf returns the conditions of juneau's kinds that a cluster has many of.
func conditionsOf(obj any) []metav1.Condition {
	switch o := obj.(type) {
	case *v1alpha1.ElasticIP:
		return o.Status.Conditions
	case *v1alpha1.ElasticIPAttachment:
		return o.Status.Conditions
	case *v1alpha1.NetworkInterface:
		return o.Status.Conditions
	case *v1alpha1.ARPAdvertisement:
		return o.Status.Conditions
	case *v1alpha1.BGPAdvertisement:
		return o.Status.Conditions
	}
	return nil
}

// internMeta interns, in place, the strings of an object's metadata that many objects
// share.
func internMeta(m metav1.Object) {
	m.SetLabels(internedKeys(m.GetLabels()))
	m.SetAnnotations(internedKeys(m.GetAnnotations()))
	fins := m.GetFinalizers()
	for i := range fins {
		fins[i] = intern(fins[i])
	}
	refs := m.GetOwnerReferences()
	for i := range refs {
		refs[i].APIVersion, refs[i].Kind = intern(refs[i].APIVersion), intern(refs[i].Kind)
	}
}

// internedKeys is m with interned keys, in a map of its own size; nil stays nil.
func internedKeys(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[intern(k)] = v
	}
	return out
}

// intern is the one copy unique keeps of s's value.
func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}
