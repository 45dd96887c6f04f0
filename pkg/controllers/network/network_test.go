package network

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned/fake"
	"github.com/loutres/juneau/pkg/generated/informers/externalversions"
)

func testNetwork(name string, created int64, typ v1alpha1.AdvertiseMode, pools ...string) *v1alpha1.ExternalNetwork {
	return &v1alpha1.ExternalNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 2, CreationTimestamp: metav1.Unix(created, 0)},
		Spec:       v1alpha1.ExternalNetworkSpec{Type: typ, AddressPools: pools},
	}
}

func testPool(name string, mode v1alpha1.AdvertiseMode) *v1alpha1.AddressPool {
	return &v1alpha1.AddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.AddressPoolSpec{AdvertiseMode: mode, Addresses: []string{"10.225.51.0/24"}},
	}
}

func TestNetworkStatus(t *testing.T) {
	arp, bgp := v1alpha1.AdvertiseARP, v1alpha1.AdvertiseBGP
	poolMap := func(ps ...*v1alpha1.AddressPool) map[string]*v1alpha1.AddressPool {
		m := map[string]*v1alpha1.AddressPool{}
		for _, p := range ps {
			m[p.Name] = p
		}
		return m
	}
	ext := testNetwork("ext", 10, arp, "b", "a")
	tests := []struct {
		name    string
		net     *v1alpha1.ExternalNetwork
		pools   map[string]*v1alpha1.AddressPool
		others  []*v1alpha1.ExternalNetwork
		status  metav1.ConditionStatus
		reason  string
		message string
	}{
		{
			name:    "every pool exists and matches",
			net:     ext,
			pools:   poolMap(testPool("a", arp), testPool("b", arp)),
			status:  metav1.ConditionTrue,
			reason:  v1alpha1.ReasonPoolsReady,
			message: `every AddressPool exists and advertises by arp: "a", "b"`,
		},
		{
			name:    "one pool missing",
			net:     ext,
			pools:   poolMap(testPool("a", arp)),
			status:  metav1.ConditionFalse,
			reason:  v1alpha1.ReasonMissingDependency,
			message: `AddressPool "b" does not exist`,
		},
		{
			name:    "all pools missing, sorted",
			net:     ext,
			pools:   poolMap(),
			status:  metav1.ConditionFalse,
			reason:  v1alpha1.ReasonMissingDependency,
			message: `AddressPools "a", "b" do not exist`,
		},
		{
			name:    "mode mismatch",
			net:     ext,
			pools:   poolMap(testPool("a", arp), testPool("b", bgp)),
			status:  metav1.ConditionFalse,
			reason:  v1alpha1.ReasonInvalidAddressPool,
			message: `AddressPool "b" advertises by bgp, not arp`,
		},
		{
			name:    "missing wins over mismatch, both named",
			net:     ext,
			pools:   poolMap(testPool("b", bgp)),
			status:  metav1.ConditionFalse,
			reason:  v1alpha1.ReasonMissingDependency,
			message: `AddressPool "a" does not exist; AddressPool "b" advertises by bgp, not arp`,
		},
		{
			name:    "a pool of an older network",
			net:     ext,
			pools:   poolMap(testPool("a", arp), testPool("b", arp)),
			others:  []*v1alpha1.ExternalNetwork{testNetwork("older", 5, arp, "a")},
			status:  metav1.ConditionFalse,
			reason:  v1alpha1.ReasonInvalidAddressPool,
			message: `AddressPool "a" already belongs to ExternalNetwork "older"`,
		},
		{
			name:    "the older network keeps its pool",
			net:     ext,
			pools:   poolMap(testPool("a", arp), testPool("b", arp)),
			others:  []*v1alpha1.ExternalNetwork{testNetwork("newer", 50, arp, "a")},
			status:  metav1.ConditionTrue,
			reason:  v1alpha1.ReasonPoolsReady,
			message: `every AddressPool exists and advertises by arp: "a", "b"`,
		},
		{
			name:    "same age: the name decides",
			net:     ext,
			pools:   poolMap(testPool("a", arp), testPool("b", arp)),
			others:  []*v1alpha1.ExternalNetwork{testNetwork("aaa", 10, arp, "b")},
			status:  metav1.ConditionFalse,
			reason:  v1alpha1.ReasonInvalidAddressPool,
			message: `AddressPool "b" already belongs to ExternalNetwork "aaa"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := networkStatus(tt.net, tt.pools, append([]*v1alpha1.ExternalNetwork{tt.net}, tt.others...))
			if len(st.Conditions) != 1 {
				t.Fatalf("conditions %+v", st.Conditions)
			}
			c := st.Conditions[0]
			if c.Type != v1alpha1.ConditionReady || c.Status != tt.status || c.Reason != tt.reason ||
				c.Message != tt.message || c.ObservedGeneration != 2 {
				t.Errorf("condition %+v\nwant status %s reason %s message %q", c, tt.status, tt.reason, tt.message)
			}
		})
	}
}

func TestSyncNetwork(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset(testNetwork("ext", 1, v1alpha1.AdvertiseARP, "a"), testNetwork("other", 1, v1alpha1.AdvertiseARP, "z"))
	factory := externalversions.NewSharedInformerFactory(client, 0)
	inf := Informers{Networks: factory.Juneau().V1alpha1().ExternalNetworks(), Pools: factory.Juneau().V1alpha1().AddressPools()}
	recorder := record.NewFakeRecorder(10)
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	c, err := NewController(client, inf, recorder, Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	refresh := func() {
		nets, err := client.JuneauV1alpha1().ExternalNetworks().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var objs []any
		for i := range nets.Items {
			objs = append(objs, &nets.Items[i])
		}
		if err := inf.Networks.Informer().GetIndexer().Replace(objs, ""); err != nil {
			t.Fatal(err)
		}
	}
	ready := func() *metav1.Condition {
		n, err := client.JuneauV1alpha1().ExternalNetworks().Get(ctx, "ext", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(n.Status.Conditions, v1alpha1.ConditionReady)
	}
	refresh()

	if err := c.sync(ctx, "ext"); err != nil {
		t.Fatal(err)
	}
	if r := ready(); r == nil || r.Reason != v1alpha1.ReasonMissingDependency {
		t.Fatalf("Ready %+v, want MissingDependency", r)
	}
	if ev := <-recorder.Events; !strings.HasPrefix(ev, "Warning "+v1alpha1.ReasonMissingDependency) {
		t.Errorf("event %q", ev)
	}

	// The pool appears: only the network naming it is queued, and it becomes Ready.
	pool := testPool("a", v1alpha1.AdvertiseARP)
	if err := inf.Pools.Informer().GetIndexer().Add(pool); err != nil {
		t.Fatal(err)
	}
	c.onPool(pool)
	if c.Loop.Len() != 1 {
		t.Errorf("pool event queued %d networks, want 1", c.Loop.Len())
	}
	refresh()
	clk.Step(time.Minute)
	if err := c.sync(ctx, "ext"); err != nil {
		t.Fatal(err)
	}
	r := ready()
	if r == nil || r.Status != metav1.ConditionTrue || !r.LastTransitionTime.Time.Equal(clk.Now()) {
		t.Fatalf("Ready %+v, want True since %v", r, clk.Now())
	}
	if ev := <-recorder.Events; !strings.HasPrefix(ev, "Normal "+v1alpha1.ReasonPoolsReady) {
		t.Errorf("event %q", ev)
	}

	// Nothing changed: nothing written.
	refresh()
	client.ClearActions()
	if err := c.sync(ctx, "ext"); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" {
			t.Errorf("idempotent sync patched %s", a.GetResource().Resource)
		}
	}
}
