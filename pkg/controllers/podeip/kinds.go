package podeip

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// StatefulSetKind is always a stateful workload: its Pods come back under the same name.
var StatefulSetKind = schema.GroupKind{Group: "apps", Kind: "StatefulSet"}

// ParseWorkloadKinds reads the --stateful-workload-kinds values, each "group/Kind"
// such as "apps.kruise.io/StatefulSet".
func ParseWorkloadKinds(values []string) ([]schema.GroupKind, error) {
	out := make([]schema.GroupKind, 0, len(values))
	for _, v := range values {
		group, kind, ok := strings.Cut(strings.TrimSpace(v), "/")
		if !ok || group == "" || kind == "" || strings.Contains(kind, "/") {
			return nil, fmt.Errorf("stateful workload kind %q: want group/Kind, such as \"apps.kruise.io/StatefulSet\"", v)
		}
		out = append(out, schema.GroupKind{Group: group, Kind: kind})
	}
	return out, nil
}

// isStateful reports whether the Pod comes back under the same name and should find its
// ElasticIP again (docs/reference.md#automatic): a Pod without a controller (created
// directly: whoever made it makes it again by name), or one whose controller is a
// StatefulSet or one of kinds. Pods of other controllers (ReplicaSet, Job, ...) get new
// names and follow their Pod.
func isStateful(pod *corev1.Pod, kinds []schema.GroupKind) bool {
	if pod == nil {
		return false
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		return true
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
	if gk == StatefulSetKind {
		return true
	}
	for _, k := range kinds {
		if gk == k {
			return true
		}
	}
	return false
}
