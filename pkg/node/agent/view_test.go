package agent

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	listers "github.com/loutres/juneau/pkg/generated/listers/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/listdiff"
	"github.com/loutres/juneau/pkg/node/nft"
)

// TestViewsAgreeWithCompute: after any sequence of adds, updates and deletes of
// attachments (of this Node and others, attached or not, colliding on addresses),
// advertisements and ElasticIPs (their limits), a sync's Compute over the views gives
// exactly what Compute derives from the caches' lists — patched a few keys at a time,
// past maxPatch (rebuilt), and rebuilt on demand; and each change of the mapping lists
// the views tell the NAT programmer holds the whole difference from the version before.
func TestViewsAgreeWithCompute(t *testing.T) {
	const node = "node-a"
	rng := rand.New(rand.NewPCG(1, 2))
	index := func() cache.Indexer { return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}) }
	atts, ads, eips := index(), index(), index()
	l := Listers{
		Attachments:    listers.NewElasticIPAttachmentLister(atts),
		Advertisements: listers.NewARPAdvertisementLister(ads),
		ElasticIPs:     listers.NewElasticIPLister(eips),
	}
	var v views
	v.enable()
	pick := func(options ...string) string { return options[rng.IntN(len(options))] }
	addr := func() string {
		return pick("10.225.51.5", "10.225.51.6", "10.225.51.7", "10.225.51.8", "fd00::5", "::ffff:10.225.51.5", "bogus", "fe80::1%eth0")
	}
	// put stores obj in c (or deletes it) and tells the views, as the informers do.
	put := func(c cache.Indexer, obj any, del bool) {
		var err error
		if del {
			err = c.Delete(obj)
			if rng.IntN(2) == 0 {
				key, _ := cache.MetaNamespaceKeyFunc(obj)
				obj = cache.DeletedFinalStateUnknown{Key: key, Obj: obj}
			}
		} else {
			err = c.Update(obj)
		}
		if err != nil {
			t.Fatal(err)
		}
		v.event(obj)
	}
	mutate := func() {
		name := fmt.Sprintf("e%d", rng.IntN(40))
		del := rng.IntN(8) == 0
		switch rng.IntN(3) {
		case 0:
			a := attachment(name, pick(node, "node-b", ""), addr(), pick("10.244.1.5", "10.244.1.6", "fd00:244::5"),
				[]v1alpha1.AttachmentPhase{v1alpha1.AttachmentAttached, v1alpha1.AttachmentPending}[rng.IntN(2)], rng.IntN(4) != 0)
			a.Spec.ElasticIPRef.Name = pick("e1", "e2", "e3", name)
			if rng.IntN(10) == 0 {
				a.DeletionTimestamp = &metav1.Time{}
			}
			put(atts, a, del)
		case 1:
			ad := &v1alpha1.ARPAdvertisement{ObjectMeta: metav1.ObjectMeta{Name: "eip-default-" + name},
				Spec: v1alpha1.ARPAdvertisementSpec{Address: addr(), NodeName: pick(node, "node-b"), ExternalNetwork: "external"}}
			if rng.IntN(10) == 0 {
				ad.DeletionTimestamp = &metav1.Time{}
			}
			put(ads, ad, del)
		default:
			e := &v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: pick("e1", "e2", "e3", name)}}
			if rng.IntN(2) == 0 {
				e.Spec.BandwidthMbps = ptr.To(int32(rng.IntN(3) * 100))
			}
			put(eips, e, del)
		}
	}
	busy, told, patched := 0, 0, 0
	// The lists of the version before, and its numbers: each change the views tell
	// must hold the whole difference from it (what the NAT programmer and its check
	// then take without comparing).
	var prevIn, prevOwn []nft.Mapping
	var prevAds, prevAnswered []answeredAd
	var seenIn, seenOwn, seenAds uint64
	var answers answerState
	for step := range 400 {
		n := 1 + rng.IntN(4)
		if step%50 == 49 {
			n = maxPatch + 10
		}
		for range n {
			mutate()
		}
		d, err := v.update(l, node, step%97 == 96)
		if err != nil {
			t.Fatal(err)
		}
		told += checkTold(t, step, "in-cluster mappings", d.inClusterChange, &seenIn, &prevIn, d.inCluster)
		told += checkTold(t, step, "own mappings", d.ownChange, &seenOwn, &prevOwn, d.own)
		checkTold(t, step, "advertisements", d.adsChange, &seenAds, &prevAds, d.ads)
		m := ElasticIPMap{}
		in := Inputs{NodeName: node, ExternalInterface: "ext0", ElasticIPs: m}
		for _, o := range atts.List() {
			in.Attachments = append(in.Attachments, o.(*v1alpha1.ElasticIPAttachment))
		}
		for _, o := range ads.List() {
			in.Advertisements = append(in.Advertisements, o.(*v1alpha1.ARPAdvertisement))
		}
		all, _ := l.ElasticIPs.List(labels.Everything())
		for _, e := range all {
			m[e.Namespace+"/"+e.Name] = e
		}
		want := Compute(in)
		in.derived = d
		got := Compute(in)
		if got.NAT.MappingsChange != d.ownChange || got.NAT.InClusterChange != d.inClusterChange {
			t.Fatalf("step %d: Compute did not hand the views' changes to the NAT programmer", step)
		}
		got.NAT.MappingsChange, got.NAT.InClusterChange = listdiff.Change{}, listdiff.Change{}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: Compute over the views differs from Compute over the lists:\n got %+v\nwant %+v", step, got, want)
		}
		// With the answers of the step before, patched where the views changed: the
		// same, and the window it tells holds the whole difference from them.
		in.answers = &answers
		before := answers.patched
		got = Compute(in)
		if w := got.answeredSince; w.Start > w.OldEnd || w.Start > w.NewEnd || w.NewEnd > len(got.answered) ||
			!slices.Equal(prevAnswered[:w.Start], got.answered[:w.Start]) || !slices.Equal(prevAnswered[w.OldEnd:], got.answered[w.NewEnd:]) ||
			!slices.Equal(prevAnswered[w.Start:w.OldEnd], got.answeredGone) {
			t.Fatalf("step %d: the answers' window %+v does not hold their difference %+v", step, w, listdiff.Of(prevAnswered, got.answered))
		}
		prevAnswered = slices.Clone(got.answered)
		patched += answers.patched - before
		got.NAT.MappingsChange, got.NAT.InClusterChange, got.ARPChange, got.NDPChange = listdiff.Change{}, listdiff.Change{}, listdiff.Change{}, listdiff.Change{}
		got.answeredSince, got.answeredGone, want.answeredSince, want.answeredGone = listdiff.Window{}, nil, listdiff.Window{}, nil
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: Compute patching the answers before differs from Compute over the lists:\n got %+v\nwant %+v", step, got, want)
		}
		if len(want.NAT.Mappings) > 0 && len(want.Answering()) > 0 {
			busy++
		}
	}
	if told < 600 {
		t.Errorf("only %d of 800 changes were told: the test exercises too little", told)
	}
	if patched < 20 { // most steps hold a conflict the programmer leaves out: computed whole
		t.Errorf("only %d of 400 steps patched the answers (TestSyncPatchesAnswersAndAgrees patches more): the test exercises too little", patched)
	}
	if busy < 150 {
		t.Errorf("only %d of 400 steps had a mapping and an answer: the test exercises too little", busy)
	}
}

// An update that leaves what the views derive as it was (a status write with a new
// message, a label) moves nothing: the lists the programmer is told about do not
// change (an empty window), and an advertisement that keeps its address keeps its
// place, its candidate the updated object.
func TestViewsKeepWhatAnUpdateLeavesAlone(t *testing.T) {
	const node = "node-a"
	index := func() cache.Indexer { return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}) }
	atts, ads := index(), index()
	l := Listers{Attachments: listers.NewElasticIPAttachmentLister(atts), Advertisements: listers.NewARPAdvertisementLister(ads)}
	var v views
	v.enable()
	for i := range 50 {
		name, eip := fmt.Sprintf("e%d", i), fmt.Sprintf("10.225.51.%d", 10+i)
		if err := atts.Add(attachment(name, node, eip, fmt.Sprintf("10.244.1.%d", 10+i), v1alpha1.AttachmentAttached, true)); err != nil {
			t.Fatal(err)
		}
		if err := ads.Add(&v1alpha1.ARPAdvertisement{ObjectMeta: metav1.ObjectMeta{Name: "eip-default-" + name},
			Spec: v1alpha1.ARPAdvertisementSpec{Address: eip, NodeName: node}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := v.update(l, node, false); err != nil {
		t.Fatal(err)
	}
	a := attachment("e20", node, "10.225.51.30", "10.244.1.30", v1alpha1.AttachmentAttached, true)
	a.Status.Conditions[0].Message = "written again"
	ad := &v1alpha1.ARPAdvertisement{ObjectMeta: metav1.ObjectMeta{Name: "eip-default-e20", Labels: map[string]string{"x": "y"}},
		Spec: v1alpha1.ARPAdvertisementSpec{Address: "10.225.51.30", NodeName: node}}
	for _, put := range []struct {
		c   cache.Indexer
		obj any
	}{{atts, a}, {ads, ad}} {
		if err := put.c.Update(put.obj); err != nil {
			t.Fatal(err)
		}
		v.event(put.obj)
	}
	before := slices.Clone(v.d.ads)
	d, err := v.update(l, node, false)
	if err != nil {
		t.Fatal(err)
	}
	if !d.ownChange.Empty() || !d.inClusterChange.Empty() || d.ownChange.From == 0 {
		t.Errorf("an attachment written with nothing changed told changes %+v and %+v, want none from the version before", d.ownChange, d.inClusterChange)
	}
	i := slices.IndexFunc(d.ads, func(c answeredAd) bool { return c.ad == ad })
	if len(d.ads) != len(before) || i != 20 || !slices.EqualFunc(d.ads, before, func(x, y answeredAd) bool { return x.addr == y.addr && x.ad.Name == y.ad.Name }) {
		t.Errorf("the advertisement written again is at %d of %d (want 20 of %d, the others unmoved)", i, len(d.ads), len(before))
	}
}

// checkTold checks that the change c the views tell of a list holds the whole
// difference from the version before (prev, seen), then keeps cur as it; it returns 1
// when c was a change from that version.
func checkTold[T comparable](t *testing.T, step int, what string, c listdiff.Change, seen *uint64, prev *[]T, cur []T) int {
	t.Helper()
	told := 0
	if c.From != 0 {
		if c.From != *seen {
			t.Fatalf("step %d: %s: a change from version %d, the last was %d", step, what, c.From, *seen)
		}
		if got := listdiff.Since(c, *seen, *prev, cur); got != c.Window ||
			!slices.Equal((*prev)[:got.Start], cur[:got.Start]) || !slices.Equal((*prev)[got.OldEnd:], cur[got.NewEnd:]) {
			t.Fatalf("step %d: %s: change %+v does not hold the difference %+v", step, what, c, listdiff.Of(*prev, cur))
		}
		told = 1
	}
	*seen, *prev = c.To, slices.Clone(cur)
	return told
}
