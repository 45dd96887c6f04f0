// Package podeip tests automatic per-Pod ElasticIPs with `juneau controller` run as a
// process against a real etcd + kube-apiserver. There is no scheduler, kubelet or
// garbage collector: Pods are created bound to a Node name, the test writes their Pod
// IP, and whatever the controller makes it must delete itself.
package podeip

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// startController runs `juneau controller` without leader election.
func startController(t *testing.T, cp *framework.ControlPlane, name string, extra ...string) *framework.Component {
	t.Helper()
	args := append([]string{"controller",
		"--kubeconfig=" + cp.Kubeconfig,
		"--leader-elect=false",
		"--metrics-bind-address=127.0.0.1:0", "--metrics-secure=false",
		"--kube-api-qps=300", "--kube-api-burst=600",
		"-v=2",
	}, extra...)
	return framework.StartComponent(t, name, args...)
}

// network creates an AddressPool over addresses and an ExternalNetwork of type arp on
// it, named prefix plus a random suffix (cluster-scoped names must not clash when the
// tests run again on the same control plane), and returns the network's name.
// isDefault marks it as the network automatic ElasticIPs come from by default. Both
// are deleted when the test ends.
func network(t *testing.T, cp *framework.ControlPlane, prefix string, isDefault bool, addresses ...string) string {
	t.Helper()
	ctx := context.Background()
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	name := prefix + "-" + hex.EncodeToString(b)
	j := cp.Juneau.JuneauV1alpha1()
	if _, err := j.AddressPools().Create(ctx, &v1alpha1.AddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-pool"},
		Spec:       v1alpha1.AddressPoolSpec{AdvertiseMode: v1alpha1.AdvertiseARP, Addresses: addresses},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n := &v1alpha1.ExternalNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseARP, AddressPools: []string{name + "-pool"}},
	}
	if isDefault {
		n.Annotations = map[string]string{v1alpha1.AnnotationDefaultNetwork: "true"}
	}
	if _, err := j.ExternalNetworks().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = j.ExternalNetworks().Delete(ctx, name, metav1.DeleteOptions{})
		_ = j.AddressPools().Delete(ctx, name+"-pool", metav1.DeleteOptions{})
	})
	return name
}

// podSpec is a Pod bound to node-a (there is no scheduler).
func podSpec(name string, annotations map[string]string, owners ...metav1.OwnerReference) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations, OwnerReferences: owners},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}},
			TerminationGracePeriodSeconds: ptr.To[int64](30)},
	}
}

// createPod creates the Pod and writes its Pod IP as a kubelet would.
func createPod(t *testing.T, cp *framework.ControlPlane, ns string, pod *corev1.Pod, podIP string) *corev1.Pod {
	t.Helper()
	created, err := cp.Kube.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return setPodIP(t, cp, created, podIP)
}

// setPodIP writes the Pod's phase and IP with a patch of the status, as a kubelet
// does: the controller may be writing the Pod's annotations at the same time.
func setPodIP(t *testing.T, cp *framework.ControlPlane, pod *corev1.Pod, podIP string) *corev1.Pod {
	t.Helper()
	patch := fmt.Sprintf(`{"status":{"phase":"Running","podIP":%q,"podIPs":[{"ip":%q}]}}`, podIP, podIP)
	updated, err := cp.Kube.CoreV1().Pods(pod.Namespace).Patch(context.Background(), pod.Name, types.MergePatchType,
		[]byte(patch), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	return updated
}

// forceDeletePod removes a Pod at once, as a kubelet does once its containers are gone.
func forceDeletePod(t *testing.T, cp *framework.ControlPlane, ns, name string) {
	t.Helper()
	if err := cp.Kube.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
}

func getEIP(cp *framework.ControlPlane, ns, name string) (*v1alpha1.ElasticIP, bool) {
	eip, err := cp.Juneau.JuneauV1alpha1().ElasticIPs(ns).Get(context.Background(), name, metav1.GetOptions{})
	return eip, err == nil
}

func getAttachment(cp *framework.ControlPlane, ns, name string) (*v1alpha1.ElasticIPAttachment, bool) {
	a, err := cp.Juneau.JuneauV1alpha1().ElasticIPAttachments(ns).Get(context.Background(), name, metav1.GetOptions{})
	return a, err == nil
}

func getPod(cp *framework.ControlPlane, ns, name string) (*corev1.Pod, bool) {
	p, err := cp.Kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	return p, err == nil
}

func eipString(eip *v1alpha1.ElasticIP) string {
	if eip == nil {
		return "<none>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "labels=%v annotations=%v phase=%s address=%s attachment=%v deleting=%v",
		eip.Labels, eip.Annotations, eip.Status.Phase, eip.Status.Address, eip.Status.Attachment, eip.DeletionTimestamp != nil)
	for _, c := range eip.Status.Conditions {
		fmt.Fprintf(&b, " [%s=%s %s: %s]", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

func attachmentString(a *v1alpha1.ElasticIPAttachment) string {
	if a == nil {
		return "<none>"
	}
	s := fmt.Sprintf("labels=%v spec=%+v phase=%s eip=%s podIP=%s node=%s", a.Labels, a.Spec, a.Status.Phase, a.Status.ElasticIP, a.Status.PodIP, a.Status.NodeName)
	if c := meta.FindStatusCondition(a.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		s += " " + c.Reason + ": " + c.Message
	}
	return s
}

// waitAllocated waits until the Pod's attachment (named after the Pod) is Attached to
// eipName, labelled for the Pod, and the Pod's annotations carry the ElasticIP's name
// and address; it returns the ElasticIP.
func waitAllocated(t *testing.T, cp *framework.ControlPlane, ns, pod, eipName string) *v1alpha1.ElasticIP {
	t.Helper()
	var eip *v1alpha1.ElasticIP
	var att *v1alpha1.ElasticIPAttachment
	var p *corev1.Pod
	describe := func() string {
		ann := map[string]string{}
		if p != nil {
			ann = p.Annotations
		}
		return fmt.Sprintf("ElasticIP %s; attachment %s; Pod annotations %v", eipString(eip), attachmentString(att), ann)
	}
	framework.Eventually(t, "Pod "+pod+" attached to ElasticIP "+eipName, func(context.Context) (bool, string) {
		eip, _ = getEIP(cp, ns, eipName)
		att, _ = getAttachment(cp, ns, pod)
		p, _ = getPod(cp, ns, pod)
		return eip != nil && eip.Status.Address != "" && att != nil && p != nil &&
			att.Status.Phase == v1alpha1.AttachmentAttached && att.Status.ElasticIP == eip.Status.Address &&
			p.Annotations[v1alpha1.AnnotationAllocatedEIPName] == eipName &&
			p.Annotations[v1alpha1.AnnotationAllocatedEIPAddr] == eip.Status.Address, describe()
	})
	if att.Labels[v1alpha1.LabelPod] != pod || att.Spec.ElasticIPRef.Name != eipName ||
		att.Spec.TargetRef.NetworkInterfaceName != pod+".eth0" {
		t.Errorf("attachment = %s", attachmentString(att))
	}
	return eip
}

// waitGone waits until the object is gone (get returns false).
func waitGone(t *testing.T, what string, get func() bool) {
	t.Helper()
	framework.Eventually(t, what+" gone", func(context.Context) (bool, string) { return !get(), "still there" })
}

// claimed reports whether an AllocationClaim reserves the address.
func claimed(cp *framework.ControlPlane, address string) bool {
	_, err := cp.Juneau.JuneauV1alpha1().AllocationClaims().Get(context.Background(), address, metav1.GetOptions{})
	return !apierrors.IsNotFound(err)
}

// waitEvent waits for an Event of that reason on the named object, and returns its message.
func waitEvent(t *testing.T, cp *framework.ControlPlane, ns, kind, name, reason string) string {
	t.Helper()
	var msg string
	var seen []string
	framework.Eventually(t, "Event "+reason+" on "+kind+" "+name, func(ctx context.Context) (bool, string) {
		list, err := cp.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, fmt.Sprintf("reasons seen %v", seen)
		}
		seen = seen[:0]
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name {
				seen = append(seen, e.Reason)
				if e.Reason == reason {
					msg = e.Message
					return true, fmt.Sprintf("reasons seen %v", seen)
				}
			}
		}
		return false, fmt.Sprintf("reasons seen %v", seen)
	})
	return msg
}

func statefulSetOwner(apiVersion string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: "StatefulSet", Name: "db",
		UID: "3d5c1b7e-0000-4000-8000-000000000001", Controller: ptr.To(true)}
}
