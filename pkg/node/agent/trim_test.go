package agent

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loutres/juneau/pkg/apis/juneau/cached"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/heap"
)

// TestTrimElasticIP: the cached ElasticIP keeps its spec, phase, address and user and
// loses its conditions and the metadata no role of the agent reads; trimming is
// idempotent and leaves other objects alone. An update of the conditions alone leaves
// the trimmed object as it was, so it starts no sync; a new user does.
func TestTrimElasticIP(t *testing.T) {
	bw := int32(5)
	live := func() *v1alpha1.ElasticIP {
		return &v1alpha1.ElasticIP{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-e", ResourceVersion: "42", Generation: 3,
				DeletionTimestamp: &metav1.Time{}, Labels: map[string]string{"app": "web"},
				Annotations:     map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
				OwnerReferences: []metav1.OwnerReference{{Kind: "Pod", Name: "web-0"}}, Finalizers: []string{"x"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
			Spec: v1alpha1.ElasticIPSpec{ExternalNetwork: "ext", BandwidthMbps: &bw},
			Status: v1alpha1.ElasticIPStatus{Phase: v1alpha1.ElasticIPAttached, Address: "10.225.51.8",
				Attachment: &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindElasticIPAttachment, Name: "a", UID: "uid-a"},
				Conditions: []metav1.Condition{{Type: v1alpha1.ConditionAttached, Status: metav1.ConditionTrue, Reason: "Attached", Message: "attached to a"}}},
		}
	}
	e := live()
	want := live()
	want.ObjectMeta = metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-e", ResourceVersion: "42", Generation: 3,
		DeletionTimestamp: e.DeletionTimestamp}
	want.Status.Conditions = nil
	for range 2 {
		got, err := TrimElasticIP(e)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("TrimElasticIP = %+v, %v; want %+v", got, err, want)
		}
	}

	trimmed := func(e *v1alpha1.ElasticIP) any { out, _ := TrimElasticIP(e); return out }
	old, conditions, user := live(), live(), live()
	conditions.ResourceVersion = "43"
	conditions.Status.Conditions[0] = metav1.Condition{Type: v1alpha1.ConditionAttached, Status: metav1.ConditionFalse, Reason: "Blocked", Message: "x"}
	user.ResourceVersion = "44"
	user.Status.Attachment = &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindNetworkInterface, Name: "nic", UID: "uid-n"}
	if !sameButVersion(trimmed(old), trimmed(conditions)) {
		t.Error("an update of the conditions alone would start a sync")
	}
	if sameButVersion(trimmed(old), trimmed(user)) {
		t.Error("an update of the user would start no sync")
	}

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "b"}}}
	if got, err := TrimElasticIP(node); err != nil || got != node || node.Labels["a"] != "b" {
		t.Errorf("TrimElasticIP changed a Node")
	}
}

// TestTrimElasticIPMemory: what every agent keeps of an ElasticIP as the controller
// leaves an automatic one (its Pod's label, release annotation and owner, the Allocated
// and Attached conditions), decoded from JSON as the informer does:
// 10,000 of them, whole (managedFields dropped, as before the trim) and trimmed.
func TestTrimElasticIPMemory(t *testing.T) {
	docs := autoElasticIPs(t, 10000)
	whole, trimmed := cachedBytes(t, docs, cached.WithoutManagedFields), cachedBytes(t, docs, TrimElasticIP)
	t.Logf("an ElasticIP cached whole: %d bytes; trimmed: %d bytes", whole, trimmed)
	if trimmed <= 0 || trimmed > 800 || trimmed*2 > whole {
		t.Errorf("a trimmed ElasticIP holds %d bytes (whole %d), want at most 800 and half", trimmed, whole)
	}
}

// autoElasticIPs are n automatic ElasticIPs as the API server serves them once attached.
func autoElasticIPs(t *testing.T, n int) [][]byte {
	docs := make([][]byte, n)
	for i := range n {
		name := "web-" + strconv.Itoa(i) + "-eip"
		e := &v1alpha1.ElasticIP{
			TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "ElasticIP"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", UID: types.UID(fmt.Sprintf("5f0c2a8e-8d1b-4a8e-9c1d-%012d", i)),
				ResourceVersion: strconv.Itoa(100000 + i), Generation: 1, CreationTimestamp: metav1.Now(),
				Labels:      map[string]string{v1alpha1.LabelPod: "web-" + strconv.Itoa(i)},
				Annotations: map[string]string{v1alpha1.AnnotationReleaseStrategy: "Follow"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web-" + strconv.Itoa(i),
					UID: types.UID(fmt.Sprintf("7a1b3c4d-0000-4000-8000-%012d", i))}}},
			Spec: v1alpha1.ElasticIPSpec{ExternalNetwork: "public"},
			Status: v1alpha1.ElasticIPStatus{Phase: v1alpha1.ElasticIPAttached, Address: fmt.Sprintf("10.225.%d.%d", i>>8, i&255),
				Attachment: &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindElasticIPAttachment, Name: name}},
		}
		for _, c := range []string{v1alpha1.ConditionAllocated, v1alpha1.ConditionAttached} {
			e.Status.Conditions = append(e.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue, Reason: c,
				Message: "address " + e.Status.Address + " attached to ElasticIPAttachment " + name, LastTransitionTime: metav1.Now(), ObservedGeneration: 1})
		}
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		docs[i] = b
	}
	return docs
}

// cachedBytes is the live heap per object of docs decoded and transformed.
func cachedBytes(t *testing.T, docs [][]byte, transform func(any) (any, error)) int64 {
	return heap.PerObject(docs, func(b []byte) any {
		e := &v1alpha1.ElasticIP{}
		if err := json.Unmarshal(b, e); err != nil {
			t.Fatal(err)
		}
		obj, err := transform(e)
		if err != nil {
			t.Fatal(err)
		}
		return obj
	})
}
