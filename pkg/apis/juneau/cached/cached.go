// Package cached holds the informer transforms of the Kubernetes objects juneau reads
// but does not own, shared by the controllers and the webhook: a cache keeps of a Pod or
// a Node only what some role reads, so that a cluster's Pods and Nodes cost juneau's
// caches little memory (docs/performance.md#scale).
package cached

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// lastApplied is the annotation `kubectl apply` writes: a copy of the whole manifest,
// often the largest part of a Pod's metadata, and read by no role.
const lastApplied = corev1.LastAppliedConfigAnnotation

// Pod keeps of a Pod its metadata (without managedFields and kubectl's copy of the
// manifest), its Node, host networking and readiness gates, its phase and IPs, and the
// conditions some role reads (readConditions): what the controllers and the webhook
// read. Other objects pass unchanged.
func Pod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		ObjectMeta: meta(pod.ObjectMeta),
		Spec: corev1.PodSpec{NodeName: pod.Spec.NodeName, HostNetwork: pod.Spec.HostNetwork,
			ReadinessGates: pod.Spec.ReadinessGates},
		Status: corev1.PodStatus{Phase: pod.Status.Phase, Conditions: readConditions(pod.Status.Conditions),
			PodIP: pod.Status.PodIP, PodIPs: pod.Status.PodIPs, HostIP: pod.Status.HostIP, HostIPs: pod.Status.HostIPs},
	}, nil
}

// read are the Pod condition types a controller or the webhook reads: the kubelet's
// Ready (the webhook's replicas) and PodReadyToStartContainers (a NetworkInterface's
// readiness), and juneau's own, the readiness gates and the automatic ElasticIP's
// condition. The kubelet's others (Initialized, ContainersReady, PodScheduled) and
// other tools' are read by no role.
var read = append([]string{string(corev1.PodReady), string(corev1.PodReadyToStartContainers),
	v1alpha1.PodConditionElasticIPAssigned}, v1alpha1.PodConditionTypes()...)

// readConditions copies the conditions of the types in read into a slice of their own,
// so the decoded list and the conditions no role reads are not kept alive with it
// (docs/performance.md#fewer-pod-conditions-and-one-copy-of-repeated-strings).
func readConditions(all []corev1.PodCondition) []corev1.PodCondition {
	n := 0
	for i := range all {
		if slices.Contains(read, string(all[i].Type)) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	kept := make([]corev1.PodCondition, 0, n)
	for _, c := range all {
		if slices.Contains(read, string(c.Type)) {
			c.Type = corev1.PodConditionType(intern(string(c.Type)))
			c.Status = corev1.ConditionStatus(intern(string(c.Status)))
			kept = append(kept, c)
		}
	}
	return kept
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

// meta is m without managedFields and kubectl's copy of the manifest, its repeated
// strings interned (internMeta).
func meta(m metav1.ObjectMeta) metav1.ObjectMeta {
	m.ManagedFields = nil
	internMeta(&m) // the labels and annotations in maps of their own
	delete(m.Annotations, lastApplied)
	return m
}
