package pool

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned/fake"
	"github.com/loutres/juneau/pkg/generated/informers/externalversions"
	"github.com/loutres/juneau/pkg/workloop"
)

type fixture struct {
	t        *testing.T
	ctx      context.Context
	client   *fake.Clientset
	inf      Informers
	recorder *record.FakeRecorder
	registry *prometheus.Registry
	c        *Controller
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	f := &fixture{
		t: t, ctx: ctx,
		client:   fake.NewClientset(objs...),
		recorder: record.NewFakeRecorder(100),
		registry: prometheus.NewRegistry(),
	}
	factory := externalversions.NewSharedInformerFactory(f.client, 0)
	kubeFactory := kubeinformers.NewSharedInformerFactory(kubefake.NewClientset(), 0)
	f.inf = Informers{
		Pools:  factory.Juneau().V1alpha1().AddressPools(),
		Claims: factory.Juneau().V1alpha1().AllocationClaims(),
		Nodes:  kubeFactory.Core().V1().Nodes(),
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	c, err := NewController(f.client, f.inf, f.recorder, Options{Options: workloop.Options{Clock: clk}, Registerer: f.registry, CountInterval: -1})
	if err != nil {
		t.Fatalf("NewController: %v", err)
	}
	f.c = c
	f.refreshCache()
	return f
}

func (f *fixture) refreshCache() {
	f.t.Helper()
	pools, err := f.client.JuneauV1alpha1().AddressPools().List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	claims, err := f.client.JuneauV1alpha1().AllocationClaims().List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	var p, c []any
	for i := range pools.Items {
		p = append(p, &pools.Items[i])
	}
	for i := range claims.Items {
		c = append(c, &claims.Items[i])
	}
	if err := f.inf.Pools.Informer().GetIndexer().Replace(p, ""); err != nil {
		f.t.Fatal(err)
	}
	if err := f.inf.Claims.Informer().GetIndexer().Replace(c, ""); err != nil {
		f.t.Fatal(err)
	}
	// The caches were replaced without events: every pool is counted afresh, as its
	// add event does.
	f.c.counts = newCounts()
	for i := range pools.Items {
		f.c.counts.setPool(&pools.Items[i], f.c.allClaims)
	}
}

func (f *fixture) sync(name string) {
	f.t.Helper()
	f.client.ClearActions()
	if err := f.c.sync(f.ctx, name); err != nil {
		f.t.Fatalf("sync: %v", err)
	}
}

func (f *fixture) pool(name string) *v1alpha1.AddressPool {
	f.t.Helper()
	p, err := f.client.JuneauV1alpha1().AddressPools().Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestSyncPoolStatusAndMetrics(t *testing.T) {
	f := newFixture(t,
		testPool("blue", "10.225.51.0/29"),
		testPool("green", "10.225.52.1-10.225.52.3"),
		testClaim("10.225.51.1", "blue"), testClaim("10.225.51.2", "blue"),
		testClaim("10.225.52.1", "green"))

	f.sync("blue")
	f.sync("green")
	blue := f.pool("blue")
	if blue.Status.Total != 6 || blue.Status.Allocated != 2 || blue.Status.Available != 4 {
		t.Errorf("blue status %+v, want 6/2/4", blue.Status)
	}
	if c := meta.FindStatusCondition(blue.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("blue Ready %+v", c)
	}
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("a first Ready status emitted %v", ev)
	}

	f.refreshCache()
	want := map[string]float64{
		"juneau_address_pool_addresses/blue":           6,
		"juneau_address_pool_addresses/green":          3,
		"juneau_address_pool_allocated_addresses/blue": 2,
		"juneau_address_pool_available_addresses/blue": 4,
	}
	got := gather(t, f.registry)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("metric %s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}

	// Unchanged: no write.
	f.sync("blue")
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "patch" {
			t.Errorf("idempotent sync patched %s", a.GetResource().Resource)
		}
	}

	// A claim goes away: the count follows.
	if err := f.client.JuneauV1alpha1().AllocationClaims().Delete(f.ctx, "10.225.51.1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.refreshCache()
	f.sync("blue")
	if got := f.pool("blue").Status; got.Allocated != 1 || got.Available != 5 {
		t.Errorf("after release %+v, want 1 allocated, 5 available", got)
	}
}

func TestSyncReportsNodeAddressInPool(t *testing.T) {
	f := newFixture(t, testPool("blue", "10.225.51.0/24"))
	f.sync("blue")
	f.refreshCache()

	node := testNode("node-a", internal("10.225.51.2"))
	if err := f.inf.Nodes.Informer().GetIndexer().Add(node); err != nil {
		t.Fatal(err)
	}
	f.sync("blue")
	c := meta.FindStatusCondition(f.pool("blue").Status.Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonNodeAddressInPool ||
		!strings.Contains(c.Message, `10.225.51.2 of Node "node-a"`) {
		t.Fatalf("Ready %+v, want False naming node-a", c)
	}
	if ev := f.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+v1alpha1.ReasonNodeAddressInPool) {
		t.Errorf("events %v, want one Warning", ev)
	}

	// The Node moves out of the pool.
	f.refreshCache()
	if err := f.inf.Nodes.Informer().GetIndexer().Update(testNode("node-a", internal("10.225.50.2"))); err != nil {
		t.Fatal(err)
	}
	f.sync("blue")
	if ev := f.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Normal "+v1alpha1.ReasonReady) {
		t.Errorf("events %v, want one Normal Ready", ev)
	}
}

func TestHandlersQueueTheRightPools(t *testing.T) {
	f := newFixture(t, testPool("blue", "10.225.51.0/24"), testPool("green", "10.225.52.0/24"))

	f.c.claimHandler().OnAdd(testClaim("10.225.51.1", "blue"), false)
	if f.c.Loop.Len() != 1 {
		t.Errorf("claim event queued %d pools, want 1", f.c.Loop.Len())
	}

	h := f.c.nodeHandler()
	old := testNode("node-a", internal("10.225.50.2"))
	heartbeat := old.DeepCopy()
	heartbeat.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	h.OnUpdate(old, heartbeat)
	if f.c.Loop.Len() != 1 {
		t.Errorf("a Node update without address change queued pools (%d keys)", f.c.Loop.Len())
	}
	h.OnUpdate(old, testNode("node-a", internal("10.225.51.9")))
	if f.c.Loop.Len() != 2 {
		t.Errorf("a Node address change queued %d keys, want both pools", f.c.Loop.Len())
	}
}

// A claim naming one pool on an address of another wakes both: both count it or not.
func TestClaimOnAnotherPoolsAddress(t *testing.T) {
	f := newFixture(t, testPool("blue", "10.225.51.0/24"), testPool("green", "10.225.52.0/24"))
	f.c.claimHandler().OnAdd(testClaim("10.225.52.1", "blue"), false)
	if f.c.Loop.Len() != 1 {
		t.Errorf("claim event queued %d pools, want green, which holds the address", f.c.Loop.Len())
	}
	blue, green := f.c.counts.count(f.pool("blue"), noRecount(t)), f.c.counts.count(f.pool("green"), noRecount(t))
	if blue.allocated != 0 || green.allocated != 1 {
		t.Errorf("counts blue %+v, green %+v; want the claim counted by green only", blue, green)
	}
}

// noRecount is a claim source for counts that fails the test when a pool is counted
// afresh.
func noRecount(t *testing.T) func() []*v1alpha1.AllocationClaim {
	return func() []*v1alpha1.AllocationClaim {
		t.Helper()
		t.Error("a pool was counted afresh from every claim")
		return nil
	}
}

// Claim events keep the counts without counting any pool afresh, pinned network and
// broadcast addresses included, and the same event twice (a recount racing the
// event) counts once.
func TestCountsFollowClaimEvents(t *testing.T) {
	f := newFixture(t, testPool("blue", "10.225.51.0/24"), testPool("bad", "10.225.60.1/24"))
	h := f.c.claimHandler()
	for _, name := range []string{"10.225.51.0", "10.225.51.7", "10.225.51.8"} {
		h.OnAdd(testClaim(name, "blue"), false)
	}
	h.OnAdd(testClaim("10.225.51.7", "blue"), false)
	h.OnAdd(testClaim("10.225.61.1", "bad"), false) // the unreadable pool counts claims naming it
	if got := f.c.counts.count(f.pool("blue"), noRecount(t)); got != (tally{allocated: 3, pinned: 1}) {
		t.Errorf("blue %+v, want 3 allocated, 1 pinned", got)
	}
	if got := f.c.counts.count(f.pool("bad"), noRecount(t)); got != (tally{allocated: 1}) {
		t.Errorf("bad %+v, want 1 allocated", got)
	}
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "10.225.51.0", Obj: testClaim("10.225.51.0", "blue")})
	h.OnDelete(testClaim("10.225.51.8", "blue"))
	h.OnDelete(testClaim("10.225.51.8", "blue"))
	if got := f.c.counts.count(f.pool("blue"), noRecount(t)); got != (tally{allocated: 1}) {
		t.Errorf("blue after deletes %+v, want 1 allocated", got)
	}

	// The pool's addresses change: it is counted afresh from the claim cache.
	changed := f.pool("blue").DeepCopy()
	changed.Spec.Addresses = []string{"10.225.51.0/29"}
	recounted := false
	got := f.c.counts.count(changed, func() []*v1alpha1.AllocationClaim {
		recounted = true
		return []*v1alpha1.AllocationClaim{testClaim("10.225.51.7", "blue"), testClaim("10.225.51.9", "blue")}
	})
	if !recounted || got != (tally{allocated: 1, pinned: 1}) {
		t.Errorf("after the change %+v (recounted %v), want 1 allocated on the broadcast address .7", got, recounted)
	}
}

// A burst of claim events is one sync per pool, once the count interval has passed.
func TestClaimEventsCoalesce(t *testing.T) {
	f := newFixture(t, testPool("blue", "10.225.51.0/24"))
	f.c.interval = 300 * time.Millisecond
	h := f.c.claimHandler()
	for i := range 50 {
		h.OnAdd(testClaim(fmt.Sprintf("10.225.51.%d", i+1), "blue"), false)
	}
	if n := f.c.Loop.Len(); n != 0 {
		t.Errorf("%d keys queued at once, want none before the interval", n)
	}
	if err := wait.PollUntilContextTimeout(f.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return f.c.Loop.Len() > 0, nil
	}); err != nil {
		t.Fatal("the pool was never queued")
	}
	if n := f.c.Loop.Len(); n != 1 {
		t.Errorf("%d keys queued after the interval, want the pool once", n)
	}
}

func TestRegisteringTwiceFails(t *testing.T) {
	f := newFixture(t)
	if _, err := NewController(f.client, f.inf, f.recorder, Options{Registerer: f.registry}); err == nil {
		t.Error("a second collector on the same registry was accepted")
	}
}

// gather returns every gauge of the registry as "name/pool" -> value.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range families {
		if mf.GetType().String() != "GAUGE" {
			t.Errorf("%s is a %s, want a gauge", mf.GetName(), mf.GetType())
		}
		for _, m := range mf.GetMetric() {
			var pool string
			for _, l := range m.GetLabel() {
				if l.GetName() == "pool" {
					pool = l.GetValue()
				}
			}
			out[mf.GetName()+"/"+pool] = m.GetGauge().GetValue()
		}
	}
	return out
}
