package agent

import (
	"context"
	"net/netip"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned/fake"
	listers "github.com/loutres/juneau/pkg/generated/listers/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/node/arp"
	"github.com/loutres/juneau/pkg/node/ndp"
	"github.com/loutres/juneau/pkg/node/nft"
)

// nopNAT programs nothing and accepts everything.
type nopNAT struct{}

func (nopNAT) Sync(context.Context, nft.DesiredState) error { return nil }
func (nopNAT) Invalidate()                                  {}

// steadyAgent is an agent on node-0 whose caches hold n ElasticIPs, each Attached by an
// ElasticIPAttachment on this Node and advertised here by ARP, every Answering
// condition already written: the Node of bench row 9 (docs/performance.md#scale) once
// it has caught up. The NAT programmer is left out (its own rows measure it); the ARP
// and NDP responders are the real ones, not running (no socket, no kernel path).
func steadyAgent(tb testing.TB, n int) (a *Agent, attachments, ads cache.Indexer) {
	tb.Helper()
	const mac = "02:00:00:00:00:01"
	index := func() cache.Indexer { return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}) }
	eips := index()
	ads, attachments = index(), index()
	add := func(c cache.Indexer, obj any) {
		if err := c.Add(obj); err != nil {
			tb.Fatal(err)
		}
	}
	answering := answeringConditions("ext0", mac)
	for i := range n {
		addr := netip.AddrFrom4([4]byte{10, byte(230 + i>>16), byte(i >> 8), byte(i)})
		eip := addr.String()
		name, uid := "e"+strconv.Itoa(i), types.UID("uid-"+strconv.Itoa(i))
		att := attachment(name, "node-0", eip,
			netip.AddrFrom4([4]byte{10, byte(236 + i>>16), byte(i >> 8), byte(i)}).String(), v1alpha1.AttachmentAttached, true)
		att.Spec.ElasticIPRef.Name = name
		add(attachments, att)
		add(eips, &v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: uid},
			Status: v1alpha1.ElasticIPStatus{Address: eip, Phase: v1alpha1.ElasticIPAttached,
				Attachment: &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindElasticIPAttachment, Name: name}}})
		cond := answering(addr, 1)
		cond.LastTransitionTime = metav1.Now()
		add(ads, &v1alpha1.ARPAdvertisement{
			ObjectMeta: metav1.ObjectMeta{Name: "eip-default-" + name, Generation: 1,
				Annotations: map[string]string{v1alpha1.AnnotationOwner: "default/" + name},
				Labels:      map[string]string{v1alpha1.LabelOwnerUID: string(uid)}},
			Spec:   v1alpha1.ARPAdvertisementSpec{Address: eip, NodeName: "node-0", ExternalNetwork: "external"},
			Status: v1alpha1.ARPAdvertisementStatus{Conditions: []metav1.Condition{cond}},
		})
	}
	a = New(Config{NodeName: "node-0", ExternalInterface: "ext0", ExternalMAC: mac},
		Clients{Juneau: fake.NewClientset()},
		Listers{
			Attachments:    listers.NewElasticIPAttachmentLister(attachments),
			Advertisements: listers.NewARPAdvertisementLister(ads),
			Nodes:          corelisters.NewNodeLister(index()),
			ElasticIPs:     listers.NewElasticIPLister(eips),
			Networks:       listers.NewExternalNetworkLister(index()),
		}, nopNAT{}, arp.NewResponder("ext0"), ndp.NewResponder("ext0"), nil, nil)
	a.views.enable() // as Watch does: the caches' changes are told to a.views
	return a, attachments, ads
}

// BenchmarkSyncSteady100k: one sync of the agent of a Node holding 100,000 mappings
// answered by ARP when nothing needs writing: what any one change costs this Node on
// top of its own work (docs/performance.md#scale).
func BenchmarkSyncSteady100k(b *testing.B) {
	a, _, _ := steadyAgent(b, 100000)
	ctx := klog.NewContext(context.Background(), klog.Background().V(1))
	if err := a.sync(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := a.sync(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if n, _ := a.Serving(); n != 100000 {
		b.Fatalf("answering for %d advertisements, want 100000", n)
	}
}

// BenchmarkSyncOneChange100k: one sync of that agent after one change, told by its
// informer's event: the next attachment on this Node (e0, e1, ... in turn; each one
// back after 100,000) turning Ready or not, so that its mapping and its ARP answer come
// or go. Its mapping is among the first of the sorted lists: the most a removal moves
// in them. The NAT programmer is left out.
func BenchmarkSyncOneChange100k(b *testing.B) {
	const n = 100000
	a, attachments, _ := steadyAgent(b, n)
	ctx := klog.NewContext(context.Background(), klog.Background().V(1))
	if err := a.sync(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		b.StopTimer()
		old, err := a.listers.Attachments.ElasticIPAttachments("default").Get("e" + strconv.Itoa(i%n))
		if err != nil {
			b.Fatal(err)
		}
		cur := old.DeepCopy()
		ready := metav1.ConditionFalse
		if cur.Status.Conditions[0].Status == ready {
			ready = metav1.ConditionTrue
		}
		cur.Status.Conditions[0].Status = ready
		if err := attachments.Update(cur); err != nil {
			b.Fatal(err)
		}
		a.handler().OnUpdate(old, cur)
		b.StartTimer()
		if err := a.sync(ctx); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
