package elasticip

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2/ktesting"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// fencedNetwork is poolAndNetwork with ext-net admitting the namespaces labelled tenant=a.
func fencedNetwork(addresses ...string) []runtime.Object {
	objs := poolAndNetwork(addresses...)
	objs[1].(*v1alpha1.ExternalNetwork).Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "a"}}
	return objs
}

func namespaceObj(name string, kv ...string) *corev1.Namespace {
	l := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

const refusalOfDefault = `ExternalNetwork "ext-net" does not admit namespace "default" (its spec.namespaceSelector "tenant=a" does not match the namespace's labels)`

// A new ElasticIP in a namespace the network does not admit gets no address: no claim,
// Pending, Allocated False NamespaceNotAdmitted naming the network and the namespace,
// and a Warning Event; nothing about the pools is said.
func TestSyncNoAddressForANamespaceNotAdmitted(t *testing.T) {
	eip := elasticIP("nginx-eip", "uid-1")
	f := newFixture(t, append(fencedNetwork("10.225.51.0/24"), eip, namespaceObj("default", "tenant", "b")))
	got := f.sync("default/nginx-eip")
	al := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionAllocated)
	if got.Status.Phase != v1alpha1.ElasticIPPending || got.Status.Address != "" || al == nil ||
		al.Status != metav1.ConditionFalse || al.Reason != v1alpha1.ReasonNamespaceNotAdmitted || !strings.Contains(al.Message, refusalOfDefault) {
		t.Fatalf("status %s %q, Allocated %+v; want Pending, no address, Allocated False NamespaceNotAdmitted", got.Status.Phase, got.Status.Address, al)
	}
	if strings.Contains(al.Message, "ext-pool") {
		t.Errorf("the message names the pools: %s", al.Message)
	}
	if creates := f.claimCreates(); len(creates) != 0 {
		t.Errorf("reserved %v for a namespace the network does not admit", creates)
	}
	if ev := f.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+v1alpha1.ReasonNamespaceNotAdmitted+" "+refusalOfDefault) {
		t.Errorf("Events %v, want one Warning NamespaceNotAdmitted", ev)
	}
	// Level-triggered: the same state again writes and announces nothing.
	f.refresh(got)
	f.client.ClearActions()
	f.sync("default/nginx-eip")
	if w := f.apiWrites(); len(w) != 0 {
		t.Errorf("writes %v for an unchanged state", w)
	}
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("Events %v for an unchanged state", ev)
	}

	// The namespace is labelled into the tenancy: the next sync reserves an address.
	f.namespace(namespaceObj("default", "tenant", "a"))
	got = f.sync("default/nginx-eip")
	if got.Status.Address != "10.225.51.1" || got.Status.Phase != v1alpha1.ElasticIPAvailable {
		t.Errorf("after relabelling: %s %q, want Available 10.225.51.1", got.Status.Phase, got.Status.Address)
	}
	if ev := f.events(); !slices.ContainsFunc(ev, func(e string) bool { return strings.HasPrefix(e, "Normal "+v1alpha1.ReasonAllocated+" ") }) {
		t.Errorf("Events %v, want a Normal Allocated once the address is reserved", ev)
	}
}

func TestSyncTenancyAdmits(t *testing.T) {
	for name, objs := range map[string][]runtime.Object{
		// An open network reads no namespace: none is in the cache here.
		"no selector":    poolAndNetwork("10.225.51.0/24"),
		"empty selector": withSelector(poolAndNetwork("10.225.51.0/24"), &metav1.LabelSelector{}),
		"selected":       append(fencedNetwork("10.225.51.0/24"), namespaceObj("default", "tenant", "a")),
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, append(objs, elasticIP("nginx-eip", "uid-1")))
			if got := f.sync("default/nginx-eip"); got.Status.Address != "10.225.51.1" {
				t.Errorf("address %q, want 10.225.51.1", got.Status.Address)
			}
		})
	}
}

func withSelector(objs []runtime.Object, sel *metav1.LabelSelector) []runtime.Object {
	objs[1].(*v1alpha1.ExternalNetwork).Spec.NamespaceSelector = sel
	return objs
}

// A namespace the cache does not show yet is not judged on a guess: the sync fails (and
// is retried), reserving nothing.
func TestSyncTenancyWaitsForTheNamespace(t *testing.T) {
	f := newFixture(t, append(fencedNetwork("10.225.51.0/24"), elasticIP("nginx-eip", "uid-1")))
	_, ctx := ktesting.NewTestContext(t)
	err := f.ctrl.sync(ctx, "default/nginx-eip")
	if err == nil || !strings.Contains(err.Error(), `namespace "default"`) {
		t.Errorf("sync: %v, want an error naming the namespace", err)
	}
	if w := f.apiWrites(); len(w) != 0 {
		t.Errorf("writes %v", w)
	}
}

// An ElasticIP that holds an address and is used keeps both when its namespace is no
// longer admitted: phase, address, user and advertisement as they were; Allocated True
// whose message says why the address stays; one Warning Event. Admitted again, the
// message says nothing of it any more.
func TestSyncKeepsTheAddressOfANamespaceNoLongerAdmitted(t *testing.T) {
	objs := usedElasticIP("default", "held", "uid-1", "10.225.51.5", "node-a")
	nic := &v1alpha1.NetworkInterface{
		ObjectMeta: metav1.ObjectMeta{Name: "web.eth0", Namespace: "default", UID: "nic-uid"},
		Spec:       v1alpha1.NetworkInterfaceSpec{NodeName: "node-a", PodRef: v1alpha1.PodReference{Name: "web", UID: "pod-uid", Interface: "eth0"}},
		Status:     v1alpha1.NetworkInterfaceStatus{Address: "10.244.1.5/32"},
	}
	objs[2].(*v1alpha1.ElasticIPAttachment).Spec.TargetRef.NetworkInterfaceName = nic.Name
	f := newFixture(t, slices.Concat(poolAndNetwork("10.225.51.0/24"), objs, []runtime.Object{nic, namespaceObj("default", "tenant", "b")}))
	before := f.sync("default/held")
	if before.Status.Phase != v1alpha1.ElasticIPAttached || before.Status.Address != "10.225.51.5" {
		t.Fatalf("setup: %s %q, want Attached 10.225.51.5", before.Status.Phase, before.Status.Address)
	}
	f.refresh(before)
	f.advertisements()
	f.events()

	// The network now admits tenant=a only.
	f.network(fencedNetwork()[1].(*v1alpha1.ExternalNetwork))
	f.client.ClearActions()
	got := f.sync("default/held")
	al := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionAllocated)
	if got.Status.Phase != v1alpha1.ElasticIPAttached || got.Status.Address != "10.225.51.5" || got.Status.Attachment == nil ||
		got.Status.Attachment.Name != "held-att" || al == nil || al.Status != metav1.ConditionTrue || al.Reason != v1alpha1.ReasonAllocated ||
		!strings.Contains(al.Message, refusalOfDefault) || !strings.Contains(al.Message, "the address stays with this ElasticIP") {
		t.Fatalf("status %s %q %v, Allocated %+v; want everything kept and the message saying why", got.Status.Phase, got.Status.Address, got.Status.Attachment, al)
	}
	for _, w := range f.apiWrites() {
		if w != "update elasticips/status" {
			t.Errorf("write %q: only the status may change", w)
		}
	}
	if _, err := f.client.JuneauV1alpha1().AllocationClaims().Get(context.Background(), "10.225.51.5", metav1.GetOptions{}); err != nil {
		t.Errorf("the claim is gone: %v", err)
	}
	if ads := f.advertisements(); len(ads) != 1 {
		t.Errorf("advertisements %v, want the one that makes node-a answer", ads)
	}
	ev := f.events()
	if len(ev) != 1 || !strings.HasPrefix(ev[0], `Warning NamespaceNotAdmitted Address "10.225.51.5" is kept: `+refusalOfDefault) {
		t.Errorf("Events %v, want one Warning NamespaceNotAdmitted", ev)
	}
	f.refresh(got)
	f.sync("default/held")
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("Events %v on the next sync, want none", ev)
	}

	f.namespace(namespaceObj("default", "tenant", "a"))
	got = f.sync("default/held")
	if al := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionAllocated); al == nil || strings.Contains(al.Message, "does not admit") {
		t.Errorf("admitted again, Allocated %+v still says it is not", al)
	}
}

// A namespace whose labels change wakes its own ElasticIPs, and no other's; an update
// that leaves the labels wakes nobody.
func TestNamespaceHandler(t *testing.T) {
	other := elasticIP("other", "uid-2")
	other.Namespace = "elsewhere"
	f := newFixture(t, append(fencedNetwork("10.225.51.0/24"), elasticIP("a", "uid-1"), elasticIP("b", "uid-3"), other))
	h := f.ctrl.namespaceHandler()
	old := namespaceObj("default", "tenant", "b")
	cur := namespaceObj("default", "tenant", "b")
	cur.Annotations = map[string]string{"note": "x"}
	h.OnUpdate(old, cur)
	if n := f.ctrl.eipLoop.Len(); n != 0 {
		t.Errorf("%d keys queued for an update that left the labels", n)
	}
	h.OnUpdate(old, namespaceObj("default", "tenant", "a"))
	if n := f.ctrl.eipLoop.Len(); n != 2 {
		t.Errorf("%d keys queued, want the two ElasticIPs of the namespace", n)
	}
	h.OnAdd(namespaceObj("empty"), false)
	if n := f.ctrl.eipLoop.Len(); n != 2 {
		t.Errorf("%d keys queued after a namespace without ElasticIPs appeared, want still 2", n)
	}
}

// refresh puts an ElasticIP as written into the cache, as the informer would.
func (f *fixture) refresh(eip *v1alpha1.ElasticIP) {
	f.t.Helper()
	if err := f.inf.Juneau().V1alpha1().ElasticIPs().Informer().GetIndexer().Update(eip); err != nil {
		f.t.Fatal(err)
	}
}

// namespace puts a Namespace into the cache (the controller reads it from there only).
func (f *fixture) namespace(ns *corev1.Namespace) {
	f.t.Helper()
	if err := f.kubeInf.Core().V1().Namespaces().Informer().GetIndexer().Update(ns); err != nil {
		f.t.Fatal(err)
	}
}

// network changes an ExternalNetwork in the API and the cache.
func (f *fixture) network(n *v1alpha1.ExternalNetwork) {
	f.t.Helper()
	if _, err := f.client.JuneauV1alpha1().ExternalNetworks().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	if err := f.inf.Juneau().V1alpha1().ExternalNetworks().Informer().GetIndexer().Update(n); err != nil {
		f.t.Fatal(err)
	}
}
