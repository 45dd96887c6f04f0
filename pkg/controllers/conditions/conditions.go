// Package conditions merges the conditions a controller computes into those recorded on
// an object, the way every juneau controller writes status.
package conditions

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Merge lays computed over recorded: conditions of other types (other owners) are kept,
// and a condition's lastTransitionTime only moves to now when its status flips.
func Merge(recorded, computed []metav1.Condition, now metav1.Time) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range recorded {
		out = append(out, *c.DeepCopy())
	}
	for _, c := range computed {
		c.LastTransitionTime = now
		meta.SetStatusCondition(&out, c)
	}
	return out
}
