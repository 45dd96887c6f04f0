package tenancy

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func network(sel *metav1.LabelSelector) *v1alpha1.ExternalNetwork {
	return &v1alpha1.ExternalNetwork{ObjectMeta: metav1.ObjectMeta{Name: "ext-net"},
		Spec: v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseARP, AddressPools: []string{"p"}, NamespaceSelector: sel}}
}

func TestRefusal(t *testing.T) {
	tenantA := &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "a"}}
	notProd := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "env", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"prod"}}}}
	invalid := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "tenant", Operator: "Near", Values: []string{"a"}}}}
	tests := []struct {
		name   string
		sel    *metav1.LabelSelector
		labels map[string]string
		open   bool
		want   []string // empty: admitted
	}{
		{name: "no selector admits every namespace", sel: nil, open: true},
		{name: "no selector, unlabelled namespace", sel: nil, labels: nil, open: true},
		{name: "empty selector admits every namespace", sel: &metav1.LabelSelector{}, labels: map[string]string{"x": "y"}, open: true},
		{name: "empty lists are empty too", sel: &metav1.LabelSelector{MatchLabels: map[string]string{}, MatchExpressions: []metav1.LabelSelectorRequirement{}}, open: true},
		{name: "matching labels", sel: tenantA, labels: map[string]string{"tenant": "a", "other": "x"}},
		{name: "other value", sel: tenantA, labels: map[string]string{"tenant": "b"},
			want: []string{`ExternalNetwork "ext-net" does not admit namespace "team-b"`, `spec.namespaceSelector "tenant=a"`, "does not match the namespace's labels"}},
		{name: "unlabelled namespace", sel: tenantA, labels: nil,
			want: []string{`does not admit namespace "team-b"`}},
		{name: "expression matching a namespace without the key", sel: notProd, labels: nil},
		{name: "expression not matching", sel: notProd, labels: map[string]string{"env": "prod"},
			want: []string{`spec.namespaceSelector "env notin (prod)"`}},
		{name: "invalid selector admits nobody", sel: invalid, labels: map[string]string{"tenant": "a"},
			want: []string{`does not admit namespace "team-b"`, "spec.namespaceSelector is invalid, so it admits no namespace", "Near"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			net := network(tt.sel)
			if got := Open(net); got != tt.open {
				t.Errorf("Open = %v, want %v", got, tt.open)
			}
			got := Refusal(net, "team-b", tt.labels)
			if len(tt.want) == 0 {
				if got != "" {
					t.Errorf("refused: %s", got)
				}
				return
			}
			if got == "" {
				t.Fatalf("admitted, want refused with %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("refusal lacks %q:\n%s", w, got)
				}
			}
		})
	}
}

// A huge selector makes a short refusal.
func TestRefusalIsBounded(t *testing.T) {
	values := make([]string, 500)
	for i := range values {
		values[i] = strings.Repeat("v", 60) + string(rune('a'+i%26))
	}
	net := network(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "tenant", Operator: metav1.LabelSelectorOpIn, Values: values}}})
	got := Refusal(net, "team-b", map[string]string{"tenant": "none"})
	if got == "" || len(got) > 1024 || !strings.Contains(got, "more bytes") {
		t.Errorf("refusal of %d bytes: %.300s", len(got), got)
	}
}

// TrimNamespace keeps what Refusal reads and drops the rest; tombstones pass.
func TestTrimNamespaceKeepsNameAndLabels(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: "team-b", UID: "u", ResourceVersion: "9", Labels: map[string]string{"tenant": "b"},
		Annotations:   map[string]string{"big": "note"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
		Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	for range 2 { // trimming twice is trimming once
		out, err := TrimNamespace(ns)
		if err != nil {
			t.Fatal(err)
		}
		ns = out.(*corev1.Namespace)
		if ns.Name != "team-b" || ns.UID != "u" || ns.ResourceVersion != "9" || ns.Labels["tenant"] != "b" {
			t.Errorf("trimmed away what is read: %+v", ns.ObjectMeta)
		}
		if ns.Annotations != nil || ns.ManagedFields != nil || ns.Spec.Finalizers != nil || ns.Status.Phase != "" {
			t.Errorf("kept what nothing reads: %+v", ns)
		}
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "team-b", Obj: ns}
	if out, err := TrimNamespace(tomb); err != nil || out != any(tomb) {
		t.Errorf("tombstone: %v, %v", out, err)
	}
}
