package agent

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func gatedPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{ReadinessGates: []corev1.PodReadinessGate{{ConditionType: v1alpha1.PodConditionElasticIP}}},
	}
}

func TestComputeReadiness(t *testing.T) {
	natAttach := attachment("nginx-attach", "node-a", "10.225.51.5", "10.244.1.5", v1alpha1.AttachmentAttached, true)
	natAttach.Spec = v1alpha1.ElasticIPAttachmentSpec{ElasticIPRef: v1alpha1.ElasticIPReference{Name: "nginx-eip"},
		TargetRef: v1alpha1.AttachmentTarget{NetworkInterfaceName: "nginx.eth0"}}
	direct := &v1alpha1.NetworkInterface{
		ObjectMeta: metav1.ObjectMeta{Name: "web.eth0", Namespace: "default"},
		Spec:       v1alpha1.NetworkInterfaceSpec{PodRef: v1alpha1.PodReference{Name: "web", UID: "uid-web"}, ElasticIP: "web-eip", NodeName: "node-a"},
		Status:     v1alpha1.NetworkInterfaceStatus{Address: "10.225.51.6/32", Phase: v1alpha1.NetworkInterfaceReady},
	}
	arpNet := &v1alpha1.ExternalNetwork{ObjectMeta: metav1.ObjectMeta{Name: "ext-net"}, Spec: v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseARP}}
	bgpNet := &v1alpha1.ExternalNetwork{ObjectMeta: metav1.ObjectMeta{Name: "bgp-net"}, Spec: v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseBGP}}
	eip := func(name, network string) *v1alpha1.ElasticIP {
		return &v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: v1alpha1.ElasticIPSpec{ExternalNetwork: network}}
	}
	// The same Pod name's attachment on another Node (the Pod was there before) serves
	// in-cluster clients only and never counts for this Node's gate.
	elsewhere := attachment("web-attach", "node-b", "10.225.51.9", "10.244.2.9", v1alpha1.AttachmentAttached, true)
	elsewhere.Spec.TargetRef.NetworkInterfaceName = "web.eth0"
	in := Inputs{NodeName: "node-a", ExternalInterface: "ext0", Attachments: []*v1alpha1.ElasticIPAttachment{natAttach, elsewhere}}
	programmed := Compute(in)
	programmed.ARP = []netip.Addr{netip.MustParseAddr("10.225.51.5"), netip.MustParseAddr("10.225.51.6")}
	routed := func(a netip.Addr) bool { return a == netip.MustParseAddr("10.225.51.6") }

	cases := []struct {
		name    string
		pod     *corev1.Pod
		d       Desired
		eips    map[string]*v1alpha1.ElasticIP
		routed  func(netip.Addr) bool
		ready   bool
		message string
	}{
		{"NAT programmed and answered", gatedPod("nginx"), programmed,
			map[string]*v1alpha1.ElasticIP{"default/nginx-eip": eip("nginx-eip", "ext-net")}, nil, true, `nginx-eip (10.225.51.5)`},
		{"NAT programmed, ARP not yet", gatedPod("nginx"), Desired{NAT: programmed.NAT, Programmed: programmed.Programmed},
			map[string]*v1alpha1.ElasticIP{"default/nginx-eip": eip("nginx-eip", "ext-net")}, nil, false, `ARP answer for "10.225.51.5"`},
		{"NAT on a bgp network needs no ARP", gatedPod("nginx"), Desired{NAT: programmed.NAT, Programmed: programmed.Programmed},
			map[string]*v1alpha1.ElasticIP{"default/nginx-eip": eip("nginx-eip", "bgp-net")}, nil, true, `nginx-eip`},
		{"NAT rules not applied", gatedPod("nginx"), Desired{ARP: programmed.ARP},
			map[string]*v1alpha1.ElasticIP{"default/nginx-eip": eip("nginx-eip", "ext-net")}, nil, false, `NAT of ElasticIPAttachment "nginx-attach"`},
		{"direct routed and answered", gatedPod("web"), programmed,
			map[string]*v1alpha1.ElasticIP{"default/web-eip": eip("web-eip", "ext-net")}, routed, true, `web-eip (10.225.51.6)`},
		{"direct without the host route", gatedPod("web"), programmed,
			map[string]*v1alpha1.ElasticIP{"default/web-eip": eip("web-eip", "ext-net")}, func(netip.Addr) bool { return false }, false, `route of NetworkInterface "web.eth0"`},
		{"nothing attached", gatedPod("lonely"), programmed, nil, nil, false, "no ElasticIP is attached"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := ComputeReadiness(in, tc.d, ReadinessInputs{
				Pods: []*corev1.Pod{tc.pod, {ObjectMeta: metav1.ObjectMeta{Name: "ungated"}}},
				NICs: []*v1alpha1.NetworkInterface{direct}, ElasticIPs: tc.eips,
				Networks: map[string]*v1alpha1.ExternalNetwork{"ext-net": arpNet, "bgp-net": bgpNet}, Routed: tc.routed,
			})
			if len(r) != 1 {
				t.Fatalf("got %d readiness results, want 1 (only gated Pods)", len(r))
			}
			if r[0].Ready != tc.ready || !strings.Contains(r[0].Message, tc.message) {
				t.Errorf("ready=%v %s: %q, want ready=%v containing %q", r[0].Ready, r[0].Reason, r[0].Message, tc.ready, tc.message)
			}
		})
	}
}
