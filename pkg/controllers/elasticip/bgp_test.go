package elasticip

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// bgpNetwork is a bgp pool and network named like poolAndNetwork's, so that the
// ElasticIPs of the other tests use it.
func bgpNetwork(addresses ...string) []runtime.Object {
	return []runtime.Object{
		&v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: "ext-pool"}, Spec: v1alpha1.AddressPoolSpec{AdvertiseMode: v1alpha1.AdvertiseBGP, Addresses: addresses}},
		&v1alpha1.ExternalNetwork{ObjectMeta: metav1.ObjectMeta{Name: "ext-net"}, Spec: v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseBGP, AddressPools: []string{"ext-pool"}}},
	}
}

// bgpAdvertisements lists the BGPAdvertisements in the API and feeds them to the cache.
func (f *fixture) bgpAdvertisements() map[string]*v1alpha1.BGPAdvertisement {
	f.t.Helper()
	list, err := f.client.JuneauV1alpha1().BGPAdvertisements().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]*v1alpha1.BGPAdvertisement{}
	indexer := f.inf.Juneau().V1alpha1().BGPAdvertisements().Informer().GetIndexer()
	for _, old := range indexer.List() {
		_ = indexer.Delete(old)
	}
	for i := range list.Items {
		ad := &list.Items[i]
		if ad.UID == "" {
			ad.UID = types.UID("ad-" + ad.Name)
		}
		if err := indexer.Add(ad); err != nil {
			f.t.Fatal(err)
		}
		out[ad.Name] = ad
	}
	return out
}

// On a bgp network the holder's Node announces the address: a BGPAdvertisement under
// the same name and owner rules as an ARPAdvertisement, moved in place when the user
// moves, deleted when nobody uses the address; no ARPAdvertisement ever.
func TestBGPAdvertisementLifecycle(t *testing.T) {
	objs := append(bgpNetwork("10.225.53.0/24"), usedElasticIP("ns", "e", "uid-1", "10.225.53.5", "node-a")...)
	f := newFixture(t, objs)
	f.syncKey("ns/e")
	ads := f.bgpAdvertisements()
	ad := ads["eip-ns-e"]
	if len(ads) != 1 || ad == nil {
		t.Fatalf("BGPAdvertisements %v, want eip-ns-e", keys(ads))
	}
	if !equality.Semantic.DeepEqual(ad.Spec, v1alpha1.BGPAdvertisementSpec{ExternalNetwork: "ext-net", Address: "10.225.53.5", NodeName: "node-a"}) ||
		!advertisement.Belongs(ad, advertisement.Owner{Namespace: "ns", Name: "e", UID: "uid-1"}) {
		t.Errorf("BGPAdvertisement %+v %+v", ad.ObjectMeta, ad.Spec)
	}
	if arp := f.advertisements(); len(arp) != 0 {
		t.Errorf("ARPAdvertisements %v on a bgp network", keys(arp))
	}

	// The attachment's Pod moves to node-b: the same object names node-b.
	att, err := f.inf.Juneau().V1alpha1().ElasticIPAttachments().Lister().ElasticIPAttachments("ns").Get("e-att")
	if err != nil {
		t.Fatal(err)
	}
	att = att.DeepCopy()
	att.Status.NodeName = "node-b"
	if err := f.inf.Juneau().V1alpha1().ElasticIPAttachments().Informer().GetIndexer().Update(att); err != nil {
		t.Fatal(err)
	}
	f.client.ClearActions()
	f.syncKey("ns/e")
	ads = f.bgpAdvertisements()
	if moved := ads["eip-ns-e"]; len(ads) != 1 || moved == nil || moved.Spec.NodeName != "node-b" || moved.UID != ad.UID {
		t.Errorf("after the move: %v, want eip-ns-e (same object) on node-b", ads)
	}
	if w := f.writes("bgpadvertisements"); len(w) != 1 || w[0] != "update" {
		t.Errorf("writes %v, want one update in place", w)
	}

	// Nobody uses the address any more: the advertisement goes.
	if err := f.inf.Juneau().V1alpha1().ElasticIPAttachments().Informer().GetIndexer().Delete(att); err != nil {
		t.Fatal(err)
	}
	f.syncKey("ns/e")
	if ads := f.bgpAdvertisements(); len(ads) != 0 {
		t.Errorf("BGPAdvertisements %v of an unused ElasticIP", keys(ads))
	}
}

// A BGPAdvertisement carries its pool's communities, in order and each once, and
// follows a change of them in place; the next sync writes nothing.
func TestBGPAdvertisementCommunities(t *testing.T) {
	objs := append(bgpNetwork("10.225.53.0/24"), usedElasticIP("ns", "e", "uid-1", "10.225.53.5", "node-a")...)
	pool := objs[0].(*v1alpha1.AddressPool)
	pool.Spec.BGPCommunities = []string{"65000:1:2", "65001:7", "65000:100", "65001:7"}
	f := newFixture(t, objs)
	f.syncKey("ns/e")
	ad := f.bgpAdvertisements()["eip-ns-e"]
	if want := []string{"65000:100", "65001:7", "65000:1:2"}; ad == nil || !slices.Equal(ad.Spec.Communities, want) {
		t.Fatalf("BGPAdvertisement %+v, want communities %v", ad, want)
	}

	pool = pool.DeepCopy()
	pool.Spec.BGPCommunities = []string{"64999:5"}
	if err := f.inf.Juneau().V1alpha1().AddressPools().Informer().GetIndexer().Update(pool); err != nil {
		t.Fatal(err)
	}
	f.client.ClearActions()
	f.syncKey("ns/e")
	got := f.bgpAdvertisements()["eip-ns-e"]
	if got == nil || !slices.Equal(got.Spec.Communities, []string{"64999:5"}) || got.Spec.NodeName != "node-a" || got.UID != ad.UID {
		t.Errorf("after the pool's change: %+v, want the same object with 64999:5", got)
	}
	if w := f.writes("bgpadvertisements"); len(w) != 1 || w[0] != "update" {
		t.Errorf("writes %v, want one update in place", w)
	}
	f.client.ClearActions()
	f.syncKey("ns/e")
	if w := f.writes("bgpadvertisements"); len(w) != 0 {
		t.Errorf("writes %v with nothing changed", w)
	}
}

// A direct user on a bgp network: the holding NIC's Node announces; while a deleting
// ElasticIP still has NICs naming it, the finalizer keeps the advertisement, and once
// they are gone it is deleted with the claim.
func TestBGPAdvertisementDirectAndDeletion(t *testing.T) {
	eip := elasticIP("web-eip", "uid-eip")
	eip.Status.Address = "10.225.53.7"
	nic := &v1alpha1.NetworkInterface{
		ObjectMeta: metav1.ObjectMeta{Name: "web.eth0", Namespace: "default", UID: "uid-nic", CreationTimestamp: metav1.NewTime(time.Now())},
		Spec: v1alpha1.NetworkInterfaceSpec{PodRef: v1alpha1.PodReference{Name: "web", UID: "uid-pod", Interface: "eth0"},
			NodeName: "node-b", ElasticIP: "web-eip"},
	}
	f := newFixture(t, append(bgpNetwork("10.225.53.0/24"), eip, claimFor("10.225.53.7", eip), nic))
	got := f.sync("default/web-eip")
	if got.Status.Phase != v1alpha1.ElasticIPAttached {
		t.Fatalf("phase %s, want Attached", got.Status.Phase)
	}
	ads := f.bgpAdvertisements()
	if ad := ads["eip-default-web-eip"]; ad == nil || ad.Spec.NodeName != "node-b" {
		t.Fatalf("BGPAdvertisements %v, want eip-default-web-eip on node-b", ads)
	}

	deleting := got.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	if err := f.inf.Juneau().V1alpha1().ElasticIPs().Informer().GetIndexer().Update(deleting); err != nil {
		t.Fatal(err)
	}
	f.syncKey("default/web-eip")
	if ads := f.bgpAdvertisements(); ads["eip-default-web-eip"] == nil {
		t.Errorf("the advertisement went while NetworkInterface web.eth0 may still carry the address")
	}
	if err := f.inf.Juneau().V1alpha1().NetworkInterfaces().Informer().GetIndexer().Delete(nic); err != nil {
		t.Fatal(err)
	}
	f.syncKey("default/web-eip")
	if ads := f.bgpAdvertisements(); len(ads) != 0 {
		t.Errorf("BGPAdvertisements %v after the deletion finished", keys(ads))
	}
}

// An ElasticIP deleted without its finalizer (forced) leaves no BGPAdvertisement.
func TestBGPAdvertisementOfGoneElasticIP(t *testing.T) {
	owner := advertisement.Owner{Namespace: "ns", Name: "gone", UID: "uid-gone"}
	ad := &v1alpha1.BGPAdvertisement{ObjectMeta: advertisement.Meta("eip-ns-gone", owner),
		Spec: v1alpha1.BGPAdvertisementSpec{ExternalNetwork: "ext-net", Address: "10.225.53.9", NodeName: "node-a"}}
	ad.UID = "ad-gone"
	f := newFixture(t, append(bgpNetwork("10.225.53.0/24"), ad))
	f.syncKey("ns/gone")
	if ads := f.bgpAdvertisements(); len(ads) != 0 {
		t.Errorf("BGPAdvertisements %v of a gone ElasticIP", keys(ads))
	}
}

func (f *fixture) writes(resource string) []string {
	var out []string
	for _, a := range f.client.Actions() {
		if a.GetResource().Resource == resource && a.GetVerb() != "list" && a.GetVerb() != "get" && a.GetVerb() != "watch" {
			out = append(out, a.GetVerb())
		}
	}
	return out
}

// The Attached condition of an ElasticIP on a bgp network is True only while its
// holder's Node announces the address to an Established peer; the phase stays Attached.
func TestAnnouncementBlocked(t *testing.T) {
	nat := HolderDecision{Holder: &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindElasticIPAttachment, Name: "nginx-eip-attach"},
		NodeName: "node-a", Reason: v1alpha1.ReasonAttached, Message: `used by ElasticIPAttachment "nginx-eip-attach"`}
	advert := func(node string, generation, observed int64, status metav1.ConditionStatus) *v1alpha1.BGPAdvertisement {
		ad := &v1alpha1.BGPAdvertisement{ObjectMeta: metav1.ObjectMeta{Name: "eip-default-x", Generation: generation},
			Spec: v1alpha1.BGPAdvertisementSpec{ExternalNetwork: "ext-net", Address: "10.225.53.5", NodeName: node}}
		if status != "" {
			reason, msg := v1alpha1.ReasonAnnounced, "announced to 1 of 1 BGP peers"
			if status != metav1.ConditionTrue {
				reason, msg = v1alpha1.ReasonNoEstablishedPeer, `no session is Established: "tor-a" is WrongASN`
			}
			ad.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionAnnounced, Status: status, Reason: reason, Message: msg,
				ObservedGeneration: observed}}
		}
		return ad
	}
	for _, tc := range []struct {
		name string
		d    HolderDecision
		ad   *v1alpha1.BGPAdvertisement
		says string // "" means not blocked
	}{
		{"announced", nat, advert("node-a", 2, 2, metav1.ConditionTrue), ""},
		{"no advertisement yet", nat, nil, `Node "node-a" does not announce "10.225.53.5" to BGP routers yet (no BGPAdvertisement names it)`},
		{"advertisement still on the old Node", nat, advert("node-b", 1, 1, metav1.ConditionTrue), "no BGPAdvertisement names it"},
		{"not reported yet", nat, advert("node-a", 1, 0, ""), `BGPAdvertisement "eip-default-x" has no Announced condition`},
		{"reported for an older generation", nat, advert("node-a", 3, 2, metav1.ConditionTrue), "has no Announced condition"},
		{"no Established peer", nat, advert("node-a", 1, 1, metav1.ConditionFalse),
			`does not announce "10.225.53.5" to any Established BGP peer (BGPAdvertisement "eip-default-x": NoEstablishedPeer: no session is Established: "tor-a" is WrongASN)`},
		{"unused", HolderDecision{Reason: v1alpha1.ReasonUnused}, nil, ""},
		{"conflict", HolderDecision{Holder: nat.Holder, Conflict: true, NodeName: "node-a"}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := announcementBlocked(tc.d, "10.225.53.5", tc.ad)
			switch {
			case tc.says == "" && got != nil:
				t.Fatalf("blocked: %+v", got)
			case tc.says == "":
				return
			case got == nil:
				t.Fatalf("not blocked, want %q", tc.says)
			case got.reason != v1alpha1.ReasonNotAnnounced || !strings.Contains(got.message, tc.says) || !strings.HasPrefix(got.message, tc.d.Message+"; "):
				t.Fatalf("%s: %q, want NotAnnounced saying %q after the holder's message", got.reason, got.message, tc.says)
			}
			eip := &v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "default"}}
			claim := &v1alpha1.AllocationClaim{ObjectMeta: metav1.ObjectMeta{Name: "10.225.53.5"}}
			st := desiredStatus(statusInput{eip: eip, alloc: allocation{claim: claim}, decision: tc.d, blocked: got})
			at := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAttached)
			if st.Phase != v1alpha1.ElasticIPAttached || st.Attachment == nil || at.Status != metav1.ConditionFalse || at.Reason != v1alpha1.ReasonNotAnnounced {
				t.Errorf("status %s %v, Attached %s/%s; want phase Attached with its user, Attached False/NotAnnounced", st.Phase, st.Attachment, at.Status, at.Reason)
			}
		})
	}
}

// Through sync: Attached turns True once the agent reports the advertisement Announced.
func TestAttachedFollowsAnnounced(t *testing.T) {
	used := usedElasticIP("default", "e", "uid-1", "10.225.53.5", "node-a")
	// The attachment's target exists, on node-a with a Pod IP: only the announcement
	// is missing.
	used[2].(*v1alpha1.ElasticIPAttachment).Spec.TargetRef.NetworkInterfaceName = "e.eth0"
	used = append(used, &v1alpha1.NetworkInterface{ObjectMeta: metav1.ObjectMeta{Name: "e.eth0", Namespace: "default"},
		Spec: v1alpha1.NetworkInterfaceSpec{NodeName: "node-a"}, Status: v1alpha1.NetworkInterfaceStatus{Address: "10.244.1.5"}})
	f := newFixture(t, append(bgpNetwork("10.225.53.0/24"), used...))
	got := f.sync("default/e")
	if at := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionAttached); got.Status.Phase != v1alpha1.ElasticIPAttached ||
		at == nil || at.Status != metav1.ConditionFalse || at.Reason != v1alpha1.ReasonNotAnnounced {
		t.Fatalf("before any announcement: %s %+v, want Attached with Attached=False/NotAnnounced", got.Status.Phase, at)
	}
	ad := f.bgpAdvertisements()["eip-default-e"].DeepCopy()
	ad.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionAnnounced, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAnnounced,
		Message: "announced to 1 of 1 BGP peers", ObservedGeneration: ad.Generation, LastTransitionTime: metav1.Now()}}
	if err := f.inf.Juneau().V1alpha1().BGPAdvertisements().Informer().GetIndexer().Update(ad); err != nil {
		t.Fatal(err)
	}
	if err := f.inf.Juneau().V1alpha1().ElasticIPs().Informer().GetIndexer().Update(got); err != nil {
		t.Fatal(err)
	}
	got = f.sync("default/e")
	if at := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionAttached); at == nil || at.Status != metav1.ConditionTrue || at.Reason != v1alpha1.ReasonAttached {
		t.Errorf("once announced: Attached %+v, want True/Attached", at)
	}
}
