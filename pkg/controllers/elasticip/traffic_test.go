package elasticip

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// TestTrafficBlocked: an ElasticIP whose user cannot carry traffic says so in its
// Attached condition (False, with what is missing), while its phase stays Attached.
func TestTrafficBlocked(t *testing.T) {
	nat := HolderDecision{Holder: &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindElasticIPAttachment, Name: "nginx-eip-attach"},
		NodeName: "node-a", Reason: v1alpha1.ReasonAttached, Message: `used by ElasticIPAttachment "nginx-eip-attach"`}
	direct := HolderDecision{Holder: &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindNetworkInterface, Name: "web.eth0"},
		NodeName: "node-b", Reason: v1alpha1.ReasonAttached, Message: `used by NetworkInterface "web.eth0"`}
	nic := func(node, addr string) *v1alpha1.NetworkInterface {
		return &v1alpha1.NetworkInterface{ObjectMeta: metav1.ObjectMeta{Name: "nginx.eth0"},
			Spec: v1alpha1.NetworkInterfaceSpec{NodeName: node}, Status: v1alpha1.NetworkInterfaceStatus{Address: addr}}
	}
	advert := func(node string, generation, observed int64, answering bool) *v1alpha1.ARPAdvertisement {
		ad := &v1alpha1.ARPAdvertisement{ObjectMeta: metav1.ObjectMeta{Name: "eip-default-x", Generation: generation},
			Spec: v1alpha1.ARPAdvertisementSpec{Address: "10.225.51.5", NodeName: node}}
		if answering {
			ad.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionAnswering, Status: metav1.ConditionTrue,
				Reason: v1alpha1.ReasonAnswering, ObservedGeneration: observed}}
		}
		return ad
	}
	ready := nic("node-a", "10.244.1.5/32")
	for _, tc := range []struct {
		name   string
		in     trafficInput
		reason string // "" means not blocked
		says   string
	}{
		{"NAT, answered", trafficInput{decision: nat, address: "10.225.51.5", arp: true, target: ready, advert: advert("node-a", 2, 2, true)}, "", ""},
		{"NAT, target missing", trafficInput{decision: nat, address: "10.225.51.5", arp: true, targetName: "nginx.eth0"},
			v1alpha1.ReasonWaitingForNetworkInterface, `its NetworkInterface "nginx.eth0" does not exist`},
		{"NAT, Pod not scheduled", trafficInput{decision: nat, address: "10.225.51.5", arp: true, target: nic("", ""), targetName: "nginx.eth0"},
			v1alpha1.ReasonWaitingForNetworkInterface, "is on no Node yet"},
		{"NAT, no Pod IP", trafficInput{decision: nat, address: "10.225.51.5", arp: true, target: nic("node-a", ""), targetName: "nginx.eth0"},
			v1alpha1.ReasonWaitingForNetworkInterface, "has no Pod IP yet"},
		{"no advertisement", trafficInput{decision: nat, address: "10.225.51.5", arp: true, target: ready},
			v1alpha1.ReasonNotAnswering, `Node "node-a" does not answer ARP for "10.225.51.5" yet`},
		{"advertisement of another Node", trafficInput{decision: nat, address: "10.225.51.5", arp: true, target: ready, advert: advert("node-b", 1, 1, true)},
			v1alpha1.ReasonNotAnswering, `Node "node-a" does not answer`},
		{"not answering", trafficInput{decision: direct, address: "10.225.51.5", arp: true, advert: advert("node-b", 1, 0, false)},
			v1alpha1.ReasonNotAnswering, `ARPAdvertisement "eip-default-x" has no Answering condition`},
		{"answering an older generation (before a move)", trafficInput{decision: direct, address: "10.225.51.5", arp: true, advert: advert("node-b", 3, 2, true)},
			v1alpha1.ReasonNotAnswering, `Node "node-b" does not answer`},
		{"agent not reporting", trafficInput{decision: direct, address: "10.225.51.5", arp: true, advert: func() *v1alpha1.ARPAdvertisement {
			ad := advert("node-b", 1, 1, false)
			ad.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionAnswering, Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonAgentNotReporting,
				Message: `the node agent of Node "node-b" has not renewed its heartbeat Lease "juneau-node/juneau-node-node-b" since 2026-01-01T00:00:00Z`, ObservedGeneration: 1}}
			return ad
		}()}, v1alpha1.ReasonAgentNotReporting, `Node "node-b" may no longer answer ARP for "10.225.51.5": the node agent of Node "node-b" has not renewed`},
		{"refused by the agent", trafficInput{decision: direct, address: "10.225.51.255", arp: true, advert: func() *v1alpha1.ARPAdvertisement {
			ad := advert("node-b", 1, 1, false)
			ad.Spec.Address = "10.225.51.255"
			ad.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionAnswering, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonReservedAddress,
				Message: "10.225.51.255 is the broadcast address of 10.225.51.0/24 on interface ext0: no Node answers ARP for it", ObservedGeneration: 1}}
			return ad
		}()}, v1alpha1.ReasonNotAnswering, `Node "node-b" does not answer ARP for "10.225.51.255": 10.225.51.255 is the broadcast address of 10.225.51.0/24`},
		{"direct, answered", trafficInput{decision: direct, address: "10.225.51.5", arp: true, advert: advert("node-b", 1, 1, true)}, "", ""},
		{"bgp network: no ARP to wait for", trafficInput{decision: nat, address: "10.225.51.5", target: ready}, "", ""},
		{"unused", trafficInput{decision: HolderDecision{Reason: v1alpha1.ReasonUnused}, arp: true}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := trafficBlocked(tc.in)
			switch {
			case tc.reason == "" && got != nil:
				t.Fatalf("blocked: %+v", got)
			case tc.reason == "":
				return
			case got == nil:
				t.Fatalf("not blocked, want %s", tc.reason)
			case got.reason != tc.reason || !strings.Contains(got.message, tc.says) || !strings.HasPrefix(got.message, tc.in.decision.Message+"; "):
				t.Fatalf("%s: %q, want %s saying %q after the holder's message", got.reason, got.message, tc.reason, tc.says)
			}
			eip := &v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "default"}}
			claim := &v1alpha1.AllocationClaim{ObjectMeta: metav1.ObjectMeta{Name: "10.225.51.5"}}
			st := desiredStatus(statusInput{eip: eip, alloc: allocation{claim: claim}, decision: tc.in.decision, blocked: got})
			at := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAttached)
			if st.Phase != v1alpha1.ElasticIPAttached || st.Attachment == nil || at.Status != metav1.ConditionFalse || at.Reason != tc.reason {
				t.Errorf("status %s %v, Attached %s/%s; want phase Attached with its user, Attached False/%s", st.Phase, st.Attachment, at.Status, at.Reason, tc.reason)
			}
		})
	}
}

// The ElasticIP controller finds the advertisement of an ElasticIP and reads whether its
// Node answers, from the caches, in both families: an IPv6 ElasticIP whose Node answers
// (by NDP) is Attached True, as an IPv4 one is (its claim's name differs from its
// address: 2001-db8--5, not 2001:db8::5).
func TestAttachedFromTheCachesInBothFamilies(t *testing.T) {
	for _, tc := range []struct{ addr, podIP, pool string }{
		{"10.225.51.5", "10.244.1.5/32", "10.225.51.0/24"},
		{"fd00:225:51::5", "fd00:244:1::5/128", "fd00:225:51::/64"},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			objs := usedElasticIP("default", "web-eip", "uid-web", tc.addr, "node-a")
			att := objs[2].(*v1alpha1.ElasticIPAttachment)
			att.Spec.TargetRef.NetworkInterfaceName = "web.eth0"
			objs[0].(*v1alpha1.ElasticIP).Status.Attachment = &v1alpha1.AttachmentReference{
				Kind: v1alpha1.AttachmentKindElasticIPAttachment, Name: att.Name, UID: att.UID}
			nic := &v1alpha1.NetworkInterface{ObjectMeta: metav1.ObjectMeta{Name: "web.eth0", Namespace: "default", UID: "uid-nic"},
				Spec:   v1alpha1.NetworkInterfaceSpec{NodeName: "node-a", PodRef: v1alpha1.PodReference{Name: "web", UID: "uid-pod", Interface: "eth0"}},
				Status: v1alpha1.NetworkInterfaceStatus{Address: tc.podIP, Addresses: []string{tc.podIP}}}
			pool := poolAndNetwork(tc.pool)
			f := newFixture(t, append(append(objs, nic), pool...))
			f.syncKey("default/web-eip") // makes the advertisement
			ads := f.advertisements()
			if len(ads) != 1 {
				t.Fatalf("advertisements %v, want one", ads)
			}
			for _, ad := range ads {
				if ad.Spec.Address != tc.addr {
					t.Fatalf("advertisement of %q, want %q", ad.Spec.Address, tc.addr)
				}
				ad.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionAnswering, Status: metav1.ConditionTrue,
					Reason: v1alpha1.ReasonAnswering, ObservedGeneration: ad.Generation}}
				if _, err := f.client.JuneauV1alpha1().ARPAdvertisements().UpdateStatus(context.Background(), ad, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			f.advertisements()
			got := f.sync("default/web-eip")
			c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionAttached)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonAttached {
				t.Errorf("Attached = %+v, want True/Attached once its Node answers for %s", c, tc.addr)
			}
		})
	}
}
