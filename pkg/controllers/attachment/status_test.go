package attachment

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func testAttachment() *v1alpha1.ElasticIPAttachment {
	return &v1alpha1.ElasticIPAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "web-nat", Namespace: "default", UID: "att-uid", Generation: 2},
		Spec: v1alpha1.ElasticIPAttachmentSpec{
			ElasticIPRef: v1alpha1.ElasticIPReference{Name: "web-eip"},
			TargetRef:    v1alpha1.AttachmentTarget{NetworkInterfaceName: "web.eth0"},
		},
	}
}

type eipOpt func(*v1alpha1.ElasticIP)

func testEIP(address string, opts ...eipOpt) *v1alpha1.ElasticIP {
	e := &v1alpha1.ElasticIP{
		ObjectMeta: metav1.ObjectMeta{Name: "web-eip", Namespace: "default"},
		Spec:       v1alpha1.ElasticIPSpec{ExternalNetwork: "ext-net"},
		Status:     v1alpha1.ElasticIPStatus{Address: address},
	}
	for _, o := range opts {
		o(e)
	}
	return e
}

func heldBy(kind v1alpha1.AttachmentKind, name string, uid types.UID) eipOpt {
	return func(e *v1alpha1.ElasticIP) {
		e.Status.Attachment = &v1alpha1.AttachmentReference{Kind: kind, Name: name, UID: uid}
	}
}

var heldByUs = heldBy(v1alpha1.AttachmentKindElasticIPAttachment, "web-nat", "att-uid")

func attachedCondition(reason, msg string) eipOpt {
	return func(e *v1alpha1.ElasticIP) {
		e.Status.Conditions = append(e.Status.Conditions, metav1.Condition{
			Type: v1alpha1.ConditionAttached, Status: metav1.ConditionFalse, Reason: reason, Message: msg})
	}
}

func testNIC(address, node string, opts ...func(*v1alpha1.NetworkInterface)) *v1alpha1.NetworkInterface {
	n := &v1alpha1.NetworkInterface{
		ObjectMeta: metav1.ObjectMeta{Name: "web.eth0", Namespace: "default"},
		Spec: v1alpha1.NetworkInterfaceSpec{
			PodRef:   v1alpha1.PodReference{Name: "web", UID: "pod-uid", Interface: "eth0"},
			NodeName: node,
		},
		Status: v1alpha1.NetworkInterfaceStatus{Address: address},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func want(phase v1alpha1.AttachmentPhase, eip, podIP, node, reason, msg string) v1alpha1.ElasticIPAttachmentStatus {
	status := metav1.ConditionFalse
	if phase == v1alpha1.AttachmentAttached {
		status = metav1.ConditionTrue
	}
	return v1alpha1.ElasticIPAttachmentStatus{
		Phase: phase, ElasticIP: eip, PodIP: podIP, NodeName: node,
		Conditions: []metav1.Condition{{
			Type: v1alpha1.ConditionReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: 2,
		}},
	}
}

func TestAttachmentStatus(t *testing.T) {
	tests := []struct {
		name string
		eip  *v1alpha1.ElasticIP
		nic  *v1alpha1.NetworkInterface
		want v1alpha1.ElasticIPAttachmentStatus
	}{
		{
			name: "attached",
			eip:  testEIP("10.225.51.5", heldByUs),
			nic:  testNIC("10.244.1.5/32", "node-a"),
			want: want(v1alpha1.AttachmentAttached, "10.225.51.5", "10.244.1.5", "node-a", v1alpha1.ReasonAttached,
				`ElasticIP "web-eip" (10.225.51.5) is translated to 10.244.1.5 of NetworkInterface "web.eth0" on Node "node-a"`),
		},
		{
			name: "both missing",
			want: want(v1alpha1.AttachmentError, "", "", "", v1alpha1.ReasonMissingElasticIP,
				`ElasticIP "web-eip" and NetworkInterface "web.eth0" do not exist`),
		},
		{
			name: "ElasticIP missing, NIC fields still filled",
			nic:  testNIC("10.244.1.5/32", "node-a"),
			want: want(v1alpha1.AttachmentError, "", "10.244.1.5", "node-a", v1alpha1.ReasonMissingElasticIP,
				`ElasticIP "web-eip" does not exist`),
		},
		{
			name: "NIC missing",
			eip:  testEIP("10.225.51.5", heldByUs),
			want: want(v1alpha1.AttachmentError, "10.225.51.5", "", "", v1alpha1.ReasonMissingNetworkInterface,
				`NetworkInterface "web.eth0" does not exist`),
		},
		{
			name: "ElasticIP without an address",
			eip:  testEIP(""),
			nic:  testNIC("10.244.1.5/32", "node-a"),
			want: want(v1alpha1.AttachmentPending, "", "10.244.1.5", "node-a", v1alpha1.ReasonWaitingForElasticIP,
				`ElasticIP "web-eip" has no address yet`),
		},
		{
			name: "ElasticIP in conflict: its Attached message is passed on",
			eip: testEIP("10.225.51.5", attachedCondition(v1alpha1.ReasonConflict,
				`both ElasticIPAttachment "web-nat" and NetworkInterface "db.eth0" use this ElasticIP`)),
			nic: testNIC("10.244.1.5/32", "node-a"),
			want: want(v1alpha1.AttachmentPending, "10.225.51.5", "10.244.1.5", "node-a", v1alpha1.ReasonWaitingForElasticIP,
				`ElasticIP "web-eip" is in conflict: both ElasticIPAttachment "web-nat" and NetworkInterface "db.eth0" use this ElasticIP`),
		},
		{
			name: "ElasticIP used by another attachment",
			eip:  testEIP("10.225.51.5", heldBy(v1alpha1.AttachmentKindElasticIPAttachment, "other", "other-uid")),
			nic:  testNIC("10.244.1.5/32", "node-a"),
			want: want(v1alpha1.AttachmentPending, "10.225.51.5", "10.244.1.5", "node-a", v1alpha1.ReasonWaitingForElasticIP,
				`ElasticIP "web-eip" is used by ElasticIPAttachment "other"`),
		},
		{
			name: "an earlier attachment of our name holding it is not us",
			eip:  testEIP("10.225.51.5", heldBy(v1alpha1.AttachmentKindElasticIPAttachment, "web-nat", "earlier-uid")),
			nic:  testNIC("10.244.1.5/32", "node-a"),
			want: want(v1alpha1.AttachmentPending, "10.225.51.5", "10.244.1.5", "node-a", v1alpha1.ReasonWaitingForElasticIP,
				`ElasticIP "web-eip" is used by an earlier ElasticIPAttachment of the same name "web-nat" (UID "earlier-uid"), not by this one`),
		},
		{
			name: "a NetworkInterface of our name holding it is not us",
			eip:  testEIP("10.225.51.5", heldBy(v1alpha1.AttachmentKindNetworkInterface, "web-nat", "nic-uid")),
			nic:  testNIC("10.244.1.5/32", "node-a"),
			want: want(v1alpha1.AttachmentPending, "10.225.51.5", "10.244.1.5", "node-a", v1alpha1.ReasonWaitingForElasticIP,
				`ElasticIP "web-eip" is used by NetworkInterface "web-nat"`),
		},
		{
			name: "ElasticIP not decided yet",
			eip:  testEIP("10.225.51.5"),
			nic:  testNIC("10.244.1.5/32", "node-a"),
			want: want(v1alpha1.AttachmentPending, "10.225.51.5", "10.244.1.5", "node-a", v1alpha1.ReasonWaitingForElasticIP,
				`ElasticIP "web-eip" has not picked this ElasticIPAttachment yet`),
		},
		{
			name: "deleting ElasticIP",
			eip:  testEIP("10.225.51.5", func(e *v1alpha1.ElasticIP) { e.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)} }),
			nic:  testNIC("10.244.1.5/32", "node-a"),
			want: want(v1alpha1.AttachmentPending, "10.225.51.5", "10.244.1.5", "node-a", v1alpha1.ReasonWaitingForElasticIP,
				`ElasticIP "web-eip" is being deleted`),
		},
		{
			name: "NIC without an address yet, node filled for the ARP placement",
			eip:  testEIP("10.225.51.5", heldByUs),
			nic:  testNIC("", "node-a"),
			want: want(v1alpha1.AttachmentPending, "10.225.51.5", "", "node-a", v1alpha1.ReasonWaitingForNetworkInterface,
				`NetworkInterface "web.eth0" has no address yet`),
		},
		{
			name: "NIC without address or node",
			eip:  testEIP("10.225.51.5", heldByUs),
			nic:  testNIC("", ""),
			want: want(v1alpha1.AttachmentPending, "10.225.51.5", "", "", v1alpha1.ReasonWaitingForNetworkInterface,
				`NetworkInterface "web.eth0" has no address and no Node yet`),
		},
		{
			name: "NIC carrying an ElasticIP directly gives no Pod IP",
			eip:  testEIP("10.225.51.5", heldByUs),
			nic:  testNIC("10.225.51.9/32", "node-a", func(n *v1alpha1.NetworkInterface) { n.Spec.ElasticIP = "other-eip" }),
			want: want(v1alpha1.AttachmentPending, "10.225.51.5", "", "node-a", v1alpha1.ReasonWaitingForNetworkInterface,
				`NetworkInterface "web.eth0" carries ElasticIP "other-eip" directly; NAT needs a NetworkInterface without one`),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := attachmentStatus(testAttachment(), tt.eip, tt.nic)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("attachmentStatus (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadyEvent(t *testing.T) {
	cond := func(s metav1.ConditionStatus, reason string) *metav1.Condition {
		return &metav1.Condition{Type: v1alpha1.ConditionReady, Status: s, Reason: reason, Message: "m"}
	}
	tests := []struct {
		name     string
		old, cur *metav1.Condition
		want     string
	}{
		{"first status waits", nil, cond(metav1.ConditionFalse, v1alpha1.ReasonWaitingForElasticIP), ""},
		{"first status is an error", nil, cond(metav1.ConditionFalse, v1alpha1.ReasonMissingNetworkInterface), "Warning"},
		{"attached", cond(metav1.ConditionFalse, v1alpha1.ReasonWaitingForNetworkInterface), cond(metav1.ConditionTrue, v1alpha1.ReasonAttached), "Normal"},
		{"detached", cond(metav1.ConditionTrue, v1alpha1.ReasonAttached), cond(metav1.ConditionFalse, v1alpha1.ReasonWaitingForElasticIP), "Warning"},
		{"ElasticIP deleted", cond(metav1.ConditionFalse, v1alpha1.ReasonWaitingForElasticIP), cond(metav1.ConditionFalse, v1alpha1.ReasonMissingElasticIP), "Warning"},
		{"waits for something else", cond(metav1.ConditionFalse, v1alpha1.ReasonWaitingForElasticIP), cond(metav1.ConditionFalse, v1alpha1.ReasonWaitingForNetworkInterface), "Normal"},
		{"unchanged", cond(metav1.ConditionTrue, v1alpha1.ReasonAttached), cond(metav1.ConditionTrue, v1alpha1.ReasonAttached), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, ok := readyEvents.Event(tt.old, tt.cur)
			if got := map[bool]string{true: ev.Type}[ok]; got != tt.want {
				t.Errorf("event type %q, want %q", got, tt.want)
			}
		})
	}
}

func dualStack(n *v1alpha1.NetworkInterface) {
	n.Status.Addresses = []string{"10.244.1.5/32", "fd00:244::5/128"}
}

// An IPv6 ElasticIP is translated to the Pod's IPv6 address, an IPv4 one to its IPv4
// address; an IPv6 ElasticIP for an IPv4-only Pod is an error, not NAT64.
func TestAttachmentStatusIPv6(t *testing.T) {
	six := func(e *v1alpha1.ElasticIP) { e.Spec.IPFamily = v1alpha1.IPv6 }
	tests := []struct {
		name string
		eip  *v1alpha1.ElasticIP
		nic  *v1alpha1.NetworkInterface
		want v1alpha1.ElasticIPAttachmentStatus
	}{
		{
			name: "IPv6 ElasticIP, dual-stack Pod",
			eip:  testEIP("fd00:225:51::5", six, heldByUs),
			nic:  testNIC("10.244.1.5/32", "node-a", dualStack),
			want: want(v1alpha1.AttachmentAttached, "fd00:225:51::5", "fd00:244::5", "node-a", v1alpha1.ReasonAttached,
				`ElasticIP "web-eip" (fd00:225:51::5) is translated to fd00:244::5 of NetworkInterface "web.eth0" on Node "node-a"`),
		},
		{
			name: "IPv4 ElasticIP, dual-stack Pod",
			eip:  testEIP("10.225.51.5", heldByUs),
			nic:  testNIC("10.244.1.5/32", "node-a", dualStack),
			want: want(v1alpha1.AttachmentAttached, "10.225.51.5", "10.244.1.5", "node-a", v1alpha1.ReasonAttached,
				`ElasticIP "web-eip" (10.225.51.5) is translated to 10.244.1.5 of NetworkInterface "web.eth0" on Node "node-a"`),
		},
		{
			name: "IPv6 ElasticIP, IPv4-only Pod",
			eip:  testEIP("fd00:225:51::5", six, heldByUs),
			nic:  testNIC("10.244.1.5/32", "node-a"),
			want: want(v1alpha1.AttachmentError, "fd00:225:51::5", "", "node-a", v1alpha1.ReasonAddressFamilyMismatch,
				`ElasticIP "web-eip" is IPv6 but Pod "web" of NetworkInterface "web.eth0" has no IPv6 address (only 10.244.1.5): an ElasticIP is translated to the Pod's address of its own family, never to another (no NAT64); use an ElasticIP of spec.ipFamily IPv4 or a Pod with an IPv6 address`),
		},
		{
			name: "IPv6 ElasticIP without an address yet, IPv4-only Pod",
			eip:  testEIP("", six),
			nic:  testNIC("10.244.1.5/32", "node-a", func(n *v1alpha1.NetworkInterface) { n.Status.Addresses = []string{"10.244.1.5/32"} }),
			want: want(v1alpha1.AttachmentError, "", "", "node-a", v1alpha1.ReasonAddressFamilyMismatch,
				`ElasticIP "web-eip" is IPv6 but Pod "web" of NetworkInterface "web.eth0" has no IPv6 address (only 10.244.1.5): an ElasticIP is translated to the Pod's address of its own family, never to another (no NAT64); use an ElasticIP of spec.ipFamily IPv4 or a Pod with an IPv6 address`),
		},
		{
			name: "IPv4 ElasticIP, IPv6-only Pod",
			eip:  testEIP("10.225.51.5", heldByUs),
			nic:  testNIC("fd00:244::5/128", "node-a"),
			want: want(v1alpha1.AttachmentError, "10.225.51.5", "", "node-a", v1alpha1.ReasonAddressFamilyMismatch,
				`ElasticIP "web-eip" is IPv4 but Pod "web" of NetworkInterface "web.eth0" has no IPv4 address (only fd00:244::5): an ElasticIP is translated to the Pod's address of its own family, never to another (no NAT64); use an ElasticIP of spec.ipFamily IPv6 or a Pod with an IPv4 address`),
		},
		{
			name: "IPv6 ElasticIP, Pod without an address yet",
			eip:  testEIP("fd00:225:51::5", six, heldByUs),
			nic:  testNIC("", "node-a"),
			want: want(v1alpha1.AttachmentPending, "fd00:225:51::5", "", "node-a", v1alpha1.ReasonWaitingForNetworkInterface,
				`NetworkInterface "web.eth0" has no address yet`),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := attachmentStatus(testAttachment(), tt.eip, tt.nic)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("attachmentStatus (-want +got):\n%s", diff)
			}
		})
	}
}
