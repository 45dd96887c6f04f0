// Package inprocess runs the NetworkInterface, ElasticIPAttachment, AddressPool and
// ExternalNetwork controllers in the test process, wired as the controller binary wires
// them, against a real etcd + kube-apiserver, and checks the status each one writes.
package inprocess

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubeinformers "k8s.io/client-go/informers"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/controllers/attachment"
	"github.com/loutres/juneau/pkg/controllers/network"
	"github.com/loutres/juneau/pkg/controllers/networkinterface"
	"github.com/loutres/juneau/pkg/controllers/pool"
	juneauscheme "github.com/loutres/juneau/pkg/generated/clientset/versioned/scheme"
	"github.com/loutres/juneau/pkg/generated/informers/externalversions"
	"github.com/loutres/juneau/test/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// startControllers runs the four controllers against the control
// plane until the test ends, wired the way the controller binary wires them: every
// NewController first, then the factories, then Run.
func startControllers(t *testing.T, cp *framework.ControlPlane) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, juneauscheme.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cp.Kube.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme, corev1.EventSource{Component: "juneau-controller"})

	kf := kubeinformers.NewSharedInformerFactory(cp.Kube, 0)
	jf := externalversions.NewSharedInformerFactory(cp.Juneau, 0)
	j := jf.Juneau().V1alpha1()
	nicCtl, err := networkinterface.NewController(cp.Juneau, networkinterface.Informers{
		Pods: kf.Core().V1().Pods(), NetworkInterfaces: j.NetworkInterfaces(), ElasticIPs: j.ElasticIPs(),
	}, recorder, networkinterface.Options{})
	if err != nil {
		t.Fatal(err)
	}
	attCtl, err := attachment.NewController(cp.Juneau, attachment.Informers{
		Attachments: j.ElasticIPAttachments(), ElasticIPs: j.ElasticIPs(), NetworkInterfaces: j.NetworkInterfaces(),
	}, recorder, attachment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	poolCtl, err := pool.NewController(cp.Juneau, pool.Informers{
		Pools: j.AddressPools(), Claims: j.AllocationClaims(), Nodes: kf.Core().V1().Nodes(),
	}, recorder, pool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	netCtl, err := network.NewController(cp.Juneau, network.Informers{
		Networks: j.ExternalNetworks(), Pools: j.AddressPools(),
	}, recorder, network.Options{})
	if err != nil {
		t.Fatal(err)
	}
	kf.Start(ctx.Done())
	jf.Start(ctx.Done())
	var wg sync.WaitGroup
	for _, run := range []func(context.Context, int){nicCtl.Run, attCtl.Run, poolCtl.Run, netCtl.Run} {
		wg.Go(func() { run(ctx, 2) })
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		kf.Shutdown()
		jf.Shutdown()
		broadcaster.Shutdown()
	})
}

func suffix(t *testing.T) string {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// nicState waits for a NIC's phase, address and Ready reason.
func nicState(t *testing.T, cp *framework.ControlPlane, ns, name string, phase v1alpha1.NetworkInterfacePhase, address, reason string) *v1alpha1.NetworkInterface {
	t.Helper()
	var nic *v1alpha1.NetworkInterface
	framework.Eventually(t, "NetworkInterface "+name, func(ctx context.Context) (bool, string) {
		var err error
		nic, err = cp.Juneau.JuneauV1alpha1().NetworkInterfaces(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(nic.Status.Conditions, v1alpha1.ConditionReady)
		got := fmt.Sprintf("%+v", nic.Status)
		return c != nil && nic.Status.Phase == phase && nic.Status.Address == address && c.Reason == reason, got
	})
	return nic
}

func setEIPStatus(t *testing.T, cp *framework.ControlPlane, ns, name string, st v1alpha1.ElasticIPStatus) {
	t.Helper()
	ctx := context.Background()
	eip, err := cp.Juneau.JuneauV1alpha1().ElasticIPs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eip.Status = st
	if _, err := cp.Juneau.JuneauV1alpha1().ElasticIPs(ns).UpdateStatus(ctx, eip, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestControllersAgainstAPIServer(t *testing.T) {
	cp := framework.Shared(t)
	ctx := context.Background()
	ns := cp.NewNamespace(t, "nic")
	sfx := suffix(t)
	startControllers(t, cp)
	api := cp.Juneau.JuneauV1alpha1()

	// The ElasticIP controller does not run here: the test writes ElasticIP status the
	// way it would, and checks that the others follow it.
	for _, name := range []string{"gw-eip", "nat-eip"} {
		eip := &v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ElasticIPSpec{ExternalNetwork: "ext-" + sfx}}
		if _, err := api.ElasticIPs(ns).Create(ctx, eip, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setEIPStatus(t, cp, ns, "gw-eip", v1alpha1.ElasticIPStatus{Phase: v1alpha1.ElasticIPAvailable, Address: "10.225.51.5"})

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{
			v1alpha1.AnnotationNetworks: `[{"interface":"ext0","elasticIP":"gw-eip"}]`,
		}},
		Spec: corev1.PodSpec{NodeName: "node-" + sfx, Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c"}}},
	}
	pod, err := cp.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nicState(t, cp, ns, "web.eth0", v1alpha1.NetworkInterfacePending, "", v1alpha1.ReasonWaitingForPodIP)
	pod.Status.PodIP, pod.Status.PodIPs = "10.244.1.5", []corev1.PodIP{{IP: "10.244.1.5"}}
	if _, err := cp.Kube.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eth0 := nicState(t, cp, ns, "web.eth0", v1alpha1.NetworkInterfaceReady, "10.244.1.5/32", v1alpha1.ReasonReady)
	if ref := metav1.GetControllerOf(eth0); ref == nil || ref.UID != pod.UID || ref.Kind != "Pod" {
		t.Errorf("web.eth0 controller reference %+v, want the Pod", ref)
	}
	waiting := nicState(t, cp, ns, "web.ext0", v1alpha1.NetworkInterfacePending, "", v1alpha1.ReasonWaitingForElasticIP)

	// The ElasticIP picks web.ext0 (that very object: by UID).
	held := v1alpha1.ElasticIPStatus{Phase: v1alpha1.ElasticIPAttached, Address: "10.225.51.5",
		Attachment: &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindNetworkInterface, Name: "web.ext0", UID: waiting.UID}}
	setEIPStatus(t, cp, ns, "gw-eip", held)
	ext0 := nicState(t, cp, ns, "web.ext0", v1alpha1.NetworkInterfaceReady, "10.225.51.5/32", v1alpha1.ReasonReady)
	if len(ext0.Status.Rules) != 1 || ext0.Status.Rules[0].Table != 0x0ae13305 || ext0.Status.Routes[0].Table != 0x0ae13305 {
		t.Errorf("web.ext0 routing %+v %+v", ext0.Status.Routes, ext0.Status.Rules)
	}

	// NAT on eth0 through an attachment.
	att := &v1alpha1.ElasticIPAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "web-nat"},
		Spec: v1alpha1.ElasticIPAttachmentSpec{
			ElasticIPRef: v1alpha1.ElasticIPReference{Name: "nat-eip"},
			TargetRef:    v1alpha1.AttachmentTarget{NetworkInterfaceName: "web.eth0"},
		},
	}
	att, err = api.ElasticIPAttachments(ns).Create(ctx, att, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setEIPStatus(t, cp, ns, "nat-eip", v1alpha1.ElasticIPStatus{Phase: v1alpha1.ElasticIPAttached, Address: "10.225.51.6",
		Attachment: &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindElasticIPAttachment, Name: "web-nat", UID: att.UID}})
	framework.Eventually(t, "attachment Attached", func(ctx context.Context) (bool, string) {
		a, err := api.ElasticIPAttachments(ns).Get(ctx, "web-nat", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := a.Status
		return st.Phase == v1alpha1.AttachmentAttached && st.ElasticIP == "10.225.51.6" &&
			st.PodIP == "10.244.1.5" && st.NodeName == "node-"+sfx && meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionReady), fmt.Sprintf("%+v", st)
	})

	// Terminating: the NICs stay. Taking the ElasticIP away proves the controller saw the
	// Pod after its deletion began, and the NICs are still there afterwards.
	if err := cp.Kube.CoreV1().Pods(ns).Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](300)}); err != nil {
		t.Fatal(err)
	}
	setEIPStatus(t, cp, ns, "gw-eip", v1alpha1.ElasticIPStatus{Phase: v1alpha1.ElasticIPAvailable, Address: "10.225.51.5"})
	nicState(t, cp, ns, "web.ext0", v1alpha1.NetworkInterfacePending, "", v1alpha1.ReasonWaitingForElasticIP)
	if _, err := api.NetworkInterfaces(ns).Get(ctx, "web.eth0", metav1.GetOptions{}); err != nil {
		t.Errorf("web.eth0 of a terminating Pod: %v", err)
	}

	// Gone: the NICs follow, and the attachment reports the missing NIC.
	if err := cp.Kube.CoreV1().Pods(ns).Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web.eth0", "web.ext0"} {
		framework.Eventually(t, name+" deleted", func(ctx context.Context) (bool, string) {
			_, err := api.NetworkInterfaces(ns).Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	}
	framework.Eventually(t, "attachment Error", func(ctx context.Context) (bool, string) {
		a, err := api.ElasticIPAttachments(ns).Get(ctx, "web-nat", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(a.Status.Conditions, v1alpha1.ConditionReady)
		return a.Status.Phase == v1alpha1.AttachmentError && c != nil && c.Reason == v1alpha1.ReasonMissingNetworkInterface, fmt.Sprintf("%+v", a.Status)
	})
}

func TestInvalidAnnotationsAgainstAPIServer(t *testing.T) {
	cp := framework.Shared(t)
	ctx := context.Background()
	ns := cp.NewNamespace(t, "nicbad")
	startControllers(t, cp)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bad", Annotations: map[string]string{
			v1alpha1.AnnotationNetworks: `[{"interface":"ext0","elasticIP":"x","extra":true}]`,
		}},
		Spec: corev1.PodSpec{NodeName: "node-x", Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c"}}},
	}
	if _, err := cp.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "Warning Event on the Pod", func(ctx context.Context) (bool, string) {
		evs, err := cp.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == "bad" && e.Type == corev1.EventTypeWarning && e.Reason == v1alpha1.EventInvalidAnnotations {
				return true, e.Message
			}
		}
		return false, fmt.Sprintf("%d events", len(evs.Items))
	})
	nics, err := cp.Juneau.JuneauV1alpha1().NetworkInterfaces(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(nics.Items) != 0 {
		t.Errorf("NICs of a Pod with unreadable annotations: %v %v", nics, err)
	}
}

func TestPoolAndNetworkAgainstAPIServer(t *testing.T) {
	cp := framework.Shared(t)
	ctx := context.Background()
	sfx := suffix(t)
	startControllers(t, cp)
	api := cp.Juneau.JuneauV1alpha1()
	poolName, netName, nodeName := "pool-"+sfx, "ext-"+sfx, "node-"+sfx
	cleanup := func(del func() error) { t.Cleanup(func() { _ = del() }) }

	network := &v1alpha1.ExternalNetwork{ObjectMeta: metav1.ObjectMeta{Name: netName},
		Spec: v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseARP, AddressPools: []string{poolName}}}
	if _, err := api.ExternalNetworks().Create(ctx, network, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cleanup(func() error {
		return api.ExternalNetworks().Delete(context.Background(), netName, metav1.DeleteOptions{})
	})
	netReason := func(want string) {
		t.Helper()
		framework.Eventually(t, "ExternalNetwork "+want, func(ctx context.Context) (bool, string) {
			n, err := api.ExternalNetworks().Get(ctx, netName, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			c := meta.FindStatusCondition(n.Status.Conditions, v1alpha1.ConditionReady)
			return c != nil && c.Reason == want, fmt.Sprintf("%+v", n.Status)
		})
	}
	netReason(v1alpha1.ReasonMissingDependency)

	// A third octet of its own keeps this pool clear of the other tests' addresses.
	p := &v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: poolName},
		Spec: v1alpha1.AddressPoolSpec{AdvertiseMode: v1alpha1.AdvertiseARP, Addresses: []string{"10.225.51.0/28"}}}
	if _, err := api.AddressPools().Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cleanup(func() error { return api.AddressPools().Delete(context.Background(), poolName, metav1.DeleteOptions{}) })
	netReason(v1alpha1.ReasonPoolsReady)

	poolState := func(want string, total, allocated int64) {
		t.Helper()
		framework.Eventually(t, "AddressPool "+want, func(ctx context.Context) (bool, string) {
			p, err := api.AddressPools().Get(ctx, poolName, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
			return c != nil && c.Reason == want &&
				p.Status.Total == total && p.Status.Allocated == allocated && p.Status.Available == total-allocated, fmt.Sprintf("%+v", p.Status)
		})
	}
	poolState(v1alpha1.ReasonReady, 14, 0)

	claim := &v1alpha1.AllocationClaim{ObjectMeta: metav1.ObjectMeta{Name: "10.225.51.3"},
		Spec: v1alpha1.AllocationClaimSpec{AddressPool: poolName, Address: "10.225.51.3",
			Consumer: v1alpha1.ConsumerReference{Kind: v1alpha1.ConsumerKindElasticIP, Namespace: "default", Name: "x", UID: "uid-x"}}}
	if _, err := api.AllocationClaims().Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cleanup(func() error {
		return api.AllocationClaims().Delete(context.Background(), claim.Name, metav1.DeleteOptions{})
	})
	poolState(v1alpha1.ReasonReady, 14, 1)

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
	node, err := cp.Kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cleanup(func() error {
		return cp.Kube.CoreV1().Nodes().Delete(context.Background(), nodeName, metav1.DeleteOptions{})
	})
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.225.51.2"}}
	if _, err := cp.Kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poolState(v1alpha1.ReasonNodeAddressInPool, 14, 1)
	if err := cp.Kube.CoreV1().Nodes().Delete(ctx, nodeName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poolState(v1alpha1.ReasonReady, 14, 1)
}
