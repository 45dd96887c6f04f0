package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/node/bgp"
	"github.com/loutres/juneau/pkg/status"
)

// writeReadiness sets the readiness-gate conditions of this Node's Pods that list them
// (juneau's and the managed-cloud name), patching only those whose condition changes.
func (a *Agent) writeReadiness(ctx context.Context, in Inputs, d Desired, announced bgp.Status) error {
	if a.listers.Pods == nil || a.kube == nil {
		return nil
	}
	r, err := a.readinessInputs(in, announced)
	if err != nil {
		return err
	}
	for _, pr := range ComputeReadiness(in, d, r) {
		if !pr.changed() {
			continue
		}
		if err := a.patchGate(ctx, pr); err != nil {
			return err
		}
	}
	return nil
}

func (a *Agent) readinessInputs(in Inputs, announced bgp.Status) (ReadinessInputs, error) {
	r := ReadinessInputs{ElasticIPs: in.ElasticIPs, Networks: map[string]*v1alpha1.ExternalNetwork{},
		Announced: func(addr netip.Addr) bool { return announced.AnnouncedTo(iprange.HostPrefix(addr)) > 0 },
		Routed: func(addr netip.Addr) bool {
			if a.host == nil {
				return false
			}
			_, ok := a.host(addr)
			return ok
		}}
	var err error
	if r.Pods, err = a.listers.Pods.List(labels.Everything()); err != nil {
		return r, err
	}
	r.NICs = in.NICs
	nets, err := a.listers.Networks.List(labels.Everything())
	if err != nil {
		return r, err
	}
	for _, n := range nets {
		r.Networks[n.Name] = n
	}
	return r, nil
}

// patchGate writes the Pod's gate conditions, one per type it lists, with a strategic
// merge patch of pods/status (conditions merge by type, so the kubelet's conditions stay
// untouched).
func (a *Agent) patchGate(ctx context.Context, r Readiness) error {
	want := corev1.ConditionFalse
	if r.Ready {
		want = corev1.ConditionTrue
	}
	conds := make([]corev1.PodCondition, 0, len(r.Types))
	for _, t := range r.Types {
		cond := corev1.PodCondition{
			Type: corev1.PodConditionType(t), Status: want,
			Reason: r.Reason, Message: r.Message, LastTransitionTime: metav1.NewTime(a.cfg.Clock.Now()),
		}
		if old := status.PodCondition(r.Pod, t); old != nil && old.Status == want {
			cond.LastTransitionTime = old.LastTransitionTime
		}
		conds = append(conds, cond)
	}
	// The Pod's UID guards the patch: a Pod of the same name made again (on another
	// Node, perhaps) while this agent's cache still holds the old one is not touched.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": r.Pod.UID},
		"status": map[string]any{"conditions": conds}})
	if err != nil {
		return err
	}
	asked := a.cfg.Clock.Now()
	written, err := a.kube.CoreV1().Pods(r.Pod.Namespace).Patch(ctx, r.Pod.Name, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{FieldManager: v1alpha1.FieldManagerNode}, "status")
	a.waitedSince(asked)
	if apierrors.IsNotFound(err) || status.AnotherObject(err) {
		klog.FromContext(ctx).V(2).Info("Pod gone or made again before its readiness gate was written", "pod", klog.KObj(r.Pod), "uid", r.Pod.UID)
		return nil
	}
	if err != nil {
		return fmt.Errorf("setting readiness gate of Pod %s/%s: %w", r.Pod.Namespace, r.Pod.Name, err)
	}
	a.wrote(written)
	if r.Ready {
		if old := status.PodCondition(r.Pod, r.Types[0]); old == nil || old.Status != corev1.ConditionTrue {
			a.metrics.observePodReady(a.cfg.Clock.Since(r.Pod.CreationTimestamp.Time))
		}
	}
	klog.FromContext(ctx).V(2).Info("Set readiness gate", "pod", klog.KObj(r.Pod), "ready", r.Ready, "reason", r.Reason)
	return nil
}
