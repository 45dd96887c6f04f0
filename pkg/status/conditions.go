// Package status is how every juneau writer (the controllers and the node agent) turns
// the conditions it computes into a status write and into Events: Writer applies a
// component's fields of one kind's status (each kind's writer declared once, kinds.go),
// Merge lays conditions over the recorded ones, One compares a single owned condition,
// Apply makes the server-side apply configuration of one condition, and Policy with
// Announce and Eventf decide which changes deserve an Event and of which type (the
// severity declared beside each reason, v1alpha1.EventType).
package status

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metaapply "k8s.io/client-go/applyconfigurations/meta/v1"
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

// Apply is the server-side apply configuration of one condition, every field set.
// Conditions are a list map keyed by type, so a writer applying only its own types
// leaves the others' alone.
func Apply(c metav1.Condition) *metaapply.ConditionApplyConfiguration {
	return metaapply.Condition().
		WithType(c.Type).
		WithStatus(c.Status).
		WithReason(c.Reason).
		WithMessage(c.Message).
		WithObservedGeneration(c.ObservedGeneration).
		WithLastTransitionTime(c.LastTransitionTime)
}

// PodCondition is the Pod's condition of the type, nil when it has none. The Pod
// conditions juneau writes (the readiness gate, the controller's
// juneau.loutres.me/elastic-ip-assigned) are read through it.
func PodCondition(p *corev1.Pod, t string) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if string(p.Status.Conditions[i].Type) == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}
