package workloop

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
)

// call is one sync as the loop made it: when (on the fake clock) and whether full.
type call struct {
	at   time.Time
	full bool
}

// singleFixture runs a Single on a fake clock; its sync records every call and fails
// while failing is set.
type singleFixture struct {
	t     *testing.T
	clock *clocktesting.FakeClock
	t0    time.Time
	loop  *Single
	calls chan call
	fail  chan bool          // the result of the next calls: true fails
	took  chan time.Duration // how long the next calls take on the fake clock
	// waited: how much of it the next calls report waiting for another process
	waited chan time.Duration
}

const (
	minInterval = 100 * time.Millisecond
	resync      = 10 * time.Second
	retryBase   = 400 * time.Millisecond
)

func newSingleFixture(t *testing.T, reg prometheus.Registerer) *singleFixture {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := &singleFixture{t: t, clock: clocktesting.NewFakeClock(t0), t0: t0, calls: make(chan call, 100), fail: make(chan bool, 100),
		took: make(chan time.Duration, 100), waited: make(chan time.Duration, 100)}
	var metrics workqueue.MetricsProvider
	if reg != nil {
		m, err := NewQueueMetrics(reg)
		if err != nil {
			t.Fatal(err)
		}
		metrics = m
	}
	f.loop = NewSingle("single-test", func(_ context.Context, full bool) error {
		// The outcome is decided before the test hears of the call, so a failure the test
		// asks for after it is meant for the next call.
		var err error
		select {
		case failing := <-f.fail:
			if failing {
				err = errors.New("injected failure")
			}
		default:
		}
		at := f.clock.Now()
		select {
		case d := <-f.took:
			f.clock.Step(d)
		default:
		}
		select {
		case d := <-f.waited:
			f.loop.Waited(d)
		default:
		}
		f.calls <- call{at: at, full: full}
		return err
	}, SingleConfig{MinInterval: minInterval, Resync: resync, RetryBase: retryBase, RetryMax: time.Minute, Clock: f.clock, Metrics: metrics})
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.loop.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return f
}

// next waits for the next sync, moving the fake clock on by step each time the loop
// stays quiet for a while (the loop may not have scheduled its wait when the clock
// moves, so one step may not be enough); it fails after a generous real-time budget.
func (f *singleFixture) next(step time.Duration) call {
	f.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case c := <-f.calls:
			return c
		case <-deadline:
			f.t.Fatalf("no sync by %v on the fake clock", f.clock.Now().Sub(f.t0))
		case <-time.After(50 * time.Millisecond):
			if step > 0 {
				f.clock.Step(step)
			}
		}
	}
}

// TestSingleRun walks the loop through its rules: a full sync at start, triggers
// coalesced into one sync no sooner than the minimum interval, a full sync every resync
// period without any trigger, and a failed sync retried with back-off as a full one.
func TestSingleRun(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newSingleFixture(t, reg)

	first := f.next(0)
	if !first.full || !first.at.Equal(f.t0) {
		t.Fatalf("first sync %+v, want a full one at once", first)
	}

	// A burst of triggers right after a sync: one sync, not before the minimum interval.
	for range 50 {
		f.loop.Trigger()
	}
	second := f.next(minInterval)
	if second.full || second.at.Sub(first.at) < minInterval {
		t.Fatalf("sync after the triggers %+v (%v after the first), want a partial one at least %v later",
			second, second.at.Sub(first.at), minInterval)
	}

	// Without triggers, the next sync is the periodic full one: the burst cost one sync.
	third := f.next(time.Second)
	if !third.full || third.at.Sub(first.at) < resync {
		t.Fatalf("sync %+v (%v after the first full one), want the periodic full sync after %v",
			third, third.at.Sub(first.at), resync)
	}

	// A failure: retried after the back-off, and the retry is full.
	f.fail <- true
	f.loop.Trigger()
	failed := f.next(minInterval)
	retry := f.next(minInterval)
	if !retry.full || retry.at.Sub(failed.at) < retryBase {
		t.Fatalf("retry %+v (%v after the failure), want a full sync at least %v later",
			retry, retry.at.Sub(failed.at), retryBase)
	}

	// The queue reports on the registry it was given.
	if got := counterValue(t, reg, "juneau_workqueue_adds_total", "single-test"); got < 4 {
		t.Errorf("juneau_workqueue_adds_total{name=single-test} = %v, want the adds of the syncs", got)
	}
}

// TestSingleGapFollowsSyncDuration: after a sync that took longer than half the
// minimum interval, the next one waits twice its duration from its start, so that a
// loop of long syncs spends at most half its time syncing; never more than the maximum
// interval; after a short sync, the minimum interval alone holds. What the sync spent
// waiting for another process (Waited) does not count.
func TestSingleGapFollowsSyncDuration(t *testing.T) {
	f := newSingleFixture(t, nil)
	f.next(0) // the first, full sync
	for _, c := range []struct {
		took, waited, want time.Duration
	}{
		{300 * time.Millisecond, 0, 600 * time.Millisecond},
		{5 * time.Second, 0, time.Second}, // MaxInterval: at once after it, not 10s after its start
		{minInterval / 10, 0, minInterval},
		// 100ms of its own work: 200ms, so at once after it (800ms without Waited)
		{400 * time.Millisecond, 300 * time.Millisecond, 200 * time.Millisecond},
		{400 * time.Millisecond, 400 * time.Millisecond, minInterval}, // all of it another process's
	} {
		f.took <- c.took
		f.waited <- c.waited
		f.loop.Trigger()
		long := f.next(minInterval)
		f.loop.Trigger()
		after := f.next(minInterval / 10)
		// Between starts: the gap, or the sync itself when it took longer.
		want := max(c.want, c.took)
		if gap := after.at.Sub(long.at); gap < want || gap > want+minInterval {
			t.Errorf("the sync after one of %v (%v waiting) started %v after its start, want %v", c.took, c.waited, gap, want)
		}
	}
}

// A Trigger before Run is dropped without harm: Run starts with one full sync anyway,
// and a Trigger after that brings one more, not a full one.
func TestSingleTriggerBeforeRunIsHarmless(t *testing.T) {
	calls := make(chan bool, 10)
	s := NewSingle("idle", func(_ context.Context, full bool) error {
		calls <- full
		return nil
	}, SingleConfig{Resync: time.Hour})
	s.Trigger() // no queue yet: nothing happens
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	next := func() bool {
		t.Helper()
		select {
		case full := <-calls:
			return full
		case <-time.After(30 * time.Second):
			t.Fatal("no sync")
			return false
		}
	}
	if !next() {
		t.Error("the first sync is not full")
	}
	s.Trigger()
	if next() {
		t.Error("a triggered sync after the first is full")
	}
	if n := len(calls); n != 0 {
		t.Errorf("%d syncs more than the two asked for", n)
	}
}

// counterValue reads one labelled counter from a registry.
func counterValue(t *testing.T, reg *prometheus.Registry, name, queue string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabel(m, "name", queue) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// A conflict or a NotFound (a cache that lags) is no error at first; it is once it keeps
// coming back; any other failure is one at once.
func TestTransient(t *testing.T) {
	gr := schema.GroupResource{Group: "juneau.loutres.me", Resource: "arpadvertisements"}
	conflict := fmt.Errorf("writing Answering: %w", apierrors.NewConflict(gr, "eip-a", errors.New("modified")))
	notFound := fmt.Errorf("writing Answering: %w", apierrors.NewNotFound(gr, "eip-a"))
	other := errors.New("programming NAT: netlink: operation not permitted")
	for _, tc := range []struct {
		err     error
		retries int
		want    bool
	}{
		{conflict, 0, true}, {notFound, 0, true}, {notFound, TransientRetries - 1, true},
		{notFound, TransientRetries, false}, {conflict, TransientRetries + 5, false},
		{other, 0, false}, {apierrors.NewForbidden(gr, "eip-a", errors.New("no")), 0, false},
	} {
		if got := Transient(tc.err, tc.retries); got != tc.want {
			t.Errorf("Transient(%v, %d) = %v, want %v", tc.err, tc.retries, got, tc.want)
		}
	}
}

// A sync that fails because the loop is being stopped is not a failure worth an error
// line; one that fails for its own reason while the loop runs, or with an unrelated
// error while it stops, is.
func TestStopping(t *testing.T) {
	running := context.Background()
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"canceled while stopping", stopped, fmt.Errorf("programming NAT: %w", context.Canceled), true},
		{"canceled while running", running, fmt.Errorf("programming NAT: %w", context.Canceled), false},
		{"another error while stopping", stopped, errors.New("netlink: no such device"), false},
	} {
		if got := stopping(tc.ctx, tc.err); got != tc.want {
			t.Errorf("%s: stopping = %v, want %v", tc.name, got, tc.want)
		}
	}
}
