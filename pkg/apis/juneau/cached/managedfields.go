package cached

import (
	apimeta "k8s.io/apimachinery/pkg/api/meta"
)

// WithoutManagedFields is the transform of the caches that keep objects whole but for
// metadata.managedFields: every informer of `juneau controller`, and the node agent's
// (docs/performance.md#scale). Server-side apply's bookkeeping is read by no role and
// is often the largest part of an object. Writes stay correct without it: an update
// that carries no managedFields leaves the server's as they are, and patches and apply
// never send them. Objects without metadata pass unchanged; trimming twice is trimming
// once.
func WithoutManagedFields(obj any) (any, error) {
	if m, err := apimeta.Accessor(obj); err == nil && m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
