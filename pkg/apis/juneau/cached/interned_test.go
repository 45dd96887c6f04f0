package cached

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/heap"
)

// TestLean: an object leaned keeps every value but managedFields, its repeated strings
// are the one copy unique keeps, its message is not interned, and leaning again changes
// nothing.
func TestLean(t *testing.T) {
	c := strings.Clone // strings of their own, as a decoder makes them
	e := &v1alpha1.ElasticIP{
		ObjectMeta: metav1.ObjectMeta{Name: "web-eip", Namespace: "shop",
			Labels: map[string]string{c("juneau.loutres.me/pod"): "web"}, Annotations: map[string]string{c("note"): "x"},
			Finalizers:      []string{c(v1alpha1.FinalizerElasticIP)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: c("v1"), Kind: c("Pod"), Name: "web"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Status: v1alpha1.ElasticIPStatus{Conditions: []metav1.Condition{{Type: c("Allocated"), Status: metav1.ConditionStatus(c("True")),
			Reason: c("Allocated"), Message: c("address 10.225.51.5 from pool blue")}}},
	}
	want := e.DeepCopy()
	want.ManagedFields = nil
	got, err := Lean(e)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("leaned (-want +got):\n%s", d)
	}
	l := got.(*v1alpha1.ElasticIP)
	repeated := []string{l.Finalizers[0], l.OwnerReferences[0].APIVersion, l.OwnerReferences[0].Kind,
		l.Status.Conditions[0].Type, string(l.Status.Conditions[0].Status), l.Status.Conditions[0].Reason}
	for k := range l.Labels {
		repeated = append(repeated, k)
	}
	for k := range l.Annotations {
		repeated = append(repeated, k)
	}
	for _, s := range repeated {
		if !heap.Interned(s) {
			t.Errorf("%q is not interned", s)
		}
	}
	if m := l.Status.Conditions[0].Message; heap.Interned(m) {
		t.Errorf("the message %q is interned", m)
	}
	again, _ := Lean(l.DeepCopy())
	if d := cmp.Diff(got, again); d != "" {
		t.Errorf("leaned twice (-once +twice):\n%s", d)
	}
	if got, _ := Lean("no metadata"); got != "no metadata" {
		t.Errorf("an object without metadata came back as %v", got)
	}
}
