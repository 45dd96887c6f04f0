package networkinterface

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loutres/juneau/pkg/apis/juneau/directnic"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/status"
)

func testNIC(pod, iface, eip string) *v1alpha1.NetworkInterface {
	return &v1alpha1.NetworkInterface{
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.NetworkInterfaceName(pod, iface), Namespace: "default", UID: "nic-uid", Generation: 3},
		Spec: v1alpha1.NetworkInterfaceSpec{
			PodRef:    v1alpha1.PodReference{Name: pod, UID: "pod-uid", Interface: iface},
			NodeName:  "node-a",
			ElasticIP: eip,
		},
	}
}

// sandbox sets the NIC's status.sandboxAddresses, as the node agent writes them.
func sandbox(nic *v1alpha1.NetworkInterface, addrs ...string) *v1alpha1.NetworkInterface {
	nic.Status.SandboxAddresses = addrs
	return nic
}

func podWithIP(ips ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "pod-uid"}}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if len(ips) > 0 {
		p.Status.PodIP = ips[0]
	}
	return p
}

type eipOpt func(*v1alpha1.ElasticIP)

func testEIP(address string, opts ...eipOpt) *v1alpha1.ElasticIP {
	e := &v1alpha1.ElasticIP{
		ObjectMeta: metav1.ObjectMeta{Name: "gw-eip", Namespace: "default"},
		Spec:       v1alpha1.ElasticIPSpec{ExternalNetwork: "ext-net"},
		Status:     v1alpha1.ElasticIPStatus{Address: address},
	}
	for _, o := range opts {
		o(e)
	}
	return e
}

// heldBy records the holder with the UID testNIC gives every NIC ("nic-uid").
func heldBy(kind v1alpha1.AttachmentKind, name string) eipOpt {
	return heldByUID(kind, name, "nic-uid")
}

func heldByUID(kind v1alpha1.AttachmentKind, name string, uid types.UID) eipOpt {
	return func(e *v1alpha1.ElasticIP) {
		e.Status.Attachment = &v1alpha1.AttachmentReference{Kind: kind, Name: name, UID: uid}
	}
}

func eipCondition(typ, reason, msg string) eipOpt {
	return func(e *v1alpha1.ElasticIP) {
		e.Status.Conditions = append(e.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: reason, Message: msg})
	}
}

func wantStatus(phase v1alpha1.NetworkInterfacePhase, status metav1.ConditionStatus, reason, msg string) v1alpha1.NetworkInterfaceStatus {
	return v1alpha1.NetworkInterfaceStatus{
		Phase: phase,
		Conditions: []metav1.Condition{{
			Type: v1alpha1.ConditionReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: 3,
		}},
	}
}

func TestNICStatus(t *testing.T) {
	defaultRoute := v1alpha1.Route{Destination: "0.0.0.0/0", Gateway: "169.254.0.1", OnLink: true}
	// 10.225.51.5 read as a big-endian uint32.
	const table = 10<<24 | 225<<16 | 51<<8 | 5
	tests := []struct {
		name string
		nic  *v1alpha1.NetworkInterface
		pod  *corev1.Pod
		eip  *v1alpha1.ElasticIP
		want v1alpha1.NetworkInterfaceStatus
	}{
		{
			name: "vpc eth0 before the Pod has an IP",
			nic:  testNIC("web", "eth0", ""),
			pod:  podWithIP(),
			want: wantStatus(v1alpha1.NetworkInterfacePending, metav1.ConditionFalse, v1alpha1.ReasonWaitingForPodIP,
				`Pod "web" has no IP address yet`),
		},
		{
			name: "vpc eth0 whose Pod is gone",
			nic:  testNIC("web", "eth0", ""),
			want: wantStatus(v1alpha1.NetworkInterfacePending, metav1.ConditionFalse, v1alpha1.ReasonWaitingForPodIP,
				`Pod "web" has no IP address yet`),
		},
		{
			name: "vpc eth0 with a Pod IP",
			nic:  testNIC("web", "eth0", ""),
			pod:  podWithIP("10.244.1.5"),
			want: func() v1alpha1.NetworkInterfaceStatus {
				s := wantStatus(v1alpha1.NetworkInterfaceReady, metav1.ConditionTrue, v1alpha1.ReasonReady, `address 10.244.1.5/32 of Pod "web"`)
				s.Address, s.Addresses = "10.244.1.5/32", []string{"10.244.1.5/32"}
				return s
			}(),
		},
		{
			name: "vpc eth0 before the kubelet reports the IPs the sandbox got: the node agent's sandboxAddresses",
			nic:  sandbox(testNIC("web", "eth0", ""), "fd00:244::5", "bogus", "10.244.1.5", "10.244.1.6"),
			pod:  podWithIP(),
			want: func() v1alpha1.NetworkInterfaceStatus {
				s := wantStatus(v1alpha1.NetworkInterfaceReady, metav1.ConditionTrue, v1alpha1.ReasonReady,
					`addresses 10.244.1.5/32, fd00:244::5/128 of Pod "web"`)
				s.Address, s.Addresses = "10.244.1.5/32", []string{"10.244.1.5/32", "fd00:244::5/128"}
				return s
			}(),
		},
		{
			name: "vpc eth0 whose Pod reported its IP: the kubelet's report wins over sandboxAddresses",
			nic:  sandbox(testNIC("web", "eth0", ""), "10.244.1.9"),
			pod:  podWithIP("10.244.1.5"),
			want: func() v1alpha1.NetworkInterfaceStatus {
				s := wantStatus(v1alpha1.NetworkInterfaceReady, metav1.ConditionTrue, v1alpha1.ReasonReady, `address 10.244.1.5/32 of Pod "web"`)
				s.Address, s.Addresses = "10.244.1.5/32", []string{"10.244.1.5/32"}
				return s
			}(),
		},
		{
			name: "vpc eth0 of an earlier Pod of the same name: its sandboxAddresses are not the Pod's",
			nic: func() *v1alpha1.NetworkInterface {
				n := sandbox(testNIC("web", "eth0", ""), "10.244.1.9")
				n.Spec.PodRef.UID = "earlier-pod-uid"
				return n
			}(),
			pod: podWithIP(),
			want: wantStatus(v1alpha1.NetworkInterfacePending, metav1.ConditionFalse, v1alpha1.ReasonWaitingForPodIP,
				`Pod "web" has no IP address yet`),
		},
		{
			name: "vpc eth0 of a dual-stack Pod: the IPv4 address first, both listed",
			nic:  testNIC("web", "eth0", ""),
			pod:  podWithIP("fd00:244::5", "10.244.1.5"),
			want: func() v1alpha1.NetworkInterfaceStatus {
				s := wantStatus(v1alpha1.NetworkInterfaceReady, metav1.ConditionTrue, v1alpha1.ReasonReady,
					`addresses 10.244.1.5/32, fd00:244::5/128 of Pod "web"`)
				s.Address, s.Addresses = "10.244.1.5/32", []string{"10.244.1.5/32", "fd00:244::5/128"}
				return s
			}(),
		},
		{
			name: "vpc eth0 of an IPv6-only Pod",
			nic:  testNIC("web", "eth0", ""),
			pod:  podWithIP("fd00:244::5"),
			want: func() v1alpha1.NetworkInterfaceStatus {
				s := wantStatus(v1alpha1.NetworkInterfaceReady, metav1.ConditionTrue, v1alpha1.ReasonReady, `address fd00:244::5/128 of Pod "web"`)
				s.Address, s.Addresses = "fd00:244::5/128", []string{"fd00:244::5/128"}
				return s
			}(),
		},
		{
			name: "vpc extra NIC has no address but is Ready",
			nic:  testNIC("web", "ext0", ""),
			pod:  podWithIP("10.244.1.5"),
			want: wantStatus(v1alpha1.NetworkInterfaceReady, metav1.ConditionTrue, v1alpha1.ReasonReady,
				`Pod "web" has its address; the address of an extra interface without an ElasticIP is not tracked`),
		},
		{
			name: "direct NIC whose ElasticIP does not exist",
			nic:  testNIC("web", "eth0", "gw-eip"),
			pod:  podWithIP("10.244.1.5"),
			want: wantStatus(v1alpha1.NetworkInterfacePending, metav1.ConditionFalse, v1alpha1.ReasonElasticIPNotReady,
				`ElasticIP "gw-eip" does not exist`),
		},
		{
			name: "direct NIC whose ElasticIP has no address",
			nic:  testNIC("web", "eth0", "gw-eip"),
			eip:  testEIP(""),
			want: wantStatus(v1alpha1.NetworkInterfacePending, metav1.ConditionFalse, v1alpha1.ReasonElasticIPNotReady,
				`ElasticIP "gw-eip" has no address yet`),
		},
		{
			name: "direct NIC whose ElasticIP has no address says why",
			nic:  testNIC("web", "eth0", "gw-eip"),
			eip: testEIP("", eipCondition(v1alpha1.ConditionAllocated, v1alpha1.ReasonNoAddressAvailable,
				`every AddressPool of ExternalNetwork "ext-net" is exhausted`)),
			want: wantStatus(v1alpha1.NetworkInterfacePending, metav1.ConditionFalse, v1alpha1.ReasonElasticIPNotReady,
				`ElasticIP "gw-eip" has no address yet: every AddressPool of ExternalNetwork "ext-net" is exhausted`),
		},
		{
			name: "direct eth0 holding its ElasticIP",
			nic:  testNIC("web", "eth0", "gw-eip"),
			pod:  podWithIP(),
			eip:  testEIP("10.225.51.5", heldBy(v1alpha1.AttachmentKindNetworkInterface, "web.eth0")),
			want: func() v1alpha1.NetworkInterfaceStatus {
				s := wantStatus(v1alpha1.NetworkInterfaceReady, metav1.ConditionTrue, v1alpha1.ReasonReady, `holds ElasticIP "gw-eip" (10.225.51.5)`)
				s.Address = "10.225.51.5/32"
				s.Routes = []v1alpha1.Route{defaultRoute}
				return s
			}(),
		},
		{
			name: "direct extra NIC holding its ElasticIP gets a table and a rule",
			nic:  testNIC("web", "ext0", "gw-eip"),
			eip:  testEIP("10.225.51.5", heldBy(v1alpha1.AttachmentKindNetworkInterface, "web.ext0")),
			want: func() v1alpha1.NetworkInterfaceStatus {
				s := wantStatus(v1alpha1.NetworkInterfaceReady, metav1.ConditionTrue, v1alpha1.ReasonReady, `holds ElasticIP "gw-eip" (10.225.51.5)`)
				s.Address = "10.225.51.5/32"
				r := defaultRoute
				r.Table = table
				s.Routes = []v1alpha1.Route{r}
				s.Rules = []v1alpha1.RoutingRule{{From: "10.225.51.5/32", Table: table, Priority: 100}}
				return s
			}(),
		},
		{
			name: "direct NIC losing to another NIC",
			nic:  testNIC("web", "eth0", "gw-eip"),
			eip:  testEIP("10.225.51.5", heldBy(v1alpha1.AttachmentKindNetworkInterface, "old.eth0")),
			want: wantStatus(v1alpha1.NetworkInterfacePending, metav1.ConditionFalse, v1alpha1.ReasonWaitingForElasticIP,
				`ElasticIP "gw-eip" is used by NetworkInterface "old.eth0"`),
		},
		{
			name: "direct NIC while an attachment uses the ElasticIP",
			nic:  testNIC("web", "eth0", "gw-eip"),
			eip:  testEIP("10.225.51.5", heldBy(v1alpha1.AttachmentKindElasticIPAttachment, "web-nat")),
			want: wantStatus(v1alpha1.NetworkInterfacePending, metav1.ConditionFalse, v1alpha1.ReasonWaitingForElasticIP,
				`ElasticIP "gw-eip" is used by ElasticIPAttachment "web-nat"`),
		},
		{
			name: "a NIC of the same name in another kind does not count as holding",
			nic:  testNIC("web", "eth0", "gw-eip"),
			eip:  testEIP("10.225.51.5", heldBy(v1alpha1.AttachmentKindElasticIPAttachment, "web.eth0")),
			want: wantStatus(v1alpha1.NetworkInterfacePending, metav1.ConditionFalse, v1alpha1.ReasonWaitingForElasticIP,
				`ElasticIP "gw-eip" is used by ElasticIPAttachment "web.eth0"`),
		},
		{
			name: "direct NIC during a conflict",
			nic:  testNIC("web", "eth0", "gw-eip"),
			eip: testEIP("10.225.51.5", eipCondition(v1alpha1.ConditionAttached, v1alpha1.ReasonConflict,
				`both ElasticIPAttachment "web-nat" and NetworkInterface "web.eth0" use this ElasticIP`)),
			want: wantStatus(v1alpha1.NetworkInterfacePending, metav1.ConditionFalse, v1alpha1.ReasonWaitingForElasticIP,
				`ElasticIP "gw-eip" is in conflict: both ElasticIPAttachment "web-nat" and NetworkInterface "web.eth0" use this ElasticIP`),
		},
		{
			name: "direct NIC waiting for a handover",
			nic:  testNIC("web", "eth0", "gw-eip"),
			eip: testEIP("10.225.51.5", eipCondition(v1alpha1.ConditionAttached, v1alpha1.ReasonWaitingForHandover,
				`waiting for the deleting NetworkInterface "old.eth0" to be gone`)),
			want: wantStatus(v1alpha1.NetworkInterfacePending, metav1.ConditionFalse, v1alpha1.ReasonWaitingForElasticIP,
				`ElasticIP "gw-eip" waits for a handover: waiting for the deleting NetworkInterface "old.eth0" to be gone`),
		},
		{
			name: "direct NIC before the ElasticIP picked anyone",
			nic:  testNIC("web", "eth0", "gw-eip"),
			eip:  testEIP("10.225.51.5", eipCondition(v1alpha1.ConditionAttached, v1alpha1.ReasonUnused, "nobody")),
			want: wantStatus(v1alpha1.NetworkInterfacePending, metav1.ConditionFalse, v1alpha1.ReasonWaitingForElasticIP,
				`ElasticIP "gw-eip" has not picked this NetworkInterface yet`),
		},
		{
			name: "a NIC of the holder's name but another UID (its Pod was re-created) does not hold",
			nic:  testNIC("web", "eth0", "gw-eip"),
			eip:  testEIP("10.225.51.5", heldByUID(v1alpha1.AttachmentKindNetworkInterface, "web.eth0", "earlier-uid")),
			want: wantStatus(v1alpha1.NetworkInterfacePending, metav1.ConditionFalse, v1alpha1.ReasonWaitingForElasticIP,
				`ElasticIP "gw-eip" is used by an earlier NetworkInterface of the same name "web.eth0" (UID "earlier-uid"), not by this one`),
		},
		{
			name: "direct NIC of a deleting ElasticIP that does not hold it: Failed, it never will",
			nic:  testNIC("web", "eth0", "gw-eip"),
			eip: testEIP("10.225.51.5", heldByUID(v1alpha1.AttachmentKindNetworkInterface, "web.eth0", "earlier-uid"), func(e *v1alpha1.ElasticIP) {
				e.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
			}),
			want: wantStatus(v1alpha1.NetworkInterfaceFailed, metav1.ConditionFalse, v1alpha1.ReasonElasticIPDeleting,
				`ElasticIP "gw-eip" is being deleted and is handed to no new NetworkInterface: re-create the Pod with another ElasticIP`),
		},
		{
			name: "the holder of a deleting ElasticIP keeps it",
			nic:  testNIC("web", "eth0", "gw-eip"),
			eip: testEIP("10.225.51.5", heldBy(v1alpha1.AttachmentKindNetworkInterface, "web.eth0"), func(e *v1alpha1.ElasticIP) {
				e.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
			}),
			want: func() v1alpha1.NetworkInterfaceStatus {
				s := wantStatus(v1alpha1.NetworkInterfaceReady, metav1.ConditionTrue, v1alpha1.ReasonReady, `holds ElasticIP "gw-eip" (10.225.51.5)`)
				s.Address = "10.225.51.5/32"
				s.Routes = []v1alpha1.Route{defaultRoute}
				return s
			}(),
		},
		{
			name: "a direct NIC made after its Pod's network was set up: Failed",
			nic: func() *v1alpha1.NetworkInterface {
				n := testNIC("web", "eth0", "gw-eip")
				n.Spec.CreatedAfterPodNetwork = true
				return n
			}(),
			eip: testEIP("10.225.51.5", heldBy(v1alpha1.AttachmentKindNetworkInterface, "web.eth0")),
			want: wantStatus(v1alpha1.NetworkInterfaceFailed, metav1.ConditionFalse, v1alpha1.ReasonPodNetworkAlreadySetUp,
				`made after the network of Pod "web" was set up (its annotations named ElasticIP "gw-eip" only later), so it was never plumbed: re-create the Pod to use the ElasticIP`),
		},
		{
			name: "direct NIC named holder of an unusable address",
			nic:  testNIC("web", "eth0", "gw-eip"),
			eip:  testEIP("::ffff:10.225.51.5", heldBy(v1alpha1.AttachmentKindNetworkInterface, "web.eth0")),
			want: wantStatus(v1alpha1.NetworkInterfacePending, metav1.ConditionFalse, v1alpha1.ReasonElasticIPNotReady,
				`ElasticIP "gw-eip" has no usable address ("::ffff:10.225.51.5")`),
		},
		{
			name: "direct eth0 holding an IPv6 ElasticIP: a /128 and the default route via fe80::1",
			nic:  testNIC("web", "eth0", "gw-eip"),
			eip:  testEIP("fd00:225:51::5", heldBy(v1alpha1.AttachmentKindNetworkInterface, "web.eth0")),
			want: func() v1alpha1.NetworkInterfaceStatus {
				s := wantStatus(v1alpha1.NetworkInterfaceReady, metav1.ConditionTrue, v1alpha1.ReasonReady, `holds ElasticIP "gw-eip" (fd00:225:51::5)`)
				s.Address = "fd00:225:51::5/128"
				s.Routes = []v1alpha1.Route{{Destination: "::/0", Gateway: "fe80::1"}}
				return s
			}(),
		},
		{
			name: "direct extra NIC holding an IPv6 ElasticIP: a /128, routes left to the plugin",
			nic:  testNIC("web", "ext0", "gw-eip"),
			eip:  testEIP("fd00:225:51::5", heldBy(v1alpha1.AttachmentKindNetworkInterface, "web.ext0")),
			want: func() v1alpha1.NetworkInterfaceStatus {
				s := wantStatus(v1alpha1.NetworkInterfaceReady, metav1.ConditionTrue, v1alpha1.ReasonReady, `holds ElasticIP "gw-eip" (fd00:225:51::5)`)
				s.Address = "fd00:225:51::5/128"
				return s
			}(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := nicStatus(tt.nic, tt.pod, tt.eip)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("nicStatus (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRouteTable(t *testing.T) {
	for addr, want := range map[string]int64{
		"10.225.51.5":     0x0ae13305,
		"255.255.255.255": 4294967295,
		"0.0.1.0":         256,
	} {
		if got := directnic.RouteTable(netip.MustParseAddr(addr)); got != want {
			t.Errorf("directnic.RouteTable(%s) = %d, want %d", addr, got, want)
		}
	}
}

func TestMergeStatusKeepsTransitionTime(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	now := metav1.NewTime(then.Add(time.Hour))
	nodeCond := metav1.Condition{Type: "NodeProgrammed", Status: metav1.ConditionTrue, Reason: "Programmed", LastTransitionTime: then}
	old := v1alpha1.NetworkInterfaceStatus{
		Phase: v1alpha1.NetworkInterfacePending,
		Conditions: []metav1.Condition{
			{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonWaitingForPodIP, LastTransitionTime: then},
			nodeCond,
		},
	}
	nic := testNIC("web", "eth0", "")
	merge := func(computed v1alpha1.NetworkInterfaceStatus) v1alpha1.NetworkInterfaceStatus {
		computed.Conditions = status.Merge(old.Conditions, computed.Conditions, now)
		return computed
	}

	stillWaiting := merge(nicStatus(nic, podWithIP(), nil))
	if got := stillWaiting.Conditions[0].LastTransitionTime; !got.Equal(&then) {
		t.Errorf("unchanged status moved lastTransitionTime to %v", got)
	}
	if len(stillWaiting.Conditions) != 2 || stillWaiting.Conditions[1].Type != nodeCond.Type {
		t.Errorf("another writer's condition was lost: %+v", stillWaiting.Conditions)
	}

	flipped := merge(nicStatus(nic, podWithIP("10.244.1.5"), nil))
	if got := flipped.Conditions[0].LastTransitionTime; !got.Equal(&now) {
		t.Errorf("flip kept lastTransitionTime %v, want %v", got, now)
	}
	if old.Conditions[0].Status != metav1.ConditionFalse {
		t.Error("the merge changed its input")
	}
}

func TestReadyEvent(t *testing.T) {
	cond := func(s metav1.ConditionStatus, reason string) *metav1.Condition {
		return &metav1.Condition{Type: v1alpha1.ConditionReady, Status: s, Reason: reason, Message: "m"}
	}
	tests := []struct {
		name     string
		old, cur *metav1.Condition
		want     string // event type, "" for none
	}{
		{"first status is waiting", nil, cond(metav1.ConditionFalse, v1alpha1.ReasonWaitingForPodIP), ""},
		{"first status is ready", nil, cond(metav1.ConditionTrue, v1alpha1.ReasonReady), "Normal"},
		{"becomes ready", cond(metav1.ConditionFalse, v1alpha1.ReasonWaitingForElasticIP), cond(metav1.ConditionTrue, v1alpha1.ReasonReady), "Normal"},
		{"loses ready", cond(metav1.ConditionTrue, v1alpha1.ReasonReady), cond(metav1.ConditionFalse, v1alpha1.ReasonWaitingForElasticIP), "Warning"},
		{"waits for something else", cond(metav1.ConditionFalse, v1alpha1.ReasonElasticIPNotReady), cond(metav1.ConditionFalse, v1alpha1.ReasonWaitingForElasticIP), "Normal"},
		{"no change", cond(metav1.ConditionTrue, v1alpha1.ReasonReady), cond(metav1.ConditionTrue, v1alpha1.ReasonReady), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, ok := readyEvents.Event(tt.old, tt.cur)
			if got := map[bool]string{true: ev.Type}[ok]; got != tt.want {
				t.Errorf("event type %q, want %q", got, tt.want)
			}
			if ok && ev.Reason != tt.cur.Reason {
				t.Errorf("reason %q, want %q", ev.Reason, tt.cur.Reason)
			}
		})
	}
}
