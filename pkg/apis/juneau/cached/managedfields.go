package manager

import (
	"k8s.io/apimachinery/pkg/api/meta"
)

// dropManagedFields is the transform of every informer of `juneau controller`: it drops
// metadata.managedFields, the server-side apply bookkeeping that no controller reads and
// that is often the largest part of an object (docs/performance.md, row 6). Writes stay
// correct without it: an update that carries no managedFields leaves the server's as
// they are, and patches and apply never send them. Objects without metadata pass
// unchanged; trimming twice is trimming once.
func dropManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil && m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
