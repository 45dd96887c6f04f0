package v1alpha1

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestGateTypesOf(t *testing.T) {
	listing := func(types ...string) *corev1.Pod {
		p := &corev1.Pod{}
		for _, ty := range types {
			p.Spec.ReadinessGates = append(p.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: corev1.PodConditionType(ty)})
		}
		return p
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want []string
	}{
		{listing(), nil},
		{listing("example.com/other"), nil},
		{listing("example.com/other", PodConditionManagedCloudEIP), []string{PodConditionManagedCloudEIP}},
		{listing(PodConditionManagedCloudEIP, PodConditionElasticIP), []string{PodConditionElasticIP, PodConditionManagedCloudEIP}},
	} {
		if got := GateTypesOf(tc.pod); !slices.Equal(got, tc.want) {
			t.Errorf("GateTypesOf(%v) = %v, want %v", tc.pod.Spec.ReadinessGates, got, tc.want)
		}
	}
}
