package cached

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func TestWithoutManagedFieldsDropsOnlyManagedFields(t *testing.T) {
	eip := &v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{
		Name: "web", Namespace: "default", UID: "u", ResourceVersion: "7", Finalizers: []string{"f"},
		Annotations: map[string]string{"a": "b"}, Labels: map[string]string{"l": "v"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}},
	}, Status: v1alpha1.ElasticIPStatus{Address: "10.225.51.5"}}
	want := eip.DeepCopy()
	want.ManagedFields = nil
	for range 2 {
		out, err := WithoutManagedFields(eip)
		if err != nil {
			t.Fatal(err)
		}
		got := out.(*v1alpha1.ElasticIP)
		if got.ManagedFields != nil || got.Name != want.Name || got.ResourceVersion != want.ResourceVersion ||
			got.Finalizers[0] != "f" || got.Annotations["a"] != "b" || got.Labels["l"] != "v" || got.Status.Address != want.Status.Address {
			t.Errorf("trimmed %+v, want %+v", got, want)
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}}}
	if out, _ := WithoutManagedFields(pod); out.(*corev1.Pod).ManagedFields != nil {
		t.Error("a Pod kept its managedFields")
	}
	// A delete tombstone and anything without metadata pass unchanged.
	tomb := cache.DeletedFinalStateUnknown{Key: "default/web", Obj: eip}
	if out, err := WithoutManagedFields(tomb); err != nil || out != any(tomb) {
		t.Errorf("tombstone: %v, %v", out, err)
	}
}
