package cached

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPod(t *testing.T) {
	now := metav1.Now()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop", UID: "u1", ResourceVersion: "7",
			DeletionTimestamp: &now, Labels: map[string]string{"app": "web"},
			Annotations:     map[string]string{"juneau.loutres.me/elastic-ip": "web", lastApplied: `{"kind":"Pod"}`},
			OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: "web"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "web", Image: "nginx"}},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "juneau.loutres.me/elastic-ip-assigned"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.1.5", PodIPs: []corev1.PodIP{{IP: "10.244.1.5"}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
				{Type: "juneau.loutres.me/elastic-ip-assigned", Status: corev1.ConditionTrue, Message: "attached"}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: true}}},
	}
	got, err := Pod(pod)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop", UID: "u1", ResourceVersion: "7",
			DeletionTimestamp: &now, Labels: map[string]string{"app": "web"},
			Annotations:     map[string]string{"juneau.loutres.me/elastic-ip": "web"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: "web"}}},
		Spec: corev1.PodSpec{NodeName: "node-a",
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "juneau.loutres.me/elastic-ip-assigned"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.1.5", PodIPs: []corev1.PodIP{{IP: "10.244.1.5"}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue},
				{Type: "juneau.loutres.me/elastic-ip-assigned", Status: corev1.ConditionTrue, Message: "attached"}}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("cached Pod (-want +got):\n%s", d)
	}
	if len(pod.Status.Conditions) != 4 {
		t.Errorf("the transform changed the Pod's conditions: %+v", pod.Status.Conditions)
	}
	if _, ok := pod.Annotations[lastApplied]; !ok || len(pod.ManagedFields) == 0 {
		t.Errorf("the transform changed the object it was given: %+v", pod.ObjectMeta)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}
	if got, _ := Pod(ns); got != ns {
		t.Errorf("a Namespace did not pass unchanged: %v", got)
	}
}

func TestNode(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "n1", Labels: map[string]string{"zone": "a"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}, ProviderID: "kwok://node-a"},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.225.51.11"}},
			Images: []corev1.ContainerImage{{Names: []string{"nginx"}, SizeBytes: 1 << 20}}},
	}
	got, err := Node(node)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "n1", Labels: map[string]string{"zone": "a"}},
		Spec:       corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.225.51.11"}}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("cached Node (-want +got):\n%s", d)
	}
}
