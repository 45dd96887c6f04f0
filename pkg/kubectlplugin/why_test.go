package kubectlplugin

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func cond(t string, s metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: reason + " message"}
}

// healthy is a Pod behind NAT whose every link holds.
func healthy() Facts {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: corev1.PodSpec{NodeName: "node-a",
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: v1alpha1.PodConditionElasticIP}}},
		Status: corev1.PodStatus{PodIP: "10.244.1.5", Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: v1alpha1.PodConditionElasticIP, Status: corev1.ConditionTrue}}},
	}
	eip := &v1alpha1.ElasticIP{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-eip"},
		Spec:       v1alpha1.ElasticIPSpec{ExternalNetwork: "ext-net"},
		Status: v1alpha1.ElasticIPStatus{Phase: v1alpha1.ElasticIPAttached, Address: "10.225.51.5",
			Attachment: &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindElasticIPAttachment, Name: "web-attach"},
			Conditions: []metav1.Condition{cond(v1alpha1.ConditionAllocated, metav1.ConditionTrue, v1alpha1.ReasonAllocated),
				cond(v1alpha1.ConditionAttached, metav1.ConditionTrue, v1alpha1.ReasonAttached)}},
	}
	return Facts{Namespace: "shop", Name: "web", Pod: pod, ElasticIPName: "web-eip", PodAttachment: "web-attach", ElasticIP: eip,
		Network: &v1alpha1.ExternalNetwork{Spec: v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseARP, AddressPools: []string{"pool"}}},
		Pools:   []*v1alpha1.AddressPool{{ObjectMeta: metav1.ObjectMeta{Name: "pool"}, Status: v1alpha1.AddressPoolStatus{Total: 2, Available: 1}}},
		Node:    "node-a", Agent: Agent{Pod: "juneau-node-x", Ready: true, Heartbeat: true},
		ARP: &v1alpha1.ARPAdvertisement{Spec: v1alpha1.ARPAdvertisementSpec{NodeName: "node-a", Address: "10.225.51.5"},
			Status: v1alpha1.ARPAdvertisementStatus{Conditions: []metav1.Condition{cond(v1alpha1.ConditionAnswering, metav1.ConditionTrue, v1alpha1.ReasonAnswering)}}},
	}
}

func TestDiagnose(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Facts)
		link   string // "" = every link holds
		says   string
	}{
		{"every link holds", func(*Facts) {}, "", ""},
		{"webhook refused", func(f *Facts) {
			*f = Facts{Namespace: "shop", Name: "web", Refusal: `ReplicaSet web-5d9: admission webhook "pods.validate.juneau.loutres.me" denied the request: bad`}
		}, LinkExists, "the juneau webhook refused it"},
		{"nothing of that name", func(f *Facts) { *f = Facts{Namespace: "shop", Name: "web"} }, LinkExists, "no Pod or ElasticIP shop/web"},
		{"not scheduled", func(f *Facts) { f.Pod.Spec.NodeName = "" }, LinkScheduled, "not scheduled"},
		{"no agent on the Node", func(f *Facts) { f.Agent = Agent{} }, LinkAgent, "no juneau agent on Node node-a"},
		{"agent not reporting", func(f *Facts) { f.Agent.Heartbeat = false }, LinkAgent, "is not reporting"},
		{"Pod without IP", func(f *Facts) { f.Pod.Status.PodIP = "" }, LinkPodIP, "the Pod has no IP"},
		{"another Pod uses the ElasticIP (Pod condition)", func(f *Facts) {
			f.Pod.Status.Conditions = append(f.Pod.Status.Conditions, corev1.PodCondition{Type: v1alpha1.PodConditionElasticIPAssigned,
				Status: corev1.ConditionFalse, Reason: v1alpha1.ReasonElasticIPInUse, Message: "used by Pod shop/old"})
		}, LinkAssigned, "another Pod uses the ElasticIP: used by Pod shop/old"},
		{"another Pod uses the ElasticIP (status)", func(f *Facts) {
			f.ElasticIP.Status.Attachment = &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindNetworkInterface, Name: "old.eth0"}
		}, LinkUser, "another Pod uses the ElasticIP: NetworkInterface old.eth0"},
		{"asks for no ElasticIP", func(f *Facts) { f.ElasticIPName, f.ElasticIP = "", nil }, LinkElasticIP, "asks for no ElasticIP"},
		{"ElasticIP missing", func(f *Facts) { f.ElasticIP = nil }, LinkElasticIP, "does not exist"},
		{"pool exhausted", func(f *Facts) {
			f.ElasticIP.Status.Conditions[0] = cond(v1alpha1.ConditionAllocated, metav1.ConditionFalse, v1alpha1.ReasonNoAddressAvailable)
			f.Pools[0].Status.Available = 0
		}, LinkAllocated, "pool exhausted: no free address on network ext-net (pool pool: 0 of 2 free)"},
		{"not attached", func(f *Facts) {
			f.ElasticIP.Status.Conditions[1] = cond(v1alpha1.ConditionAttached, metav1.ConditionFalse, v1alpha1.ReasonWaitingForPodIP)
		}, LinkAttached, "WaitingForPodIP"},
		{"nobody answers ARP", func(f *Facts) {
			f.ARP.Status.Conditions[0] = cond(v1alpha1.ConditionAnswering, metav1.ConditionUnknown, v1alpha1.ReasonAgentNotReporting)
		}, LinkAnswered, "no juneau agent answers on Node node-a"},
		{"BGP session down", func(f *Facts) {
			f.Network.Spec.Type = v1alpha1.AdvertiseBGP
			f.ElasticIP.Status.Conditions[1] = cond(v1alpha1.ConditionAttached, metav1.ConditionFalse, v1alpha1.ReasonNotAnnounced)
			f.BGP = &v1alpha1.BGPAdvertisement{Spec: v1alpha1.BGPAdvertisementSpec{NodeName: "node-a", Address: "10.225.51.5"},
				Status: v1alpha1.BGPAdvertisementStatus{Conditions: []metav1.Condition{cond(v1alpha1.ConditionAnnounced, metav1.ConditionFalse, v1alpha1.ReasonNoEstablishedPeer)}}}
			f.BGPNode = &v1alpha1.BGPNodeStatus{Status: v1alpha1.BGPNodeState{Peers: []v1alpha1.BGPSessionStatus{
				{Name: "tor-a", PeerAddress: "10.225.51.1", State: v1alpha1.BGPSessionConnecting, StateMessage: "connection refused"}}}}
		}, LinkAnswered, "BGP session down on Node node-a: peer tor-a (10.225.51.1) is Connecting: connection refused"},
		{"readiness gate not True", func(f *Facts) { f.Pod.Status.Conditions[0].Status = corev1.ConditionFalse }, LinkReadiness, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := healthy()
			tc.change(&f)
			d := Diagnose(f)
			br := d.Broken()
			switch {
			case tc.link == "" && br != nil:
				t.Fatalf("broken link %+v, want none:\n%s", br, d)
			case tc.link == "":
				if !strings.Contains(d.String(), "every link holds") {
					t.Errorf("output:\n%s", d)
				}
				return
			case br == nil:
				t.Fatalf("no broken link, want %q:\n%s", tc.link, d)
			}
			if br.What != tc.link || !strings.Contains(br.Detail, tc.says) || br.Fix == "" {
				t.Errorf("broken link %q %q (fix %q), want %q saying %q", br.What, br.Detail, br.Fix, tc.link, tc.says)
			}
			if last := d.Links[len(d.Links)-1]; last.What != br.What {
				t.Errorf("the chain goes on after the broken link: %+v", d.Links)
			}
		})
	}
}

// An ElasticIP asked about directly: without a Pod, the chain starts at the ElasticIP and
// checks the agent of the Node that answers for it.
func TestDiagnoseElasticIP(t *testing.T) {
	f := healthy()
	f.Pod, f.Name = nil, "web-eip"
	if d := Diagnose(f); d.Broken() != nil {
		t.Fatalf("%s", d)
	}
	f.Agent = Agent{}
	d := Diagnose(f)
	if br := d.Broken(); br == nil || br.What != LinkAgent {
		t.Fatalf("want the agent link broken:\n%s", d)
	}
}
