package agent

import (
	"net/netip"
	"slices"
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
		ObjectMeta: metav1.ObjectMeta{Name: "web.eth0", Namespace: "default", UID: "uid-web.eth0"},
		Spec:       v1alpha1.NetworkInterfaceSpec{PodRef: v1alpha1.PodReference{Name: "web", UID: "uid-web"}, ElasticIP: "web-eip", NodeName: "node-a"},
		Status:     v1alpha1.NetworkInterfaceStatus{Address: "10.225.51.6/32", Phase: v1alpha1.NetworkInterfaceReady},
	}
	vpc := &v1alpha1.NetworkInterface{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx.eth0", Namespace: "default", UID: "uid-nginx.eth0"},
		Spec:       v1alpha1.NetworkInterfaceSpec{PodRef: v1alpha1.PodReference{Name: "nginx", UID: "uid-nginx"}, NodeName: "node-a"},
		Status:     v1alpha1.NetworkInterfaceStatus{Address: "10.244.1.5/32", Phase: v1alpha1.NetworkInterfaceReady},
	}
	arpNet := &v1alpha1.ExternalNetwork{ObjectMeta: metav1.ObjectMeta{Name: "ext-net"}, Spec: v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseARP}}
	bgpNet := &v1alpha1.ExternalNetwork{ObjectMeta: metav1.ObjectMeta{Name: "bgp-net"}, Spec: v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseBGP}}
	eip := func(name, network string, holderUID types.UID) *v1alpha1.ElasticIP {
		e := &v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: v1alpha1.ElasticIPSpec{ExternalNetwork: network}}
		if holderUID != "" {
			e.Status.Attachment = &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindNetworkInterface, Name: "web.eth0", UID: holderUID}
		}
		return e
	}
	// The Pod "nginx" re-created under its name: its attachment targets the NIC of the
	// earlier Pod, which is not this Pod's.
	nginx2 := gatedPod("nginx")
	nginx2.UID = "uid-nginx-2"
	// Both the managed-cloud gate and juneau's.
	both := gatedPod("nginx")
	both.Spec.ReadinessGates = append(both.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: v1alpha1.PodConditionManagedCloudEIP})
	aliyun := gatedPod("nginx")
	aliyun.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: v1alpha1.PodConditionManagedCloudEIP}}
	// The same Pod name's attachment on another Node (the Pod was there before) serves
	// in-cluster clients only and never counts for this Node's gate.
	elsewhere := attachment("web-attach", "node-b", "10.225.51.9", "10.244.2.9", v1alpha1.AttachmentAttached, true)
	elsewhere.Spec.TargetRef.NetworkInterfaceName = "web.eth0"
	in := Inputs{NodeName: "node-a", ExternalInterface: "ext0", Attachments: []*v1alpha1.ElasticIPAttachment{natAttach, elsewhere}}
	programmed := Compute(in)
	programmed.ARP = []netip.Addr{netip.MustParseAddr("10.225.51.5"), netip.MustParseAddr("10.225.51.6")}
	routed := func(a netip.Addr) bool { return a == netip.MustParseAddr("10.225.51.6") }

	cases := []struct {
		name   string
		pod    *corev1.Pod
		d      Desired
		eips   ElasticIPMap
		routed func(netip.Addr) bool
		// announced: the /32s this Node's BGP speaker announces to an Established peer.
		announced []string
		ready     bool
		message   string
		types     []string
	}{
		{"NAT programmed and answered", gatedPod("nginx"), programmed,
			ElasticIPMap{"default/nginx-eip": eip("nginx-eip", "ext-net", "")}, nil, nil, true, `nginx-eip (10.225.51.5)`, nil},
		{"NAT programmed, ARP not yet", gatedPod("nginx"), Desired{NAT: programmed.NAT, Programmed: programmed.Programmed},
			ElasticIPMap{"default/nginx-eip": eip("nginx-eip", "ext-net", "")}, nil, nil, false, `ARP answer for "10.225.51.5"`, nil},
		{"NAT on a bgp network needs no ARP, but its announcement", gatedPod("nginx"), Desired{NAT: programmed.NAT, Programmed: programmed.Programmed},
			ElasticIPMap{"default/nginx-eip": eip("nginx-eip", "bgp-net", "")}, nil, []string{"10.225.51.5"}, true, `nginx-eip`, nil},
		{"NAT on a bgp network not announced to an Established peer", gatedPod("nginx"), programmed,
			ElasticIPMap{"default/nginx-eip": eip("nginx-eip", "bgp-net", "")}, nil, []string{"10.225.51.6"}, false,
			`waiting for BGP announcement of "10.225.51.5" to an Established peer`, nil},
		{"direct on a bgp network, announced", gatedPod("web"), programmed,
			ElasticIPMap{"default/web-eip": eip("web-eip", "bgp-net", "uid-web.eth0")}, routed, []string{"10.225.51.6"}, true, `web-eip (10.225.51.6)`, nil},
		{"direct on a bgp network, not announced", gatedPod("web"), programmed,
			ElasticIPMap{"default/web-eip": eip("web-eip", "bgp-net", "uid-web.eth0")}, routed, nil, false,
			`BGP announcement of "10.225.51.6"`, nil},
		{"NAT rules not applied", gatedPod("nginx"), Desired{ARP: programmed.ARP},
			ElasticIPMap{"default/nginx-eip": eip("nginx-eip", "ext-net", "")}, nil, nil, false, `NAT of ElasticIPAttachment "nginx-attach"`, nil},
		{"an attachment to the NIC of an earlier Pod of the same name is not this Pod's", nginx2, programmed,
			ElasticIPMap{"default/nginx-eip": eip("nginx-eip", "ext-net", "")}, nil, nil, false, "no ElasticIP is attached", nil},
		{"the managed-cloud gate", aliyun, programmed,
			ElasticIPMap{"default/nginx-eip": eip("nginx-eip", "ext-net", "")}, nil, nil, true, `nginx-eip (10.225.51.5)`,
			[]string{v1alpha1.PodConditionManagedCloudEIP}},
		{"both gates", both, programmed,
			ElasticIPMap{"default/nginx-eip": eip("nginx-eip", "ext-net", "")}, nil, nil, true, `nginx-eip (10.225.51.5)`,
			[]string{v1alpha1.PodConditionElasticIP, v1alpha1.PodConditionManagedCloudEIP}},
		{"direct routed and answered", gatedPod("web"), programmed,
			ElasticIPMap{"default/web-eip": eip("web-eip", "ext-net", "uid-web.eth0")}, routed, nil, true, `web-eip (10.225.51.6)`, nil},
		{"direct without the host route", gatedPod("web"), programmed,
			ElasticIPMap{"default/web-eip": eip("web-eip", "ext-net", "uid-web.eth0")}, func(netip.Addr) bool { return false }, nil, false, `route of NetworkInterface "web.eth0"`, nil},
		{"direct, but the ElasticIP names another NIC of that name", gatedPod("web"), programmed,
			ElasticIPMap{"default/web-eip": eip("web-eip", "ext-net", "uid-earlier")}, routed, nil, false,
			`ElasticIP "web-eip" to name NetworkInterface "web.eth0" as its holder`, nil},
		{"nothing attached", gatedPod("lonely"), programmed, nil, nil, nil, false, "no ElasticIP is attached", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := ComputeReadiness(in, tc.d, ReadinessInputs{
				Pods: []*corev1.Pod{tc.pod, {ObjectMeta: metav1.ObjectMeta{Name: "ungated"}}},
				NICs: []*v1alpha1.NetworkInterface{direct, vpc}, ElasticIPs: tc.eips,
				Networks: map[string]*v1alpha1.ExternalNetwork{"ext-net": arpNet, "bgp-net": bgpNet}, Routed: tc.routed,
				Announced: func(a netip.Addr) bool { return slices.Contains(tc.announced, a.String()) },
			})
			if len(r) != 1 {
				t.Fatalf("got %d readiness results, want 1 (only gated Pods)", len(r))
			}
			if r[0].Ready != tc.ready || !strings.Contains(r[0].Message, tc.message) {
				t.Errorf("ready=%v %s: %q, want ready=%v containing %q", r[0].Ready, r[0].Reason, r[0].Message, tc.ready, tc.message)
			}
			types := tc.types
			if types == nil {
				types = []string{v1alpha1.PodConditionElasticIP}
			}
			if !slices.Equal(r[0].Types, types) {
				t.Errorf("condition types %v, want %v", r[0].Types, types)
			}
		})
	}
}

// A Pod waiting for its ElasticIP is told the real reason, never an empty address: its
// attachment's own word (no address, another user) or, with no attachment, the
// controller's condition on the Pod.
func TestReadinessTellsWhyItWaits(t *testing.T) {
	nic := &v1alpha1.NetworkInterface{
		ObjectMeta: metav1.ObjectMeta{Name: "p5-3.eth0", Namespace: "default", UID: "uid-p5-3.eth0"},
		Spec:       v1alpha1.NetworkInterfaceSpec{PodRef: v1alpha1.PodReference{Name: "p5-3", UID: "uid-p5-3"}, NodeName: "node-a"},
		Status:     v1alpha1.NetworkInterfaceStatus{Address: "10.244.1.7/32", Phase: v1alpha1.NetworkInterfaceReady},
	}
	waiting := func(eipAddr, message string) *v1alpha1.ElasticIPAttachment {
		a := attachment("p5-3", "node-a", eipAddr, "10.244.1.7", v1alpha1.AttachmentPending, false)
		a.Spec = v1alpha1.ElasticIPAttachmentSpec{ElasticIPRef: v1alpha1.ElasticIPReference{Name: "p5-3"},
			TargetRef: v1alpha1.AttachmentTarget{NetworkInterfaceName: "p5-3.eth0"}}
		a.Status.Conditions[0].Reason, a.Status.Conditions[0].Message = v1alpha1.ReasonWaitingForElasticIP, message
		return a
	}
	told := gatedPod("p5-3")
	told.Status.Conditions = []corev1.PodCondition{{Type: v1alpha1.PodConditionElasticIPAssigned, Status: corev1.ConditionFalse,
		Reason: v1alpha1.ReasonElasticIPInUse, Message: `ElasticIP "shared" is used by Pod "a" (through ElasticIPAttachment "a")`}}
	arpNet := &v1alpha1.ExternalNetwork{ObjectMeta: metav1.ObjectMeta{Name: "ext-net"}, Spec: v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseARP}}
	eip := &v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{Name: "p5-3", Namespace: "default"}, Spec: v1alpha1.ElasticIPSpec{ExternalNetwork: "ext-net"}}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		atts []*v1alpha1.ElasticIPAttachment
		want string
	}{
		{"pools exhausted", gatedPod("p5-3"), []*v1alpha1.ElasticIPAttachment{waiting("",
			`ElasticIP "p5-3" has no address yet: every IPv4 AddressPool of ExternalNetwork "ext-net" is exhausted: "pool"`)},
			`waiting for ElasticIPAttachment "p5-3" (ElasticIP "p5-3" has no address yet: every IPv4 AddressPool of ExternalNetwork "ext-net" is exhausted: "pool")`},
		{"the ElasticIP used by another attachment", gatedPod("p5-3"), []*v1alpha1.ElasticIPAttachment{waiting("10.225.51.5",
			`ElasticIP "p5-3" is used by ElasticIPAttachment "other"`)},
			`waiting for ElasticIPAttachment "p5-3" (ElasticIP "p5-3" is used by ElasticIPAttachment "other")`},
		{"no attachment: the controller's word", told, nil,
			`no ElasticIP is attached to this Pod yet: ElasticIP "shared" is used by Pod "a" (through ElasticIPAttachment "a")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Inputs{NodeName: "node-a", ExternalInterface: "ext0", Attachments: tc.atts}
			r := ComputeReadiness(in, Compute(in), ReadinessInputs{Pods: []*corev1.Pod{tc.pod}, NICs: []*v1alpha1.NetworkInterface{nic},
				ElasticIPs: ElasticIPMap{"default/p5-3": eip}, Networks: map[string]*v1alpha1.ExternalNetwork{"ext-net": arpNet}})
			if len(r) != 1 || r[0].Ready || r[0].Message != tc.want {
				t.Fatalf("readiness %+v, want not ready with %q", r, tc.want)
			}
			if strings.Contains(r[0].Message, `""`) {
				t.Errorf("message %q names an empty address", r[0].Message)
			}
		})
	}
}
