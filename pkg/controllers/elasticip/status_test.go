package elasticip

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func TestDesiredStatus(t *testing.T) {
	eip := &v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{Name: "nginx-eip", Namespace: "default", Generation: 3}}
	claim := &v1alpha1.AllocationClaim{ObjectMeta: metav1.ObjectMeta{Name: "10.225.51.5"}, Spec: v1alpha1.AllocationClaimSpec{AddressPool: "ext-pool", Address: "10.225.51.5"}}
	attach := &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindElasticIPAttachment, Name: "nginx-eip-attach"}
	recorded := eip.DeepCopy()
	recorded.Status = v1alpha1.ElasticIPStatus{Address: "10.225.51.5", Attachment: attach, Phase: v1alpha1.ElasticIPAttached}

	type want struct {
		phase                   v1alpha1.ElasticIPPhase
		address                 string
		attachment              *v1alpha1.AttachmentReference
		allocated, attached     metav1.ConditionStatus
		allocReason, attachReas string
	}
	cases := []struct {
		name string
		in   statusInput
		want want
	}{
		{
			name: "attached by NAT",
			in:   statusInput{eip: eip, alloc: allocation{claim: claim}, decision: HolderDecision{Holder: attach, Reason: v1alpha1.ReasonAttached, Message: "used"}},
			want: want{v1alpha1.ElasticIPAttached, "10.225.51.5", attach, "True", "True", v1alpha1.ReasonAllocated, v1alpha1.ReasonAttached},
		},
		{
			name: "reserved and unused",
			in:   statusInput{eip: eip, alloc: allocation{claim: claim}, decision: HolderDecision{Reason: v1alpha1.ReasonUnused, Message: "nobody"}},
			want: want{v1alpha1.ElasticIPAvailable, "10.225.51.5", nil, "True", "False", v1alpha1.ReasonAllocated, v1alpha1.ReasonUnused},
		},
		{
			name: "waiting for handover is Available",
			in:   statusInput{eip: eip, alloc: allocation{claim: claim}, decision: HolderDecision{Reason: v1alpha1.ReasonWaitingForHandover, Message: "wait"}},
			want: want{v1alpha1.ElasticIPAvailable, "10.225.51.5", nil, "True", "False", v1alpha1.ReasonAllocated, v1alpha1.ReasonWaitingForHandover},
		},
		{
			name: "conflict is Error and records no holder",
			in:   statusInput{eip: recorded, alloc: allocation{claim: claim}, decision: HolderDecision{Conflict: true, Reason: v1alpha1.ReasonConflict, Message: "both"}},
			want: want{v1alpha1.ElasticIPError, "10.225.51.5", nil, "True", "False", v1alpha1.ReasonAllocated, v1alpha1.ReasonConflict},
		},
		{
			name: "exhausted",
			in:   statusInput{eip: eip, alloc: allocation{err: &conditionError{v1alpha1.ReasonNoAddressAvailable, "full"}}},
			want: want{v1alpha1.ElasticIPPending, "", nil, "False", "False", v1alpha1.ReasonNoAddressAvailable, v1alpha1.ReasonNotAllocated},
		},
		{
			name: "requested address held by another",
			in:   statusInput{eip: eip, alloc: allocation{err: &conditionError{v1alpha1.ReasonAddressInUse, "held"}}},
			want: want{v1alpha1.ElasticIPPending, "", nil, "False", "False", v1alpha1.ReasonAddressInUse, v1alpha1.ReasonNotAllocated},
		},
		{
			name: "requested address outside the pools",
			in:   statusInput{eip: eip, alloc: allocation{err: &conditionError{v1alpha1.ReasonInvalidAddressPool, "outside"}}},
			want: want{v1alpha1.ElasticIPError, "", nil, "False", "False", v1alpha1.ReasonInvalidAddressPool, v1alpha1.ReasonNotAllocated},
		},
		{
			name: "broken dependency keeps the recorded address and holder, and says the address is reserved",
			in:   statusInput{eip: recorded, deps: &conditionError{v1alpha1.ReasonMissingDependency, "gone"}, alloc: allocation{claim: claim}},
			want: want{v1alpha1.ElasticIPError, "10.225.51.5", attach, "True", "False", v1alpha1.ReasonAllocated, v1alpha1.ReasonMissingDependency},
		},
		{
			name: "broken dependency without a reservation",
			in:   statusInput{eip: recorded, deps: &conditionError{v1alpha1.ReasonMissingDependency, "gone"}},
			want: want{v1alpha1.ElasticIPError, "10.225.51.5", attach, "False", "False", v1alpha1.ReasonMissingDependency, v1alpha1.ReasonMissingDependency},
		},
		{
			name: "deleting while NICs name it",
			in: statusInput{eip: eip, alloc: allocation{claim: claim}, waitingFor: []string{"a.eth0", "b.eth0"},
				decision: HolderDecision{Holder: &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindNetworkInterface, Name: "a.eth0"}, Reason: v1alpha1.ReasonAttached}},
			want: want{v1alpha1.ElasticIPAttached, "10.225.51.5", &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindNetworkInterface, Name: "a.eth0"}, "True", "True", v1alpha1.ReasonWaitingForNetworkInterfaces, v1alpha1.ReasonAttached},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := desiredStatus(tc.in)
			if st.Phase != tc.want.phase || st.Address != tc.want.address {
				t.Errorf("phase/address = %s/%q, want %s/%q", st.Phase, st.Address, tc.want.phase, tc.want.address)
			}
			if (st.Attachment == nil) != (tc.want.attachment == nil) || st.Attachment != nil && *st.Attachment != *tc.want.attachment {
				t.Errorf("attachment = %v, want %v", st.Attachment, tc.want.attachment)
			}
			al := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAllocated)
			at := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAttached)
			if al == nil || at == nil {
				t.Fatalf("conditions missing: %+v", st.Conditions)
			}
			if al.Status != tc.want.allocated || al.Reason != tc.want.allocReason || at.Status != tc.want.attached || at.Reason != tc.want.attachReas {
				t.Errorf("Allocated=%s/%s Attached=%s/%s, want %s/%s %s/%s", al.Status, al.Reason, at.Status, at.Reason,
					tc.want.allocated, tc.want.allocReason, tc.want.attached, tc.want.attachReas)
			}
			for _, c := range st.Conditions {
				if c.Status == metav1.ConditionTrue && v1alpha1.EventType(c.Reason) == corev1.EventTypeWarning {
					t.Errorf("%s is True with the failure reason %s", c.Type, c.Reason)
				}
			}
			if al.ObservedGeneration != 3 || at.ObservedGeneration != 3 {
				t.Errorf("observedGeneration not set: %d %d", al.ObservedGeneration, at.ObservedGeneration)
			}
		})
	}
}

func TestDesiredStatusKeepsTransitionTime(t *testing.T) {
	eip := &v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{Name: "e", Generation: 1}}
	claim := &v1alpha1.AllocationClaim{ObjectMeta: metav1.ObjectMeta{Name: "10.225.51.5"}, Spec: v1alpha1.AllocationClaimSpec{Address: "10.225.51.5"}}
	first := desiredStatus(statusInput{eip: eip, alloc: allocation{claim: claim}, decision: HolderDecision{Reason: v1alpha1.ReasonUnused}})
	old := metav1.NewTime(metav1.Now().Add(-3600e9))
	for i := range first.Conditions {
		first.Conditions[i].LastTransitionTime = old
	}
	eip.Status = first
	again := desiredStatus(statusInput{eip: eip, alloc: allocation{claim: claim}, decision: HolderDecision{Reason: v1alpha1.ReasonUnused}})
	for _, c := range again.Conditions {
		if !c.LastTransitionTime.Equal(&old) {
			t.Errorf("%s transition time changed without a status flip", c.Type)
		}
	}
}

func TestDesiredAdvertisement(t *testing.T) {
	arp := &v1alpha1.ExternalNetwork{ObjectMeta: metav1.ObjectMeta{Name: "ext-net"}, Spec: v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseARP}}
	bgp := &v1alpha1.ExternalNetwork{ObjectMeta: metav1.ObjectMeta{Name: "bgp-net"}, Spec: v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseBGP}}
	claim := &v1alpha1.AllocationClaim{ObjectMeta: metav1.ObjectMeta{Name: "10.225.51.5"}, Spec: v1alpha1.AllocationClaimSpec{Address: "10.225.51.5"}}
	held := HolderDecision{Holder: &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindElasticIPAttachment, Name: "a"}, NodeName: "node-a"}

	for _, network := range []*v1alpha1.ExternalNetwork{arp, bgp} {
		got := desiredAdvertisement(network, claim, held)
		if got == nil || got.NodeName != "node-a" || got.Address != "10.225.51.5" || got.ExternalNetwork != network.Name {
			t.Fatalf("advertisement on %s = %+v", network.Name, got)
		}
	}
	// An IPv6 address is advertised by the same kind, under its canonical text form
	// (the claim's name maps ':' to '-'; the advertisement carries the address itself).
	claim6 := &v1alpha1.AllocationClaim{ObjectMeta: metav1.ObjectMeta{Name: "fd00-225-51--5"}, Spec: v1alpha1.AllocationClaimSpec{Address: "fd00:225:51::5"}}
	if got := desiredAdvertisement(arp, claim6, held); got == nil || got.Address != "fd00:225:51::5" || got.NodeName != "node-a" {
		t.Fatalf("IPv6 advertisement = %+v", got)
	}
	for name, tc := range map[string]struct {
		network *v1alpha1.ExternalNetwork
		claim   *v1alpha1.AllocationClaim
		d       HolderDecision
	}{
		"no network":            {nil, claim, held},
		"no address":            {arp, nil, held},
		"unused":                {arp, claim, HolderDecision{}},
		"conflict":              {arp, claim, HolderDecision{Conflict: true}},
		"holder without a node": {arp, claim, HolderDecision{Holder: held.Holder}},
	} {
		if got := desiredAdvertisement(tc.network, tc.claim, tc.d); got != nil {
			t.Errorf("%s: advertisement %+v, want none", name, *got)
		}
	}
}
