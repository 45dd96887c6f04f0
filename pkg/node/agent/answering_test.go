package agent

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned/fake"
	listers "github.com/loutres/juneau/pkg/generated/listers/juneau/v1alpha1"
)

// TestAnsweringComparedWhereChanged: a sync after the first compares only the
// advertisements whose cached object changed, yet every condition stays right: one whose
// Answering condition another writer removed is marked again, the others are not written
// again; a sync whose write failed is followed by one that compares them all.
func TestAnsweringComparedWhereChanged(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	index := func() cache.Indexer { return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}) }
	adCache, attachments := index(), index()
	client := fake.NewClientset()
	for _, name := range []string{"a", "b"} {
		addr := map[string]string{"a": "10.225.51.5", "b": "10.225.51.6"}[name]
		ad := &v1alpha1.ARPAdvertisement{ObjectMeta: metav1.ObjectMeta{Name: "eip-default-" + name},
			Spec: v1alpha1.ARPAdvertisementSpec{Address: addr, NodeName: "node-a"}}
		if _, err := client.JuneauV1alpha1().ARPAdvertisements().Create(ctx, ad, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := adCache.Add(ad); err != nil {
			t.Fatal(err)
		}
		if err := attachments.Add(attachment(name, "node-a", addr, "10.244.1."+addr[len(addr)-1:], v1alpha1.AttachmentAttached, true)); err != nil {
			t.Fatal(err)
		}
	}
	a := New(Config{NodeName: "node-a", ExternalInterface: "ext0"}, Clients{Juneau: client}, Listers{
		Attachments:    listers.NewElasticIPAttachmentLister(attachments),
		Advertisements: listers.NewARPAdvertisementLister(adCache),
		Nodes:          corelisters.NewNodeLister(index()),
	}, nopNAT{}, &recordingARP{}, nil, nil, nil)
	a.views.enable() // as Watch does
	// cached brings the cache up to the API server, as the informer does.
	cached := func() {
		t.Helper()
		l, err := client.JuneauV1alpha1().ARPAdvertisements().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range l.Items {
			cur := &l.Items[i]
			old, _, _ := adCache.Get(cur)
			if equality.Semantic.DeepEqual(old, cur) {
				continue
			}
			if err := adCache.Update(cur); err != nil {
				t.Fatal(err)
			}
			a.handler().OnUpdate(old, cur)
		}
	}
	writes := func() int {
		n := 0
		for _, act := range client.Actions() {
			if act.GetVerb() == "patch" && act.GetSubresource() == "status" {
				n++
			}
		}
		client.ClearActions()
		return n
	}
	answering := func(name string) bool {
		ad, err := client.JuneauV1alpha1().ARPAdvertisements().Get(ctx, "eip-default-"+name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return meta.IsStatusConditionTrue(ad.Status.Conditions, v1alpha1.ConditionAnswering)
	}
	sync := func() error {
		t.Helper()
		err := a.syncOnce(ctx, false)
		cached()
		return err
	}

	if err := sync(); err != nil || writes() != 2 || !answering("a") || !answering("b") {
		t.Fatalf("first sync: %v, a %v, b %v", err, answering("a"), answering("b"))
	}
	if err := sync(); err != nil || writes() != 0 {
		t.Fatalf("a sync with every condition right wrote: %v", err)
	}

	// Another writer removes a's condition: the next sync writes it, and only it.
	ad, err := client.JuneauV1alpha1().ARPAdvertisements().Get(ctx, "eip-default-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ad.Status.Conditions = nil
	if _, err := client.JuneauV1alpha1().ARPAdvertisements().UpdateStatus(ctx, ad, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cached()
	client.ClearActions()
	if err := sync(); err != nil || writes() != 1 || !answering("a") {
		t.Fatalf("after a's condition was removed: %v, a answering %v", err, answering("a"))
	}
	if !a.allMarked {
		t.Fatal("a sync that wrote every condition right does not say so")
	}
	// A sync that stops short of marking (it failed) leaves the next to compare them all.
	a.allMarked = false
	if err := sync(); err != nil || writes() != 0 || !a.allMarked {
		t.Fatalf("comparing them all: %v, all marked %v", err, a.allMarked)
	}
}
