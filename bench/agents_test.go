package main

import (
	"context"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/status"
)

// TestGateWriter: the played agent writes a Pod's gate False, then True once its
// address is answered, once per change, and leaves the kubelet's conditions alone.
func TestGateWriter(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}}})
	g := &gateWriter{kube: kube, namespace: "ns", answered: map[string]bool{}, written: map[string]bool{}}
	var writes atomic.Int64
	gate := func(want corev1.ConditionStatus) {
		t.Helper()
		p, err := kube.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c := status.PodCondition(p, v1alpha1.PodConditionElasticIP); c == nil || c.Status != want {
			t.Fatalf("gate %+v, want %s", c, want)
		}
		if c := status.PodCondition(p, string(corev1.PodReady)); c == nil {
			t.Fatal("the kubelet's Ready condition was dropped")
		}
	}
	for range 2 {
		if err := g.write(ctx, "p", &writes); err != nil {
			t.Fatal(err)
		}
	}
	gate(corev1.ConditionFalse)
	g.answer("p")
	for range 2 {
		if err := g.write(ctx, "p", &writes); err != nil {
			t.Fatal(err)
		}
	}
	gate(corev1.ConditionTrue)
	if n := writes.Load(); n != 2 {
		t.Errorf("%d writes, want 2 (one per change)", n)
	}
}
