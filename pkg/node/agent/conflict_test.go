package agent

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned/fake"
	listers "github.com/loutres/juneau/pkg/generated/listers/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/listdiff"
	"github.com/loutres/juneau/pkg/node/nft"
)

// checkingNAT validates like the NAT programmer and programs nothing.
type checkingNAT struct{}

func (checkingNAT) Sync(_ context.Context, d nft.DesiredState) error {
	_, err := nft.Check(d)
	return err
}

func (checkingNAT) Invalidate() {}

type recordingARP struct {
	mu    sync.Mutex
	addrs []netip.Addr
}

func (r *recordingARP) SetGratuitous([]netip.Addr) {}

func (r *recordingARP) SetAddressesSince(a []netip.Addr, _ listdiff.Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addrs = slices.Clone(a)
}

// syncFixture keeps the advertisements in the API and in the informer cache, and the
// attachments in the cache, and returns the fake client and the listers of an agent
// on a Node with no Node objects cached.
func syncFixture(t *testing.T, ctx context.Context, ads []*v1alpha1.ARPAdvertisement, attachments ...*v1alpha1.ElasticIPAttachment) (*fake.Clientset, Listers) {
	t.Helper()
	adCache := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	attachmentCache := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	client := fake.NewClientset()
	for _, ad := range ads {
		if err := adCache.Add(ad); err != nil {
			t.Fatal(err)
		}
		if _, err := client.JuneauV1alpha1().ARPAdvertisements().Create(ctx, ad, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range attachments {
		if err := attachmentCache.Add(a); err != nil {
			t.Fatal(err)
		}
	}
	return client, Listers{
		Attachments:    listers.NewElasticIPAttachmentLister(attachmentCache),
		Advertisements: listers.NewARPAdvertisementLister(adCache),
		Nodes:          corelisters.NewNodeLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
	}
}

// TestConflictingMappingHoldsUpNothing: one ElasticIP attached on this Node to two Pods
// (a transient state the controllers may show during a handover) is neither translated
// nor answered, and does not keep the agent from answering ARP for, and marking, every
// other address; the sync still reports the conflict.
func TestConflictingMappingHoldsUpNothing(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	adObjects := []*v1alpha1.ARPAdvertisement{
		{ObjectMeta: metav1.ObjectMeta{Name: "eip-default-ok"}, Spec: v1alpha1.ARPAdvertisementSpec{Address: "10.225.51.5", NodeName: "node-a"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "eip-default-twice"}, Spec: v1alpha1.ARPAdvertisementSpec{Address: "10.225.51.6", NodeName: "node-a"}},
	}
	client, ls := syncFixture(t, ctx, adObjects,
		attachment("ok", "node-a", "10.225.51.5", "10.244.1.5", v1alpha1.AttachmentAttached, true),
		attachment("first", "node-a", "10.225.51.6", "10.244.1.6", v1alpha1.AttachmentAttached, true),
		attachment("second", "node-a", "10.225.51.6", "10.244.1.7", v1alpha1.AttachmentAttached, true),
	)
	arp := &recordingARP{}
	a := New(Config{NodeName: "node-a", ExternalInterface: "ext0"}, Clients{Juneau: client}, ls, checkingNAT{}, arp, &recordingARP{}, nil, nil)

	err := a.sync(ctx)
	if !errors.Is(err, nft.ErrInvalidMapping) {
		t.Fatalf("sync: %v, want the conflict reported", err)
	}
	if want := []netip.Addr{netip.MustParseAddr("10.225.51.5")}; !slices.Equal(arp.addrs, want) {
		t.Errorf("answering ARP for %v, want %v", arp.addrs, want)
	}
	for _, ad := range adObjects {
		got, err := client.JuneauV1alpha1().ARPAdvertisements().Get(ctx, ad.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		answering := meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionAnswering)
		if want := ad.Name == "eip-default-ok"; answering != want {
			t.Errorf("ARPAdvertisement %s: Answering=%v, want %v", ad.Name, answering, want)
		}
	}
}
