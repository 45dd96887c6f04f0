package agent

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned/fake"
	listers "github.com/loutres/juneau/pkg/generated/listers/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/listdiff"
	"github.com/loutres/juneau/pkg/node/nft"
)

// fakeNAT records what the agent asks of the NAT programmer; a Sync fails while fail
// holds a true.
type fakeNAT struct {
	mu    sync.Mutex
	log   []string // "invalidate" and "sync"
	syncs chan nft.DesiredState
	fail  chan bool
}

func (n *fakeNAT) Sync(_ context.Context, d nft.DesiredState) error {
	// The outcome is decided before the test hears of the call, so a failure the test
	// asks for after it is meant for the next call.
	var err error
	select {
	case f := <-n.fail:
		if f {
			err = errors.New("injected netlink failure")
		}
	default:
	}
	n.mu.Lock()
	n.log = append(n.log, "sync")
	n.mu.Unlock()
	n.syncs <- d
	return err
}

func (n *fakeNAT) Invalidate() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.log = append(n.log, "invalidate")
}

// takeLog returns the calls since the last takeLog.
func (n *fakeNAT) takeLog() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.log
	n.log = nil
	return out
}

type fakeARP struct{}

func (fakeARP) SetAddressesSince([]netip.Addr, listdiff.Change) {}
func (fakeARP) SetGratuitous([]netip.Addr)                      {}

// TestRun drives the agent's loop on a fake clock: a full sync at start (the NAT
// programmer forgets what it applied, then syncs), an event-triggered sync of what the
// caches now hold, and a failed sync retried as a full one after the back-off.
func TestRun(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	attachments := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	nat := &fakeNAT{syncs: make(chan nft.DesiredState, 10), fail: make(chan bool, 10)}
	const minInterval = 100 * time.Millisecond
	a := New(Config{NodeName: "node-a", ExternalInterface: "ext0", Resync: time.Hour, MinInterval: minInterval, Clock: clk},
		Clients{Juneau: fake.NewClientset()},
		Listers{
			Attachments:    listers.NewElasticIPAttachmentLister(attachments),
			Advertisements: listers.NewARPAdvertisementLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
			Nodes:          corelisters.NewNodeLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
		}, nat, fakeARP{}, fakeARP{}, nil, nil)

	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	// next waits for the next NAT sync, moving the fake clock on while the loop is quiet.
	next := func() nft.DesiredState {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case d := <-nat.syncs:
				return d
			case <-deadline:
				t.Fatalf("no sync by %v on the fake clock; NAT calls %v", clk.Now().Sub(t0), nat.takeLog())
			case <-time.After(50 * time.Millisecond):
				clk.Step(minInterval)
			}
		}
	}

	if d := next(); len(d.Mappings) != 0 {
		t.Errorf("first sync mappings %v, want none", d.Mappings)
	}
	if log := nat.takeLog(); !slices.Equal(log, []string{"invalidate", "sync"}) {
		t.Errorf("first sync: %v, want a full one (invalidate, sync)", log)
	}

	// An event: the sync that follows programs what the caches now hold.
	if err := attachments.Add(attachment("a", "node-a", "10.225.51.5", "10.244.1.5", v1alpha1.AttachmentAttached, true)); err != nil {
		t.Fatal(err)
	}
	a.Trigger()
	want := nft.Mapping{ElasticIP: netip.MustParseAddr("10.225.51.5"), PodIP: netip.MustParseAddr("10.244.1.5")}
	if d := next(); !slices.Equal(d.Mappings, []nft.Mapping{want}) {
		t.Errorf("mappings after the event %v, want %v", d.Mappings, want)
	}
	if log := nat.takeLog(); !slices.Equal(log, []string{"sync"}) {
		t.Errorf("triggered sync: %v, want a plain sync", log)
	}

	// A failed sync: the NAT programmer forgets what it applied, and the retry is full.
	nat.fail <- true
	a.Trigger()
	next()
	next()
	if log := nat.takeLog(); !slices.Equal(log, []string{"sync", "invalidate", "invalidate", "sync"}) {
		t.Errorf("failure and retry: %v, want sync, invalidate (failed), then invalidate, sync (full retry)", log)
	}
}

// TestRepairDrift: a change another process made to the table makes the NAT
// programmer forget what it applied and brings a sync at once (the programmer then
// rebuilds the table), counted by reason.
func TestRepairDrift(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	nat := &fakeNAT{syncs: make(chan nft.DesiredState, 10), fail: make(chan bool, 10)}
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	const minInterval = 100 * time.Millisecond
	a := New(Config{NodeName: "node-a", ExternalInterface: "ext0", Resync: time.Hour, MinInterval: minInterval, Clock: clk},
		Clients{Juneau: fake.NewClientset()},
		Listers{
			Attachments:    listers.NewElasticIPAttachmentLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
			Advertisements: listers.NewARPAdvertisementLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
			Nodes:          corelisters.NewNodeLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
		}, nat, fakeARP{}, nil, nil, metrics)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	next := func() {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case <-nat.syncs:
				return
			case <-deadline:
				t.Fatalf("no sync; NAT calls %v", nat.takeLog())
			case <-time.After(50 * time.Millisecond):
				clk.Step(minInterval)
			}
		}
	}
	next()
	nat.takeLog()

	a.RepairDrift(ctx, nft.Drift{Processes: []string{"nft"}, Changes: 3})
	next()
	if log := nat.takeLog(); !slices.Equal(log, []string{"invalidate", "sync"}) {
		t.Errorf("after drift: %v, want invalidate, then sync", log)
	}
	a.RepairDrift(ctx, nft.Drift{Lost: true})
	next()
	got := map[string]float64{}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "juneau_node_drift_repairs_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	if want := map[string]float64{driftChanged: 1, driftLost: 1}; !maps.Equal(got, want) {
		t.Errorf("juneau_node_drift_repairs_total by reason: %v, want %v", got, want)
	}
}

// costlyNAT takes cost on the agent's clock to rebuild the table after Invalidate.
type costlyNAT struct {
	clk      *clocktesting.FakeClock
	cost     time.Duration
	invalid  bool
	rebuilds int
}

func (n *costlyNAT) Sync(context.Context, nft.DesiredState) error {
	if n.invalid {
		n.clk.Step(n.cost)
		n.invalid = false
		n.rebuilds++
	}
	return nil
}

func (n *costlyNAT) Invalidate() { n.invalid = true }

// costlyAgent is an agent with empty caches over nat, on clk.
func costlyAgent(clk *clocktesting.FakeClock, nat *costlyNAT) *Agent {
	index := func() cache.Indexer { return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}) }
	return New(Config{NodeName: "node-a", ExternalInterface: "ext0", Resync: time.Minute, Clock: clk},
		Clients{Juneau: fake.NewClientset()},
		Listers{
			Attachments:    listers.NewElasticIPAttachmentLister(index()),
			Advertisements: listers.NewARPAdvertisementLister(index()),
			Nodes:          corelisters.NewNodeLister(index()),
		}, nat, fakeARP{}, fakeARP{}, nil, nil)
}

// TestSlowSyncLogged: a sync of slowSync or more is logged with its kind; a faster one
// is not.
func TestSlowSyncLogged(t *testing.T) {
	for _, tc := range []struct {
		cost time.Duration
		want string // in the log; "" for no line
	}{
		{slowSync - time.Millisecond, ""},
		{2 * time.Second, `Slow datapath sync took="2s" full=true failed=false`},
	} {
		logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
		ctx := klog.NewContext(context.Background(), logger)
		clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		if err := costlyAgent(clk, &costlyNAT{clk: clk, cost: tc.cost}).syncOnce(ctx, true); err != nil {
			t.Fatal(err)
		}
		got := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
		if tc.want == "" && strings.Contains(got, "Slow datapath sync") || !strings.Contains(got, tc.want) {
			t.Errorf("a sync of %v logged:\n%s\nwant %q", tc.cost, got, tc.want)
		}
	}
}

// TestPeriodicRebuildBoundedByCost: a periodic full sync rebuilds the table only once
// a hundred times the last rebuild's duration has passed since it (every period for a
// cheap rebuild), while drift still rebuilds it at once (taking the datapath lock
// does too: TestStandbyAnswersARPOnly).
func TestPeriodicRebuildBoundedByCost(t *testing.T) {
	for _, tc := range []struct {
		name string
		cost time.Duration
		// rebuilt: whether each of ten periodic full syncs a minute apart rebuilds.
		rebuilt []bool
	}{
		{"10ms", 10 * time.Millisecond, []bool{true, true, true, true, true, true, true, true, true, true}},
		// 100 × 2 s = 200 s after a rebuild ends: the fourth periodic sync after it.
		{"2s", 2 * time.Second, []bool{false, false, false, true, false, false, false, true, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			clk := clocktesting.NewFakeClock(t0)
			nat := &costlyNAT{clk: clk, cost: tc.cost}
			a := costlyAgent(clk, nat)
			sync := func(full bool) bool {
				t.Helper()
				before := nat.rebuilds
				if err := a.syncOnce(ctx, full); err != nil {
					t.Fatal(err)
				}
				return nat.rebuilds > before
			}
			if !sync(true) {
				t.Fatal("the first sync did not rebuild the table")
			}
			for i, want := range tc.rebuilt {
				clk.Step(time.Minute)
				if got := sync(true); got != want {
					t.Errorf("periodic full sync %d (%v after the start): rebuilt %v, want %v", i+1, clk.Since(t0), got, want)
				}
				if sync(false) {
					t.Errorf("a triggered sync after periodic full sync %d rebuilt the table", i+1)
				}
			}
			a.RepairDrift(ctx, nft.Drift{Processes: []string{"nft"}, Changes: 1})
			if !sync(false) {
				t.Error("the sync after drift did not rebuild the table")
			}
		})
	}
}
