package annotations

import "github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"

// AllocationIdentity is the workload identity of a Pod, from its labels and
// annotations: "vmi.<vm>" for a KubeVirt virt-launcher Pod (so the launcher re-created
// on a migration or restart may take over the ElasticIP), "" otherwise. The
// NetworkInterface controller records it in spec.allocationIdentity; the webhook lets a
// Pod of the same identity take over an ElasticIP another Pod's NIC holds.
func AllocationIdentity(labels, annotations map[string]string) string {
	if labels[v1alpha1.LabelKubeVirt] != v1alpha1.LabelKubeVirtLauncher {
		return ""
	}
	name := labels[v1alpha1.LabelKubeVirtVMName]
	if name == "" {
		name = annotations[v1alpha1.AnnotationKubeVirtDomain]
	}
	if name == "" {
		return ""
	}
	return v1alpha1.AllocationIdentityVMIPrefix + name
}
