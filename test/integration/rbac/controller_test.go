package rbac

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/framework"
)

// TestControllerAccessTable: the controller's ServiceAccount may do what the
// controllers do, and no more.
func TestControllerAccessTable(t *testing.T) {
	cp := framework.Shared(t)
	cp.ApplyRBAC(t)
	kube := kubernetes.NewForConfigOrDie(cp.ServiceAccountConfig(t, framework.SystemNamespace, framework.ControllerServiceAccount))
	lease := func(verb, ns, name string) access {
		return access{verb: verb, group: "coordination.k8s.io", resource: "leases", namespace: ns, name: name}
	}
	events := func(verb string) access { return access{verb: verb, group: "events.k8s.io", resource: "events"} }

	var allowed []access
	for _, r := range []string{"addresspools", "externalnetworks", "elasticips", "allocationclaims", "elasticipattachments", "networkinterfaces", "arpadvertisements", "bgpadvertisements"} {
		allowed = append(allowed, every(juneau, r, "list", "watch")...)
	}
	allowed = slices.Concat(allowed,
		every(juneau, "elasticips", "get", "create", "update", "patch", "delete"),
		every(juneau, "allocationclaims", "get", "create", "delete"),
		every(juneau, "elasticipattachments", "create", "delete"),
		every(juneau, "networkinterfaces", "create", "update", "delete"),
		every(juneau, "arpadvertisements", "create", "update", "delete"),
		every(juneau, "bgpadvertisements", "create", "update", "delete"),
		[]access{
			juneau("update", "elasticips/status"),
			juneau("patch", "addresspools/status"), juneau("patch", "externalnetworks/status"),
			juneau("patch", "elasticipattachments/status"), juneau("patch", "networkinterfaces/status"),
			// Answering=Unknown when a Node's agent stops renewing its heartbeat Lease.
			juneau("patch", "arpadvertisements/status"),
			core("list", "pods"), core("watch", "pods"), core("patch", "pods"), core("update", "pods/finalizers"),
			// The Pod condition juneau.loutres.me/elastic-ip-assigned.
			core("patch", "pods/status"),
			core("list", "nodes"), core("watch", "nodes"),
			// Namespace labels, for the networks' namespaceSelectors.
			core("list", "namespaces"), core("watch", "namespaces"),
			core("create", "events"), core("patch", "events"), events("create"), events("patch"),
			lease("get", framework.SystemNamespace, "juneau-controller"),
			lease("update", framework.SystemNamespace, "juneau-controller"),
			lease("create", framework.SystemNamespace, ""),
			// The node agents' heartbeat Leases, in their namespace.
			lease("list", framework.NodeNamespace, ""), lease("watch", framework.NodeNamespace, ""),
			// Webhook replicas that stopped answering (their Node died), in its own namespace.
			{verb: "delete", resource: "pods", namespace: framework.SystemNamespace},
		}, metricsReviews)
	checkAccess(t, kube, true, allowed)

	denied := slices.Concat(
		every(juneau, "addresspools", "create", "update", "patch", "delete"),
		every(juneau, "externalnetworks", "create", "update", "patch", "delete"),
		every(juneau, "allocationclaims", "update", "patch"),
		every(juneau, "arpadvertisements/status", "update"),
		every(juneau, "bgpadvertisements/status", "update", "patch"),
		every(juneau, "bgppeers", "create", "update", "patch", "delete"),
		every(juneau, "bgpnodestatuses", "get", "create", "update", "patch", "delete"),
		every(core, "nodes", "get", "create", "update", "patch", "delete"),
		every(core, "namespaces", "get", "create", "update", "patch", "delete"),
		every(core, "pods", "get", "create", "update", "delete"),
		every(core, "secrets", "get", "list"),
		[]access{
			juneau("update", "networkinterfaces/status"), juneau("update", "addresspools/status"),
			core("update", "pods/status"), core("create", "pods/eviction"),
			core("create", "serviceaccounts/token"), core("delete", "events"),
			lease("update", framework.SystemNamespace, "another-lease"),
			lease("update", "default", "juneau-controller"),
			lease("create", "default", ""),
			lease("list", "default", ""),
			lease("update", framework.NodeNamespace, v1alpha1.NodeLeasePrefix+"node-a"),
			lease("create", framework.NodeNamespace, ""),
			lease("list", framework.SystemNamespace, ""),
			{verb: "delete", resource: "pods", namespace: "default"},
		})
	checkAccess(t, kube, false, denied)
}

// TestControllerUnderLeastPrivilege runs `juneau controller` with only its own
// ServiceAccount's token, leader election on, through the life cycles of a user's
// ElasticIP and of a Pod's automatic one. Nothing it tries may be Forbidden.
func TestControllerUnderLeastPrivilege(t *testing.T) {
	cp := framework.Shared(t)
	cp.ApplyRBAC(t)
	kubeconfig := cp.ServiceAccountKubeconfig(t, framework.SystemNamespace, framework.ControllerServiceAccount)
	ctrl := framework.StartComponent(t, "controller", "controller",
		"--kubeconfig="+kubeconfig,
		"--metrics-bind-address=127.0.0.1:0",
		"--leader-elect=true", "--leader-elect-namespace="+framework.SystemNamespace,
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms",
		"-v=2")

	userElasticIP(t, cp, ctrl)
	automaticElasticIP(t, cp, ctrl)

	lease, err := cp.Kube.CoordinationV1().Leases(framework.SystemNamespace).Get(context.Background(), "juneau-controller", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Errorf("Lease %s/juneau-controller: %+v %v, want a holder", framework.SystemNamespace, lease, err)
	}
	if log := strings.ToLower(ctrl.Log()); strings.Contains(log, "forbidden") {
		t.Errorf("the controller was refused something:\n%s", ctrl.LogTail(60))
	}
}

// userElasticIP: allocation, a Pod's NIC, NAT attachment with its ARPAdvertisement,
// pool and network status, Events, release, and the finalizer of direct use.
func userElasticIP(t *testing.T, cp *framework.ControlPlane, ctrl *framework.Component) {
	ns := cp.NewNamespace(t, "rbac-user")
	j := cp.Juneau.JuneauV1alpha1()
	ctx := testContext(t, 2*time.Minute)
	createNetwork(t, cp, ns, "10.225.51.200-10.225.51.203")

	eip, err := j.ElasticIPs(ns).Create(ctx, &v1alpha1.ElasticIP{
		ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1alpha1.ElasticIPSpec{ExternalNetwork: ns},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pool := netip.MustParsePrefix("10.225.51.200/30")
	framework.Eventually(t, "the ElasticIP is allocated", func(ctx context.Context) (bool, string) {
		e, err := j.ElasticIPs(ns).Get(ctx, eip.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		addr, _ := netip.ParseAddr(e.Status.Address)
		return e.Status.Phase == v1alpha1.ElasticIPAvailable && pool.Contains(addr), fmt.Sprintf("%+v", e.Status)
	}, ctrl)

	createRunningPod(t, cp, ns, "nginx", "10.244.1.10", nil)
	nicName := v1alpha1.NetworkInterfaceName("nginx", v1alpha1.DefaultInterface)
	framework.Eventually(t, "the Pod's NetworkInterface is Ready", func(ctx context.Context) (bool, string) {
		nic, err := j.NetworkInterfaces(ns).Get(ctx, nicName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return nic.Status.Phase == v1alpha1.NetworkInterfaceReady && nic.Status.Address == "10.244.1.10/32", fmt.Sprintf("%+v", nic.Status)
	}, ctrl)

	if _, err := j.ElasticIPAttachments(ns).Create(ctx, &v1alpha1.ElasticIPAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx-eip-attach"},
		Spec: v1alpha1.ElasticIPAttachmentSpec{ElasticIPRef: v1alpha1.ElasticIPReference{Name: eip.Name},
			TargetRef: v1alpha1.AttachmentTarget{NetworkInterfaceName: nicName}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	adName := advertisement.PreferredName(ns, eip.Name)
	framework.Eventually(t, "the attachment is Ready and node-a answers ARP", func(ctx context.Context) (bool, string) {
		att, err := j.ElasticIPAttachments(ns).Get(ctx, "nginx-eip-attach", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ad, err := j.ARPAdvertisements().Get(ctx, adName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return att.Status.Phase == v1alpha1.AttachmentAttached && ad.Spec.NodeName == "node-a", fmt.Sprintf("%+v; %+v", att.Status, ad.Spec)
	}, ctrl)
	framework.Eventually(t, "the pool and network report their status", func(ctx context.Context) (bool, string) {
		p, err := j.AddressPools().Get(ctx, ns+"-pool", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		n, err := j.ExternalNetworks().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Total == 4 && p.Status.Allocated == 1 && meta.IsStatusConditionTrue(n.Status.Conditions, v1alpha1.ConditionReady),
			fmt.Sprintf("pool %+v; network %+v", p.Status, n.Status)
	}, ctrl)
	framework.Eventually(t, "the controller records Events", func(ctx context.Context) (bool, string) {
		list, err := cp.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return slices.ContainsFunc(list.Items, func(e corev1.Event) bool { return e.Source.Component == "juneau-controller" }),
			fmt.Sprintf("%d events", len(list.Items))
	}, ctrl)

	// Release: the attachment goes, then the ElasticIP with its claim and advertisement.
	if err := j.ElasticIPAttachments(ns).Delete(ctx, "nginx-eip-attach", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := j.ElasticIPs(ns).Delete(ctx, eip.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the ElasticIP, its claim and its advertisement are gone", func(ctx context.Context) (bool, string) {
		_, eipErr := j.ElasticIPs(ns).Get(ctx, eip.Name, metav1.GetOptions{})
		_, adErr := j.ARPAdvertisements().Get(ctx, adName, metav1.GetOptions{})
		claimed, err := claimsOf(ctx, cp, ns)
		if err != nil {
			return false, err.Error()
		}
		return apierrors.IsNotFound(eipErr) && apierrors.IsNotFound(adErr) && !claimed,
			fmt.Sprintf("elasticip: %v; advertisement: %v; claim left: %v", eipErr, adErr, claimed)
	}, ctrl)

	// Direct use: a Pod's interface naming the ElasticIP makes its deletion wait, through
	// the controller's finalizer, until the Pod is gone.
	direct, err := j.ElasticIPs(ns).Create(ctx, &v1alpha1.ElasticIP{
		ObjectMeta: metav1.ObjectMeta{Name: "direct"}, Spec: v1alpha1.ElasticIPSpec{ExternalNetwork: ns},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "direct", Annotations: map[string]string{v1alpha1.AnnotationElasticIP: direct.Name}},
		Spec:       corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/pause:1"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the directly used ElasticIP gets the finalizer", func(ctx context.Context) (bool, string) {
		e, err := j.ElasticIPs(ns).Get(ctx, direct.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return slices.Contains(e.Finalizers, v1alpha1.FinalizerElasticIP) && e.Status.Address != "", fmt.Sprintf("%+v %v", e.Status, e.Finalizers)
	}, ctrl)
	if err := j.ElasticIPs(ns).Delete(ctx, direct.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cp.Kube.CoreV1().Pods(ns).Delete(ctx, "direct", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the directly used ElasticIP and its claim are gone", func(ctx context.Context) (bool, string) {
		_, eipErr := j.ElasticIPs(ns).Get(ctx, direct.Name, metav1.GetOptions{})
		claimed, err := claimsOf(ctx, cp, ns)
		if err != nil {
			return false, err.Error()
		}
		return apierrors.IsNotFound(eipErr) && !claimed, fmt.Sprintf("elasticip: %v; claim left: %v", eipErr, claimed)
	}, ctrl)
}

// automaticElasticIP: a Pod asking for an ElasticIP gets one with an attachment and the
// address written back onto it; deleting the Pod releases both.
func automaticElasticIP(t *testing.T, cp *framework.ControlPlane, ctrl *framework.Component) {
	ns := cp.NewNamespace(t, "rbac-auto")
	j := cp.Juneau.JuneauV1alpha1()
	ctx := testContext(t, 2*time.Minute)
	createNetwork(t, cp, ns, "10.225.51.204-10.225.51.207")
	// Created directly, the Pod would keep its ElasticIP for 10m: Follow releases it with the Pod.
	createRunningPod(t, cp, ns, "game", "10.244.1.11", map[string]string{
		v1alpha1.AnnotationPodWithEIP: "true", v1alpha1.AnnotationEIPExternalNetwork: ns,
		v1alpha1.AnnotationReleaseStrategy: v1alpha1.ReleaseFollow,
	})
	framework.Eventually(t, "the Pod's ElasticIP is attached and its address written back", func(ctx context.Context) (bool, string) {
		pod, err := cp.Kube.CoreV1().Pods(ns).Get(ctx, "game", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		e, err := j.ElasticIPs(ns).Get(ctx, "game", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return e.Labels[v1alpha1.LabelPod] == "game" && e.Status.Phase == v1alpha1.ElasticIPAttached && e.Status.Address != "" &&
				pod.Annotations[v1alpha1.AnnotationAllocatedEIPAddr] == e.Status.Address,
			fmt.Sprintf("ElasticIP %+v; Pod annotations %v", e.Status, pod.Annotations)
	}, ctrl)
	if err := cp.Kube.CoreV1().Pods(ns).Delete(ctx, "game", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the Pod's ElasticIP, attachment and claim are released", func(ctx context.Context) (bool, string) {
		_, eipErr := j.ElasticIPs(ns).Get(ctx, "game", metav1.GetOptions{})
		atts, err := j.ElasticIPAttachments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		claimed, err := claimsOf(ctx, cp, ns)
		if err != nil {
			return false, err.Error()
		}
		return apierrors.IsNotFound(eipErr) && len(atts.Items) == 0 && !claimed,
			fmt.Sprintf("elasticip: %v; %d attachments; claim left: %v", eipErr, len(atts.Items), claimed)
	}, ctrl)
}

// claimsOf says whether any AllocationClaim's consumer is in namespace ns.
func claimsOf(ctx context.Context, cp *framework.ControlPlane, ns string) (bool, error) {
	claims, err := cp.Juneau.JuneauV1alpha1().AllocationClaims().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(claims.Items, func(c v1alpha1.AllocationClaim) bool { return c.Spec.Consumer.Namespace == ns }), nil
}

// createNetwork creates, as the administrator, an arp pool over addresses and the
// ExternalNetwork named ns over it (both cluster-scoped, removed when the test ends).
func createNetwork(t *testing.T, cp *framework.ControlPlane, ns, addresses string) {
	t.Helper()
	ctx := context.Background()
	j := cp.Juneau.JuneauV1alpha1()
	if _, err := j.AddressPools().Create(ctx, &v1alpha1.AddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-pool"},
		Spec:       v1alpha1.AddressPoolSpec{AdvertiseMode: v1alpha1.AdvertiseARP, Addresses: []string{addresses}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.ExternalNetworks().Create(ctx, &v1alpha1.ExternalNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec:       v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseARP, AddressPools: []string{ns + "-pool"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = j.ExternalNetworks().Delete(context.Background(), ns, metav1.DeleteOptions{})
		_ = j.AddressPools().Delete(context.Background(), ns+"-pool", metav1.DeleteOptions{})
	})
}

// createRunningPod creates a Pod bound to node-a with podIP in its status, as a
// scheduler and kubelet would (neither runs here).
func createRunningPod(t *testing.T, cp *framework.ControlPlane, ns, name, podIP string, annotations map[string]string) {
	t.Helper()
	ctx := context.Background()
	pod, err := cp.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec:       corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/pause:1"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP = podIP
	pod.Status.PodIPs = []corev1.PodIP{{IP: podIP}}
	if _, err := cp.Kube.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
