package agent

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/node/arp"
)

// A sync fills the lists the sync before it handed back (spareLists) instead of
// allocating: over random changes, what each sync answers for and marks is what
// Compute gives from the same caches with lists of its own, and a sync after one change
// allocates a small fraction of the lists' size.
func TestSyncReusesListsAndAgrees(t *testing.T) {
	const n = 3000
	a, attachments := steadyAgent(t, n)
	rec := &recordingARP{}
	a.arp = rec
	ctx := klog.NewContext(context.Background(), klog.Background())
	rng := rand.New(rand.NewPCG(7, 9))
	toggle := func() {
		name := "e" + strconv.Itoa(rng.IntN(n))
		old, err := a.listers.Attachments.ElasticIPAttachments("default").Get(name)
		if err != nil {
			t.Fatal(err)
		}
		cur := old.DeepCopy()
		if cur.Status.Conditions[0].Status == metav1.ConditionTrue {
			cur.Status.Conditions[0].Status = metav1.ConditionFalse
		} else {
			cur.Status.Conditions[0].Status = metav1.ConditionTrue
		}
		if err := attachments.Update(cur); err != nil {
			t.Fatal(err)
		}
		a.handler().OnUpdate(old, cur)
	}
	for i := range 60 {
		for range 1 + rng.IntN(3) {
			toggle()
		}
		if err := a.sync(ctx); err != nil {
			t.Fatal(err)
		}
		in, err := a.Inputs() // no spare lists: Compute's own
		if err != nil {
			t.Fatal(err)
		}
		want := Compute(in)
		if got := rec.addrs; !slices.Equal(got, want.ARP) {
			t.Fatalf("sync %d: answering ARP for %d addresses, Compute says %d", i, len(got), len(want.ARP))
		}
		var marked []string
		for _, x := range a.answeringAds {
			marked = append(marked, x.ad.Name)
		}
		if !slices.Equal(marked, want.Answering()) {
			t.Fatalf("sync %d: the answered advertisements kept differ from Compute's", i)
		}
		if i > 0 && (cap(a.spare.arp) < len(want.ARP) || cap(a.spare.answered) < len(want.ARP)) { // the first has no list before it
			t.Fatalf("sync %d: spare lists of %d and %d entries handed back, want room for %d", i, cap(a.spare.arp), cap(a.spare.answered), len(want.ARP))
		}
	}
	// The lists of n entries: ~200 KB a sync (answered advertisements and addresses).
	// The real responder from here on (the recording one copies each list it is given).
	a.arp = arp.NewResponder("ext0")
	toggle()
	if err := a.sync(ctx); err != nil {
		t.Fatal(err)
	}
	lists := uint64(n) * uint64(unsafe.Sizeof(answeredAd{})+unsafe.Sizeof(netip.Addr{}))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const syncs = 20
	for range syncs {
		toggle()
		if err := a.sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if perSync := (after.TotalAlloc - before.TotalAlloc) / syncs; perSync > lists/4 {
		t.Errorf("a sync after one change allocated %d bytes, want under a quarter of the %d bytes of its lists of %d entries: they are made anew", perSync, lists, n)
	}
}
