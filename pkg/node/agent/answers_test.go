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

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/listdiff"
	"github.com/loutres/juneau/pkg/node/arp"
)

// checkingResponder keeps the addresses it is given, and checks each change it is
// told from the version it holds against the lists: they must agree outside its window.
type checkingResponder struct {
	addrs       []netip.Addr
	seen        uint64
	told, wrong int
}

func (r *checkingResponder) SetGratuitous([]netip.Addr) {}

func (r *checkingResponder) SetAddressesSince(addrs []netip.Addr, c listdiff.Change) {
	if c.From != 0 && c.From == r.seen {
		r.told++
		w := listdiff.Since(c, r.seen, r.addrs, addrs)
		if !slices.Equal(r.addrs[:w.Start], addrs[:w.Start]) || !slices.Equal(r.addrs[w.OldEnd:], addrs[w.NewEnd:]) {
			r.wrong++
		}
	}
	r.addrs, r.seen = append(r.addrs[:0], addrs...), c.To
}

// A sync patches the answers of the sync before (answerState) where the views changed:
// over random changes — attachments turning Ready or not, advertisements moved to
// another address (one with a mapping or none), deleted and made again, relabelled —
// and a change of the external subnets midway and back (answers computed whole), what
// each sync answers ARP for and marks is what Compute gives from the same caches with
// lists of its own, and saves for the next agent; each change told the responder and
// the saver holds the whole difference; most syncs patch; and a sync after one change
// allocates a small fraction of the lists' size.
func TestSyncPatchesAnswersAndAgrees(t *testing.T) {
	const n = 3000
	a, attachments, ads := steadyAgent(t, n)
	rec, saved := &checkingResponder{}, &checkingResponder{}
	a.arp = rec
	a.cfg.Answered = func(addrs []netip.Addr, c listdiff.Change) error {
		saved.SetAddressesSince(addrs, c)
		return nil
	}
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
	deleted := map[string]*v1alpha1.ARPAdvertisement{}
	changeAd := func() {
		name := "eip-default-e" + strconv.Itoa(rng.IntN(n))
		if ad, ok := deleted[name]; ok { // made again
			delete(deleted, name)
			if err := ads.Add(ad); err != nil {
				t.Fatal(err)
			}
			a.handler().OnAdd(ad, false)
			return
		}
		old, err := a.listers.Advertisements.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		cur := old.DeepCopy()
		switch rng.IntN(4) {
		case 0: // to the address of another, or of none
			cur.Spec.Address = netip.AddrFrom4([4]byte{10, 230, byte(rng.IntN(n) >> 8), byte(rng.IntN(256))}).String()
		case 1:
			cur.Spec.Address = "10.229.0." + strconv.Itoa(rng.IntN(256))
		case 2:
			cur.Labels = map[string]string{"changed": strconv.Itoa(rng.IntN(1000))}
		default:
			deleted[name] = cur
			if err := ads.Delete(old); err != nil {
				t.Fatal(err)
			}
			a.handler().OnDelete(old)
			return
		}
		if err := ads.Update(cur); err != nil {
			t.Fatal(err)
		}
		a.handler().OnUpdate(old, cur)
	}
	const syncs = 80
	for i := range syncs {
		for range 1 + rng.IntN(3) {
			if rng.IntN(2) == 0 {
				toggle()
			} else {
				changeAd()
			}
		}
		switch i {
		case syncs / 2: // its network and broadcast addresses are e0's and e255's
			a.cfg.ExternalSubnets = func() []netip.Prefix { return []netip.Prefix{netip.MustParsePrefix("10.230.0.0/24")} }
		case syncs/2 + 5:
			a.cfg.ExternalSubnets = nil
		}
		if err := a.sync(ctx); err != nil {
			t.Fatal(err)
		}
		in, err := a.Inputs() // Compute's own lists
		if err != nil {
			t.Fatal(err)
		}
		want := Compute(in)
		if got := rec.addrs; !slices.Equal(got, want.ARP) {
			t.Fatalf("sync %d: answering ARP for %d addresses, Compute says %d", i, len(got), len(want.ARP))
		}
		if got := saved.addrs; !slices.Equal(got, append(slices.Clone(want.ARP), want.NDP...)) {
			t.Fatalf("sync %d: %d addresses saved for the next agent, Compute answers %d", i, len(got), len(want.ARP)+len(want.NDP))
		}
		var marked []string
		for _, x := range a.answeringAds {
			marked = append(marked, x.ad.Name)
		}
		if !slices.Equal(marked, want.Answering()) {
			t.Fatalf("sync %d: the answered advertisements kept differ from Compute's", i)
		}
	}
	if rec.wrong > 0 || saved.wrong > 0 {
		t.Errorf("%d of %d changes told the responder and %d of %d told the saved list do not hold the difference", rec.wrong, rec.told, saved.wrong, saved.told)
	}
	if saved.told < syncs/2 {
		t.Errorf("%d of %d syncs told the saved list where it changed: the test exercises too little", saved.told, syncs)
	}
	// The first sync computes whole, and the two after the subnets changed.
	if a.answers.patched < syncs-3 || rec.told < syncs-3 {
		t.Errorf("%d of %d syncs patched the answers and %d told the responder the change: the test exercises too little", a.answers.patched, syncs, rec.told)
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
	for range 20 {
		toggle()
		if err := a.sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if perSync := (after.TotalAlloc - before.TotalAlloc) / 20; perSync > lists/4 {
		t.Errorf("a sync after one change allocated %d bytes, want under a quarter of the %d bytes of its lists of %d entries: they are made anew", perSync, lists, n)
	}
}

// saveAnswered patches the saved list (ARP addresses, then NDP) where the told changes
// of the two families say: over random edits of one family at a time, of both, and of
// neither, the saver always holds ARP then NDP, every save is told as a change that
// holds the whole difference (one address's change alone when one changed), but the
// first and the one where the NDP list was replaced whole (not told: saved whole); and
// nothing is saved when nothing changed.
func TestSaveAnsweredPatchesEachFamily(t *testing.T) {
	saved := &checkingResponder{}
	saves := 0
	var last listdiff.Change
	a := &Agent{}
	a.cfg.Answered = func(addrs []netip.Addr, c listdiff.Change) error {
		saves++
		last = c
		saved.SetAddressesSince(addrs, c)
		return nil
	}
	rng := rand.New(rand.NewPCG(3, 5))
	var lists [2][]netip.Addr
	var trackers [2]listdiff.Tracker
	addr := func(family int) netip.Addr {
		if family == 0 {
			return netip.AddrFrom4([4]byte{10, 230, byte(rng.IntN(256)), byte(rng.IntN(256))})
		}
		return netip.AddrFrom16([16]byte{0: 0xfd, 15: byte(rng.IntN(256)), 14: byte(rng.IntN(256))})
	}
	edit := func(family int) {
		l, tr := &lists[family], &trackers[family]
		if len(*l) > 0 && rng.IntN(3) == 0 {
			i := rng.IntN(len(*l))
			*l = slices.Delete(*l, i, i+1)
			tr.Remove(i)
			return
		}
		x := addr(family)
		i, found := slices.BinarySearchFunc(*l, x, netip.Addr.Compare)
		if !found {
			*l = slices.Insert(*l, i, x)
			tr.Insert(i)
		}
	}
	const steps = 200
	wantSaves := 0
	for step := range steps {
		switch {
		case step == steps/2: // the NDP list replaced whole
			lists[1] = []netip.Addr{addr(1)}
			trackers[1].Reset(1)
		default:
			switch rng.IntN(4) {
			case 0:
				edit(0)
			case 1:
				edit(1)
			case 2:
				edit(0)
				edit(1)
			}
		}
		last = listdiff.Change{}
		d := Desired{ARP: lists[0], NDP: lists[1], ARPChange: trackers[0].Mark(), NDPChange: trackers[1].Mark()}
		before := slices.Clone(saved.addrs)
		if err := a.saveAnswered(d); err != nil {
			t.Fatal(err)
		}
		want := append(slices.Clone(lists[0]), lists[1]...)
		if !slices.Equal(saved.addrs, want) {
			t.Fatalf("step %d: saved %v, want %v", step, saved.addrs, want)
		}
		if step == 0 || !slices.Equal(before, want) || step == steps/2 {
			wantSaves++
		}
		// One address added or removed: the told window holds it alone.
		if last.From != 0 && len(want)-len(before) == 1 && (last.OldEnd != last.Start || last.NewEnd != last.Start+1) ||
			last.From != 0 && len(before)-len(want) == 1 && (last.OldEnd != last.Start+1 || last.NewEnd != last.Start) {
			t.Errorf("step %d: one address changed, the saver was told %+v", step, last.Window)
		}
	}
	if saved.wrong > 0 {
		t.Errorf("%d of %d told changes do not hold the difference", saved.wrong, saved.told)
	}
	// Told: every save but the first and the one after the NDP list was replaced.
	if saved.told != saves-2 {
		t.Errorf("%d of %d saves were told as a change, want %d", saved.told, saves, saves-2)
	}
	if saves > wantSaves {
		t.Errorf("%d saves for %d changes of the list", saves, wantSaves)
	}
}
