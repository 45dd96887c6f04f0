package podeip

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func owner1(apiVersion, kind string, controller bool) []func(*corev1.Pod) {
	return []func(*corev1.Pod){func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "o", UID: "uid-o", Controller: &controller}}
	}}
}

func TestParseWorkloadKinds(t *testing.T) {
	got, err := ParseWorkloadKinds([]string{"apps.kruise.io/StatefulSet", " example.com/Thing "})
	want := []schema.GroupKind{{Group: "apps.kruise.io", Kind: "StatefulSet"}, {Group: "example.com", Kind: "Thing"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ParseWorkloadKinds = %v, %v; want %v", got, err, want)
	}
	if got, err := ParseWorkloadKinds(nil); err != nil || len(got) != 0 {
		t.Errorf("ParseWorkloadKinds(nil) = %v, %v", got, err)
	}
	for _, bad := range []string{"StatefulSet", "/StatefulSet", "apps/", "apps.kruise.io/v1/StatefulSet", ""} {
		if _, err := ParseWorkloadKinds([]string{bad}); err == nil {
			t.Errorf("ParseWorkloadKinds(%q) accepted", bad)
		}
	}
}

func TestIsStateful(t *testing.T) {
	kruise := []schema.GroupKind{{Group: "apps.kruise.io", Kind: "StatefulSet"}}
	tests := []struct {
		name  string
		mods  []func(*corev1.Pod)
		kinds []schema.GroupKind
		want  bool
	}{
		{name: "no owner: created directly, re-created by name", want: true},
		{name: "an owner that is not the controller", mods: owner1("apps/v1", "ReplicaSet", false), want: true},
		{name: "StatefulSet", mods: owner1("apps/v1", "StatefulSet", true), want: true},
		{name: "StatefulSet of another version", mods: owner1("apps/v1beta2", "StatefulSet", true), want: true},
		{name: "ReplicaSet", mods: owner1("apps/v1", "ReplicaSet", true)},
		{name: "StatefulSet not as controller: no controller at all", mods: owner1("apps/v1", "StatefulSet", false), want: true},
		{name: "StatefulSet of another group", mods: owner1("apps.kruise.io/v1beta1", "StatefulSet", true)},
		{name: "listed kind", mods: owner1("apps.kruise.io/v1beta1", "StatefulSet", true), kinds: kruise, want: true},
		{name: "unreadable apiVersion", mods: owner1("a/b/c", "StatefulSet", true), kinds: kruise},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := newPod("p", nil, append([]func(*corev1.Pod){ownerless}, tt.mods...)...)
			if got := isStateful(pod, tt.kinds); got != tt.want {
				t.Errorf("isStateful = %v, want %v", got, tt.want)
			}
		})
	}
	if isStateful(nil, kruise) {
		t.Error("isStateful(nil) = true")
	}
}
