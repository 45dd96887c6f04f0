package elasticip

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/holder"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// usedElasticIP is an ElasticIP of namespace ns holding addr, used by an attachment on
// node: everything its advertisement is made from.
func usedElasticIP(ns, name string, uid types.UID, addr, node string) []runtime.Object {
	eip := elasticIP(name, uid)
	eip.Namespace = ns
	eip.Status.Address = addr
	a := &v1alpha1.ElasticIPAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-att", Namespace: ns, UID: uid + "-att"},
		Spec:       v1alpha1.ElasticIPAttachmentSpec{ElasticIPRef: v1alpha1.ElasticIPReference{Name: name}},
		Status:     v1alpha1.ElasticIPAttachmentStatus{NodeName: node},
	}
	return []runtime.Object{eip, claimFor(addr, eip), a}
}

func (f *fixture) syncKey(key string) {
	f.t.Helper()
	_, ctx := ktesting.NewTestContext(f.t)
	if err := f.ctrl.sync(ctx, key); err != nil {
		f.t.Fatalf("sync %s: %v", key, err)
	}
}

// advertisements lists the advertisements in the API and feeds them to the cache, as
// the informer would.
func (f *fixture) advertisements() map[string]*v1alpha1.ARPAdvertisement {
	f.t.Helper()
	list, err := f.client.JuneauV1alpha1().ARPAdvertisements().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]*v1alpha1.ARPAdvertisement{}
	indexer := f.inf.Juneau().V1alpha1().ARPAdvertisements().Informer().GetIndexer()
	for i := range list.Items {
		ad := &list.Items[i]
		if ad.UID == "" {
			ad.UID = types.UID("ad-" + ad.Name) // the fake clientset sets none
		}
		if err := indexer.Update(ad); err != nil {
			f.t.Fatal(err)
		}
		out[ad.Name] = ad
	}
	return out
}

func (f *fixture) advertisementWrites() []string {
	var out []string
	for _, a := range f.client.Actions() {
		if a.GetResource().Resource == "arpadvertisements" && a.GetVerb() != "list" && a.GetVerb() != "get" && a.GetVerb() != "watch" {
			out = append(out, a.GetVerb())
		}
	}
	return out
}

// "a-b"/"c" and "a"/"b-c" share eip-a-b-c: the first gets it, the second a hashed
// name, and neither ever deletes or rewrites the other's (today's defect: they deleted
// each other's forever).
func TestAdvertisementsOfCollidingElasticIPs(t *testing.T) {
	objs := append(poolAndNetwork("10.225.51.0/24"), usedElasticIP("a-b", "c", "uid-ab", "10.225.51.5", "node-a")...)
	objs = append(objs, usedElasticIP("a", "b-c", "uid-a", "10.225.51.6", "node-b")...)
	f := newFixture(t, objs)

	f.syncKey("a-b/c")
	f.advertisements()
	f.syncKey("a/b-c")
	ads := f.advertisements()
	if len(ads) != 2 {
		t.Fatalf("advertisements %v, want two", keys(ads))
	}
	first, second := ads["eip-a-b-c"], ads[advertisement.HashedName("a", "b-c")]
	if first == nil || second == nil {
		t.Fatalf("advertisements %v, want eip-a-b-c and %s", keys(ads), advertisement.HashedName("a", "b-c"))
	}
	for _, c := range []struct {
		ad          *v1alpha1.ARPAdvertisement
		owner, addr string
		uid         string
		node        string
	}{{first, "a-b/c", "10.225.51.5", "uid-ab", "node-a"}, {second, "a/b-c", "10.225.51.6", "uid-a", "node-b"}} {
		if c.ad.Annotations[v1alpha1.AnnotationOwner] != c.owner || c.ad.Labels[v1alpha1.LabelOwnerUID] != c.uid ||
			c.ad.Spec.Address != c.addr || c.ad.Spec.NodeName != c.node {
			t.Errorf("advertisement %s: %+v %+v", c.ad.Name, c.ad.ObjectMeta, c.ad.Spec)
		}
	}
	f.client.ClearActions()
	for range 3 {
		f.syncKey("a-b/c")
		f.syncKey("a/b-c")
	}
	if w := f.advertisementWrites(); len(w) > 0 {
		t.Errorf("steady state wrote advertisements: %v", w)
	}
}

// A name longer than an object name allows gets the hashed form, and the ElasticIP's
// status is written (it stopped updating when the create failed).
func TestAdvertisementOfLongName(t *testing.T) {
	name := strings.Repeat("x", 250)
	f := newFixture(t, append(poolAndNetwork("10.225.51.0/24"), usedElasticIP("ns", name, "uid-1", "10.225.51.5", "node-a")...))
	f.syncKey("ns/" + name)
	ads := f.advertisements()
	want := advertisement.HashedName("ns", name)
	if ads[want] == nil || len(want) > advertisement.MaxNameLength {
		t.Fatalf("advertisements %v, want %s", keys(ads), want)
	}
	eip, err := f.client.JuneauV1alpha1().ElasticIPs("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil || eip.Status.Phase != v1alpha1.ElasticIPAttached {
		t.Errorf("status: %+v %v", eip.Status, err)
	}
}

// Another advertisement of the same address stands in the way: one whose ElasticIP is
// gone is deleted; one of a live ElasticIP is left alone.
func TestAdvertisementOneAnswerPerAddress(t *testing.T) {
	stale := func(owner advertisement.Owner) *v1alpha1.ARPAdvertisement {
		return &v1alpha1.ARPAdvertisement{ObjectMeta: advertisement.Meta("eip-old", owner),
			Spec: v1alpha1.ARPAdvertisementSpec{ExternalNetwork: "ext-net", Address: "10.225.51.5", NodeName: "node-b"}}
	}
	t.Run("orphan", func(t *testing.T) {
		orphan := stale(advertisement.Owner{Namespace: "ns", Name: "gone", UID: "uid-gone"})
		orphan.UID = "ad-old"
		f := newFixture(t, append(append(poolAndNetwork("10.225.51.0/24"), usedElasticIP("ns", "e", "uid-1", "10.225.51.5", "node-a")...), orphan))
		f.syncKey("ns/e")
		ads := f.advertisements()
		if ads["eip-old"] != nil || ads["eip-ns-e"] == nil || ads["eip-ns-e"].Spec.NodeName != "node-a" {
			t.Errorf("advertisements %v, want only eip-ns-e on node-a", keys(ads))
		}
	})
	t.Run("live owner", func(t *testing.T) {
		live := elasticIP("other", "uid-other")
		live.Namespace = "ns"
		other := stale(advertisement.Of(live))
		other.UID = "ad-old"
		f := newFixture(t, append(append(poolAndNetwork("10.225.51.0/24"), usedElasticIP("ns", "e", "uid-1", "10.225.51.5", "node-a")...), other, live))
		f.syncKey("ns/e")
		ads := f.advertisements()
		if ads["eip-old"] == nil || ads["eip-ns-e"] != nil {
			t.Errorf("advertisements %v: another live ElasticIP's advertisement must stay, and no second one appear", keys(ads))
		}
	})
}

// An advertisement written before owners carried their UID is adopted and relabelled,
// not deleted and made again.
func TestAdvertisementAdoptsUnlabelled(t *testing.T) {
	legacy := &v1alpha1.ARPAdvertisement{
		ObjectMeta: metav1.ObjectMeta{Name: "eip-ns-e", UID: "ad-1", Annotations: map[string]string{v1alpha1.AnnotationOwner: "ns/e"}},
		Spec:       v1alpha1.ARPAdvertisementSpec{ExternalNetwork: "ext-net", Address: "10.225.51.5", NodeName: "node-a"},
	}
	f := newFixture(t, append(append(poolAndNetwork("10.225.51.0/24"), usedElasticIP("ns", "e", "uid-1", "10.225.51.5", "node-a")...), legacy))
	f.syncKey("ns/e")
	if w := f.advertisementWrites(); len(w) != 1 || w[0] != "update" {
		t.Errorf("writes %v, want one update", w)
	}
	ad := f.advertisements()["eip-ns-e"]
	if ad == nil || ad.Labels[v1alpha1.LabelOwnerUID] != "uid-1" {
		t.Errorf("advertisement %+v, want the UID label", ad)
	}
}

// Rule 5 by UID: during the ElasticIP's deletion, a Pod re-created under the holder's
// name gets a new NIC of the same name; it is not the recorded holder, gets nothing, and
// the address is not advertised for it.
func TestDeletingElasticIPAndSameNamePod(t *testing.T) {
	eip := elasticIP("web-eip", "uid-eip")
	eip.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	eip.Status.Address = "10.225.51.5"
	eip.Status.Attachment = ptr(holder.Ref(v1alpha1.AttachmentKindNetworkInterface, "web.eth0", "uid-old-nic"))
	newNIC := &v1alpha1.NetworkInterface{
		ObjectMeta: metav1.ObjectMeta{Name: "web.eth0", Namespace: "default", UID: "uid-new-nic", CreationTimestamp: metav1.Now()},
		Spec: v1alpha1.NetworkInterfaceSpec{PodRef: v1alpha1.PodReference{Name: "web", UID: "uid-new-pod", Interface: "eth0"},
			NodeName: "node-b", ElasticIP: "web-eip"},
	}
	f := newFixture(t, append(poolAndNetwork("10.225.51.0/24"), eip, claimFor("10.225.51.5", eip), newNIC))
	got := f.sync("default/web-eip")
	if got.Status.Attachment != nil || got.Status.Phase != v1alpha1.ElasticIPAvailable {
		t.Errorf("status %s %+v, want Available with no user", got.Status.Phase, got.Status.Attachment)
	}
	if ads := f.advertisements(); len(ads) != 0 {
		t.Errorf("advertisements %v for a deleting ElasticIP nobody holds", keys(ads))
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
