// Package trim holds the transforms of the controller's informers: what every cached
// object can do without, dropped before it is stored.
package trim

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ManagedFields is the transform of every informer of `juneau controller`: it drops
// metadata.managedFields, the server-side apply bookkeeping that no controller reads and
// that is often the largest part of an object (docs/performance.md, row 6). Writes stay
// correct without it: an update that carries no managedFields leaves the server's as
// they are, and patches and apply never send them. Objects without metadata pass
// unchanged; trimming twice is trimming once.
func ManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil && m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// Namespace is the transform of the controller's Namespace informer: of a Namespace,
// the ElasticIP controller reads the name and the labels (the networks'
// namespaceSelectors, docs/reference.md#tenancy), so that is all the cache keeps.
// Other objects pass unchanged.
func Namespace(obj any) (any, error) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return obj, nil
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:              ns.Name,
		UID:               ns.UID,
		ResourceVersion:   ns.ResourceVersion,
		DeletionTimestamp: ns.DeletionTimestamp,
		Labels:            ns.Labels,
	}}, nil
}
