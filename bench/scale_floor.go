package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	juneauclient "github.com/loutres/juneau/pkg/generated/clientset/versioned"
)

// podFloor does, without any controller, the API writes the controller makes for a Pod
// with an automatic ElasticIP (the request mix of row 8a's note): the ElasticIP and its
// attachment, their Events, the AllocationClaim, the ElasticIP's two status writes, the
// address written back on the Pod, the NetworkInterface with its status, the
// ARPAdvertisement, the attachment's two status writes and the Pod's condition. The same
// webhook reviews the creates. The scale benchmark's API-write floor.
type podFloor struct {
	kube    kubernetes.Interface
	juneau  juneauclient.Interface
	network string
	next    atomic.Uint32 // addresses handed out
	base    netip.Addr
}

func newPodFloor(kube kubernetes.Interface, juneau juneauclient.Interface, network string) *podFloor {
	return &podFloor{kube: kube, juneau: juneau, network: network, base: netip.MustParsePrefix(scalePool).Addr()}
}

// address hands out the next address of the pool.
func (f *podFloor) address() string {
	a, _ := iprange.Add(f.base, uint64(f.next.Add(1)))
	return a.String()
}

func (f *podFloor) allocate(ctx context.Context, pod *corev1.Pod) error {
	j := f.juneau.JuneauV1alpha1()
	ns, name := pod.Namespace, pod.Name
	owner := *metav1.NewControllerRef(pod, corev1.SchemeGroupVersion.WithKind("Pod"))
	owner.BlockOwnerDeletion = nil
	meta := metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.LabelPod: name}, OwnerReferences: []metav1.OwnerReference{owner}}
	create := metav1.CreateOptions{FieldManager: v1alpha1.FieldManagerController}
	update := metav1.UpdateOptions{FieldManager: v1alpha1.FieldManagerController}
	var eip *v1alpha1.ElasticIP
	err := retried(func() (err error) {
		eip, err = j.ElasticIPs(ns).Create(ctx, &v1alpha1.ElasticIP{ObjectMeta: meta, Spec: v1alpha1.ElasticIPSpec{ExternalNetwork: f.network}}, create)
		return err
	})
	if err != nil {
		return fmt.Errorf("ElasticIP %s: %w", name, err)
	}
	nicName := v1alpha1.NetworkInterfaceName(name, v1alpha1.DefaultInterface)
	var att *v1alpha1.ElasticIPAttachment
	err = retried(func() (err error) {
		att, err = j.ElasticIPAttachments(ns).Create(ctx, &v1alpha1.ElasticIPAttachment{ObjectMeta: meta,
			Spec: v1alpha1.ElasticIPAttachmentSpec{ElasticIPRef: v1alpha1.ElasticIPReference{Name: name},
				TargetRef: v1alpha1.AttachmentTarget{NetworkInterfaceName: nicName}}}, create)
		return err
	})
	if err != nil {
		return fmt.Errorf("ElasticIPAttachment %s: %w", name, err)
	}
	if err := f.event(ctx, pod, "ElasticIPCreated", "ElasticIPAttachmentCreated"); err != nil {
		return err
	}
	addr := f.address()
	if err := retried(func() error {
		_, err := j.AllocationClaims().Create(ctx, &v1alpha1.AllocationClaim{
			ObjectMeta: metav1.ObjectMeta{Name: addr},
			Spec: v1alpha1.AllocationClaimSpec{AddressPool: f.network, Address: addr,
				Consumer: v1alpha1.ConsumerReference{Kind: v1alpha1.ConsumerKindElasticIP, Namespace: ns, Name: name, UID: string(eip.UID)}},
		}, create)
		return err
	}); err != nil {
		return fmt.Errorf("claim %s: %w", addr, err)
	}
	eip.Status = availableStatus(addr, f.network, eip.Generation)
	if eip, err = j.ElasticIPs(ns).UpdateStatus(ctx, eip, update); err != nil {
		return err
	}
	if err := f.event(ctx, pod, "ElasticIPAllocated"); err != nil {
		return err
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		v1alpha1.AnnotationAllocatedEIPName: name, v1alpha1.AnnotationAllocatedEIPAddr: addr}}})
	if _, err := f.kube.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: v1alpha1.FieldManagerController}); err != nil {
		return err
	}
	nicPod := pod.DeepCopy()
	nicPod.Status.PodIP = "10.240.0.1"
	if err := retried(func() error { return createNIC(ctx, f.juneau, nicPod) }); err != nil {
		return fmt.Errorf("NetworkInterface %s: %w", nicName, err)
	}
	if err := retried(func() error {
		_, err := j.ARPAdvertisements().Create(ctx, &v1alpha1.ARPAdvertisement{ObjectMeta: advertisement.Meta("eip-"+ns+"-"+name, advertisement.Of(eip)),
			Spec: v1alpha1.ARPAdvertisementSpec{ExternalNetwork: f.network, Address: addr, NodeName: pod.Spec.NodeName}}, create)
		return err
	}); err != nil {
		return err
	}
	// The agents' load may have marked the address answered, and answered written the
	// ElasticIP's status, since: on a conflict, read it again, as the controller does.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		eip.Status.Phase = v1alpha1.ElasticIPAttached
		_, err := j.ElasticIPs(ns).UpdateStatus(ctx, eip, update)
		if apierrors.IsConflict(err) {
			if got, gerr := j.ElasticIPs(ns).Get(ctx, name, metav1.GetOptions{}); gerr == nil {
				eip = got
			}
		}
		return err
	}); err != nil {
		return err
	}
	for _, reason := range []string{v1alpha1.ReasonWaitingForNetworkInterface, "Attaching"} {
		att.Status = v1alpha1.ElasticIPAttachmentStatus{ElasticIP: addr, Conditions: []metav1.Condition{{Type: v1alpha1.ConditionAttached,
			Status: metav1.ConditionFalse, Reason: reason, Message: "floor", LastTransitionTime: metav1.Now(), ObservedGeneration: att.Generation}}}
		if att, err = j.ElasticIPAttachments(ns).UpdateStatus(ctx, att, update); err != nil {
			return err
		}
	}
	cond, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{{Type: v1alpha1.PodConditionElasticIPAssigned,
		Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonAssigned, Message: "floor", LastTransitionTime: metav1.Now()}}}})
	_, err = f.kube.CoreV1().Pods(ns).Patch(ctx, name, types.StrategicMergePatchType, cond, metav1.PatchOptions{FieldManager: v1alpha1.FieldManagerController}, "status")
	return err
}

// answered makes the write the controller makes once an agent answers for the address
// of a Pod's ElasticIP (the request mix with the agents' load: one more ElasticIP status
// write, 0.6 per allocation, the others coalescing with writes made anyway): the
// ElasticIP's Attached condition.
func (f *podFloor) answered(ctx context.Context, ad *v1alpha1.ARPAdvertisement) error {
	o, ok := advertisement.OwnerOf(ad)
	if !ok {
		return fmt.Errorf("ARPAdvertisement %s names no ElasticIP", ad.Name)
	}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []metav1.Condition{{Type: v1alpha1.ConditionAttached,
		Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAttached, Message: "floor", LastTransitionTime: metav1.Now()}}}})
	_, err := f.juneau.JuneauV1alpha1().ElasticIPs(o.Namespace).Patch(ctx, o.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: v1alpha1.FieldManagerController}, "status")
	return err
}

// retried runs a webhook-reviewed write again, with back-off, while the webhook asks
// for a retry (500 or 429), as the controller's work queue does.
func retried(write func() error) error {
	return retry.OnError(wait.Backoff{Steps: 10, Duration: 5 * time.Millisecond, Factor: 2, Jitter: 0.1}, func(err error) bool {
		return apierrors.IsInternalError(err) || apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err)
	}, write)
}

// event posts one Event on the Pod per reason.
func (f *podFloor) event(ctx context.Context, pod *corev1.Pod, reasons ...string) error {
	for _, reason := range reasons {
		now := metav1.Now()
		if _, err := f.kube.CoreV1().Events(pod.Namespace).Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{GenerateName: pod.Name + "."},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, APIVersion: "v1"},
			Reason:         reason, Message: "floor", Type: corev1.EventTypeNormal, Source: corev1.EventSource{Component: "juneau-controller"},
			FirstTimestamp: now, LastTimestamp: now, Count: 1,
		}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("Event %s: %w", reason, err)
		}
	}
	return nil
}
