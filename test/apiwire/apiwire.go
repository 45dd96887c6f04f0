// Package apiwire gives tests juneau's objects as the API server writes them: a
// custom resource's JSON from its unstructured form (keys sorted: apiVersion, kind,
// metadata, spec, status) and watch events, for the tests and benchmarks of the JSON
// decoding (docs/performance.md#decoding-with-fewer-passes).
package apiwire

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// ElasticIP is the i-th of a set of automatic ElasticIPs in namespace shop, attached,
// with the controller's managed fields, and messages holding quotes and brackets.
func ElasticIP(i int) *v1alpha1.ElasticIP {
	name, addr := "web-"+strconv.Itoa(i), fmt.Sprintf("10.225.%d.%d", i>>8&255, i&255)
	e := &v1alpha1.ElasticIP{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "ElasticIP"},
		ObjectMeta: metav1.ObjectMeta{Name: name + "-eip", Namespace: "shop", UID: types.UID(fmt.Sprintf("5f0c2a8e-8d1b-4a8e-9c1d-%012d", i)),
			ResourceVersion: strconv.Itoa(100000 + i), Generation: 1, CreationTimestamp: metav1.Unix(1700000000, 0),
			Labels:      map[string]string{v1alpha1.LabelPod: name},
			Annotations: map[string]string{v1alpha1.AnnotationReleaseStrategy: "Follow"},
			Finalizers:  []string{v1alpha1.FinalizerElasticIP},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: name,
				UID: types.UID(fmt.Sprintf("7a1b3c4d-0000-4000-8000-%012d", i))}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: v1alpha1.FieldManagerController, Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: v1alpha1.SchemeGroupVersion.String(), FieldsType: "FieldsV1",
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{".":{},"f:juneau.loutres.me/pod":{}}},"f:spec":{"f:externalNetwork":{}}}`)}}}},
		Spec: v1alpha1.ElasticIPSpec{ExternalNetwork: "public"},
		Status: v1alpha1.ElasticIPStatus{Phase: v1alpha1.ElasticIPAttached, Address: addr,
			Attachment: &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindElasticIPAttachment, Name: name + "-eip"}},
	}
	for _, c := range []string{v1alpha1.ConditionAllocated, v1alpha1.ConditionAttached} {
		e.Status.Conditions = append(e.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue, Reason: c,
			Message: "address " + addr + " in use \"quoted\" {braces} [brackets]", LastTransitionTime: metav1.Unix(1700000000, 0), ObservedGeneration: 1})
	}
	return e
}

// Object is obj as the API server writes a custom resource.
func Object(t testing.TB, obj any) []byte {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Event is a watch event of obj as the API server writes one, with its newline.
func Event(t testing.TB, typ string, obj any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"type": typ, "object": json.RawMessage(Object(t, obj))})
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}
