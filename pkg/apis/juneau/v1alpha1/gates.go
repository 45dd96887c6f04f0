package v1alpha1

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// GateTypesOf are the condition types of PodConditionTypes that the Pod lists as
// readiness gates (juneau's gate under either name), in that order.
func GateTypesOf(p *corev1.Pod) []string {
	var out []string
	for _, t := range PodConditionTypes() {
		if slices.ContainsFunc(p.Spec.ReadinessGates, func(g corev1.PodReadinessGate) bool { return string(g.ConditionType) == t }) {
			out = append(out, t)
		}
	}
	return out
}
