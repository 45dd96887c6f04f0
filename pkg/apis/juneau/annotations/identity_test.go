package annotations

import (
	"testing"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func TestAllocationIdentity(t *testing.T) {
	launcher := map[string]string{v1alpha1.LabelKubeVirt: v1alpha1.LabelKubeVirtLauncher}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	tests := []struct {
		name                string
		labels, annotations map[string]string
		want                string
	}{
		{"plain Pod", nil, nil, ""},
		{"launcher with the VM label", with(launcher, v1alpha1.LabelKubeVirtVMName, "vm1"), nil, "vmi.vm1"},
		{"launcher with the domain annotation only", launcher, map[string]string{v1alpha1.AnnotationKubeVirtDomain: "vmi2"}, "vmi.vmi2"},
		{"the label wins over the annotation", with(launcher, v1alpha1.LabelKubeVirtVMName, "vm1"),
			map[string]string{v1alpha1.AnnotationKubeVirtDomain: "vmi2"}, "vmi.vm1"},
		{"launcher naming no VM", launcher, nil, ""},
		{"VM label without the launcher label", map[string]string{v1alpha1.LabelKubeVirtVMName: "vm1"}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := AllocationIdentity(tt.labels, tt.annotations); got != tt.want {
				t.Errorf("AllocationIdentity = %q, want %q", got, tt.want)
			}
		})
	}
}
