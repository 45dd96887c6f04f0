package cached

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/heap"
)

// TestPodMemory: what the controller and the webhook keep of a Pod with an automatic
// ElasticIP as a kubelet and the controller leave it (the kubelet's five conditions,
// the readiness gate, the controller's condition and annotations), decoded from
// protobuf as the informer does: 10,000 of them, as Pod kept them before (every
// condition, no string interned) and as it keeps them now.
func TestPodMemory(t *testing.T) {
	docs := runningPods(t, 10000)
	before := func(obj any) (any, error) {
		p := obj.(*corev1.Pod)
		m := p.ObjectMeta
		m.ManagedFields = nil
		return &corev1.Pod{ObjectMeta: m,
			Spec: corev1.PodSpec{NodeName: p.Spec.NodeName, HostNetwork: p.Spec.HostNetwork, ReadinessGates: p.Spec.ReadinessGates},
			Status: corev1.PodStatus{Phase: p.Status.Phase, Conditions: p.Status.Conditions,
				PodIP: p.Status.PodIP, PodIPs: p.Status.PodIPs, HostIP: p.Status.HostIP, HostIPs: p.Status.HostIPs}}, nil
	}
	decode := func(b []byte) (any, error) {
		p := &corev1.Pod{}
		return p, p.Unmarshal(b)
	}
	was, is := liveBytes(t, docs, decode, before), liveBytes(t, docs, decode, Pod)
	t.Logf("a cached Pod as kept before: %d bytes; now: %d bytes", was, is)
	if is <= 0 || is+600 > was {
		t.Errorf("a cached Pod holds %d bytes, %d before, want 600 less", is, was)
	}
}

// TestLeanMemory: what the controller keeps of an automatic ElasticIP as it leaves one
// (the Pod's label, the release annotation, the Pod as owner, the finalizer, Allocated
// and Attached), decoded from JSON as the informer does: 10,000 of them without
// managedFields (as before) and with the strings they all repeat interned.
func TestLeanMemory(t *testing.T) {
	docs := make([][]byte, 10000)
	for i := range docs {
		name, addr := "web-"+strconv.Itoa(i), fmt.Sprintf("10.225.%d.%d", i>>8, i&255)
		e := &v1alpha1.ElasticIP{
			TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "ElasticIP"},
			ObjectMeta: metav1.ObjectMeta{Name: name + "-eip", Namespace: "shop", UID: types.UID(fmt.Sprintf("5f0c2a8e-8d1b-4a8e-9c1d-%012d", i)),
				ResourceVersion: strconv.Itoa(100000 + i), Generation: 1, CreationTimestamp: metav1.Now(),
				Labels:      map[string]string{v1alpha1.LabelPod: name},
				Annotations: map[string]string{v1alpha1.AnnotationReleaseStrategy: "Follow"},
				Finalizers:  []string{v1alpha1.FinalizerElasticIP},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: name,
					UID: types.UID(fmt.Sprintf("7a1b3c4d-0000-4000-8000-%012d", i))}},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: v1alpha1.FieldManagerController, Operation: metav1.ManagedFieldsOperationUpdate}}},
			Spec: v1alpha1.ElasticIPSpec{ExternalNetwork: "public"},
			Status: v1alpha1.ElasticIPStatus{Phase: v1alpha1.ElasticIPAttached, Address: addr,
				Attachment: &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindElasticIPAttachment, Name: name + "-eip"}},
		}
		for _, c := range []string{v1alpha1.ConditionAllocated, v1alpha1.ConditionAttached} {
			e.Status.Conditions = append(e.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue, Reason: c,
				Message: "address " + addr + " in use", LastTransitionTime: metav1.Now(), ObservedGeneration: 1})
		}
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		docs[i] = b
	}
	decode := func(b []byte) (any, error) {
		e := &v1alpha1.ElasticIP{}
		err := json.Unmarshal(b, e)
		e.TypeMeta = metav1.TypeMeta{} // the client's decoder clears it
		return e, err
	}
	before, after := liveBytes(t, docs, decode, WithoutManagedFields), liveBytes(t, docs, decode, Lean)
	t.Logf("a cached ElasticIP without managedFields: %d bytes; interned: %d bytes", before, after)
	if after <= 0 || after+150 > before {
		t.Errorf("a cached ElasticIP holds %d bytes interned and %d not, want 150 less", after, before)
	}
}

// runningPods are n Pods with automatic ElasticIPs, running, as protobuf.
func runningPods(t *testing.T, n int) [][]byte {
	docs := make([][]byte, n)
	now := metav1.Now()
	for i := range n {
		name := "web-" + strconv.Itoa(i)
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", UID: types.UID(fmt.Sprintf("7a1b3c4d-0000-4000-8000-%012d", i)),
				ResourceVersion: strconv.Itoa(100000 + i), CreationTimestamp: now, Labels: map[string]string{"app": "web"},
				Annotations: map[string]string{v1alpha1.AnnotationPodWithEIP: "true",
					v1alpha1.AnnotationAllocatedEIPAddr: fmt.Sprintf("10.225.%d.%d", i>>8, i&255)},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d4b9c",
					UID: "0b6f1c2e-1111-4000-8000-000000000001"}}},
			Spec: corev1.PodSpec{NodeName: "node-" + strconv.Itoa(i%1000),
				ReadinessGates: []corev1.PodReadinessGate{{ConditionType: v1alpha1.PodConditionElasticIP}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.244.%d.%d", i>>8, i&255),
				PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("10.244.%d.%d", i>>8, i&255)}}, HostIP: "10.225.51.11",
				HostIPs: []corev1.HostIP{{IP: "10.225.51.11"}}},
		}
		for _, c := range []string{string(corev1.PodReadyToStartContainers), string(corev1.PodInitialized), string(corev1.PodReady),
			string(corev1.ContainersReady), string(corev1.PodScheduled), v1alpha1.PodConditionElasticIP, v1alpha1.PodConditionElasticIPAssigned} {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodConditionType(c),
				Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now})
		}
		b, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		docs[i] = b
	}
	return docs
}

// liveBytes is the live heap per object of docs decoded and transformed.
func liveBytes(t *testing.T, docs [][]byte, decode func([]byte) (any, error), transform func(any) (any, error)) int64 {
	return heap.PerObject(docs, func(b []byte) any {
		o, err := decode(b)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := transform(o)
		if err != nil {
			t.Fatal(err)
		}
		return obj
	})
}
