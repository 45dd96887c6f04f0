// Package cached holds the informer transforms of the Kubernetes objects juneau reads
// but does not own, shared by the controllers and the webhook: a cache keeps of a Pod or
// a Node only what some role reads, so that a cluster's Pods and Nodes cost juneau's
// caches little memory (docs/performance.md#scale).
package cached

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// lastApplied is the annotation `kubectl apply` writes: a copy of the whole manifest,
// often the largest part of a Pod's metadata, and read by no role.
const lastApplied = corev1.LastAppliedConfigAnnotation

// Pod keeps of a Pod its metadata (without managedFields and kubectl's copy of the
// manifest), its Node, host networking and readiness gates, and its phase, IPs and
// conditions: what the controllers and the webhook read. Other objects pass unchanged.
func Pod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		ObjectMeta: meta(pod.ObjectMeta),
		Spec: corev1.PodSpec{NodeName: pod.Spec.NodeName, HostNetwork: pod.Spec.HostNetwork,
			ReadinessGates: pod.Spec.ReadinessGates},
		Status: corev1.PodStatus{Phase: pod.Status.Phase, Conditions: pod.Status.Conditions,
			PodIP: pod.Status.PodIP, PodIPs: pod.Status.PodIPs, HostIP: pod.Status.HostIP, HostIPs: pod.Status.HostIPs},
	}, nil
}

// Node keeps of a Node its metadata (as Pod does), Pod CIDRs and addresses. Other
// objects pass unchanged.
func Node(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return &corev1.Node{
		ObjectMeta: meta(node.ObjectMeta),
		Spec:       corev1.NodeSpec{PodCIDR: node.Spec.PodCIDR, PodCIDRs: node.Spec.PodCIDRs},
		Status:     corev1.NodeStatus{Addresses: node.Status.Addresses},
	}, nil
}

func meta(m metav1.ObjectMeta) metav1.ObjectMeta {
	m.ManagedFields = nil
	if _, ok := m.Annotations[lastApplied]; ok {
		kept := make(map[string]string, len(m.Annotations)-1)
		for k, v := range m.Annotations {
			if k != lastApplied {
				kept[k] = v
			}
		}
		m.Annotations = kept
	}
	return m
}
