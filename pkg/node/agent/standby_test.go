package agent

import (
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/listdiff"
	"github.com/loutres/juneau/pkg/node/nft"
)

// TestStandbyAnswersARPOnly: while another agent of the Node holds the datapath lock
// (a rollout with maxSurge), a sync answers ARP from the caches and writes nothing
// else; once the lock is held, the next sync is full, writes the Answering condition
// and saves the answered addresses for the next agent.
func TestStandbyAnswersARPOnly(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ad := &v1alpha1.ARPAdvertisement{ObjectMeta: metav1.ObjectMeta{Name: "eip-default-web"},
		Spec: v1alpha1.ARPAdvertisementSpec{Address: "10.225.51.5", NodeName: "node-a"}}
	client, ls := syncFixture(t, ctx, []*v1alpha1.ARPAdvertisement{ad},
		attachment("web", "node-a", "10.225.51.5", "10.244.1.5", v1alpha1.AttachmentAttached, true))
	nat := &fakeNAT{syncs: make(chan nft.DesiredState, 10), fail: make(chan bool, 10)}
	arp := &recordingARP{}
	var held atomic.Bool
	var saved [][]netip.Addr
	synced := 0
	a := New(Config{NodeName: "node-a", ExternalInterface: "ext0",
		Holds: held.Load,
		Answered: func(addrs []netip.Addr, _ listdiff.Change) error {
			saved = append(saved, slices.Clone(addrs))
			return nil
		},
		Synced: func() { synced++ },
	}, Clients{Juneau: client}, ls, nat, arp, nil, nil, nil)

	want := []netip.Addr{netip.MustParseAddr("10.225.51.5")}
	answering := func() bool {
		got, err := client.JuneauV1alpha1().ARPAdvertisements().Get(ctx, ad.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionAnswering)
	}

	for range 2 {
		if err := a.syncOnce(ctx, false); err != nil {
			t.Fatalf("standby sync: %v", err)
		}
	}
	if log := nat.takeLog(); len(log) != 0 {
		t.Errorf("standing by, the agent used the NAT programmer: %v", log)
	}
	if !slices.Equal(arp.addrs, want) {
		t.Errorf("standing by, answering for %v, want %v", arp.addrs, want)
	}
	if answering() || len(saved) != 0 {
		t.Errorf("standing by, the agent wrote: Answering=%v, saved %v", answering(), saved)
	}
	if synced != 1 {
		t.Errorf("Synced called %d times, want once", synced)
	}

	held.Store(true)
	if err := a.syncOnce(ctx, false); err != nil {
		t.Fatalf("sync after the takeover: %v", err)
	}
	if log := nat.takeLog(); !slices.Equal(log, []string{"invalidate", "sync"}) {
		t.Errorf("first sync holding the lock: %v, want a full one", log)
	}
	if !answering() {
		t.Error("holding the lock, the agent did not write Answering")
	}
	if err := a.syncOnce(ctx, false); err != nil {
		t.Fatal(err)
	}
	if len(saved) != 1 || !slices.Equal(saved[0], want) {
		t.Errorf("saved %v, want %v once (only changes are saved)", saved, want)
	}
	if log := nat.takeLog(); !slices.Equal(log, []string{"sync"}) {
		t.Errorf("next sync: %v, want a plain one", log)
	}
	if synced != 1 {
		t.Errorf("Synced called %d times, want once", synced)
	}
}
