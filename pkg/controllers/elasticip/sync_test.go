package elasticip

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned/fake"
	juneauinformers "github.com/loutres/juneau/pkg/generated/informers/externalversions"
)

// fixture is a controller on a fake clientset whose informers are fed by hand.
type fixture struct {
	t        *testing.T
	client   *fake.Clientset
	ctrl     *Controller
	inf      juneauinformers.SharedInformerFactory
	kubeInf  kubeinformers.SharedInformerFactory
	recorder *record.FakeRecorder
}

// newFixture makes the controller with cached objects in its caches and the fake API
// server, and apiOnly objects in the API server only. Namespaces go to the caches only:
// the controller never reads them from the API server.
func newFixture(t *testing.T, cached []runtime.Object, apiOnly ...runtime.Object) *fixture {
	t.Helper()
	var juneauObjs []runtime.Object
	for _, o := range append(append([]runtime.Object{}, cached...), apiOnly...) {
		if _, ok := o.(*corev1.Namespace); !ok {
			juneauObjs = append(juneauObjs, o)
		}
	}
	client := fake.NewClientset(juneauObjs...)
	inf := juneauinformers.NewSharedInformerFactory(client, 0)
	kubeInf := kubeinformers.NewSharedInformerFactory(kubefake.NewClientset(), 0)
	j := inf.Juneau().V1alpha1()
	recorder := record.NewFakeRecorder(1000)
	ctrl, err := NewController(client, Informers{
		ElasticIPs: j.ElasticIPs(), Claims: j.AllocationClaims(), Pools: j.AddressPools(), Networks: j.ExternalNetworks(),
		Attachments: j.ElasticIPAttachments(), NetworkInterfaces: j.NetworkInterfaces(), Advertisements: j.ARPAdvertisements(), BGPAdvertisements: j.BGPAdvertisements(),
		Namespaces: kubeInf.Core().V1().Namespaces(),
	}, recorder, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range cached {
		var err error
		switch o := obj.(type) {
		case *corev1.Namespace:
			err = kubeInf.Core().V1().Namespaces().Informer().GetIndexer().Add(o)
		case *v1alpha1.ElasticIP:
			err = j.ElasticIPs().Informer().GetIndexer().Add(o)
		case *v1alpha1.AllocationClaim:
			err = j.AllocationClaims().Informer().GetIndexer().Add(o)
			ctrl.claimHandler().OnAdd(o, false)
		case *v1alpha1.AddressPool:
			err = j.AddressPools().Informer().GetIndexer().Add(o)
		case *v1alpha1.ExternalNetwork:
			err = j.ExternalNetworks().Informer().GetIndexer().Add(o)
		case *v1alpha1.NetworkInterface:
			err = j.NetworkInterfaces().Informer().GetIndexer().Add(o)
		case *v1alpha1.ElasticIPAttachment:
			err = j.ElasticIPAttachments().Informer().GetIndexer().Add(o)
		case *v1alpha1.ARPAdvertisement:
			err = j.ARPAdvertisements().Informer().GetIndexer().Add(o)
		case *v1alpha1.BGPAdvertisement:
			err = j.BGPAdvertisements().Informer().GetIndexer().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	client.ClearActions()
	return &fixture{t: t, client: client, ctrl: ctrl, inf: inf, kubeInf: kubeInf, recorder: recorder}
}

// events drains the Events recorded so far.
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

// apiWrites lists the API writes made since the last ClearActions, as "verb resource[/sub]".
func (f *fixture) apiWrites() []string {
	var out []string
	for _, a := range f.client.Actions() {
		if v := a.GetVerb(); v == "get" || v == "list" || v == "watch" {
			continue
		}
		w := a.GetVerb() + " " + a.GetResource().Resource
		if sub := a.GetSubresource(); sub != "" {
			w += "/" + sub
		}
		out = append(out, w)
	}
	return out
}

func (f *fixture) sync(key string) *v1alpha1.ElasticIP {
	f.t.Helper()
	_, ctx := ktesting.NewTestContext(f.t)
	if err := f.ctrl.sync(ctx, key); err != nil {
		f.t.Fatalf("sync %s: %v", key, err)
	}
	ns, name := "default", key[len("default/"):]
	eip, err := f.client.JuneauV1alpha1().ElasticIPs(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return eip
}

func (f *fixture) claimCreates() []string {
	var names []string
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "allocationclaims" {
			names = append(names, a.(interface{ GetObject() runtime.Object }).GetObject().(*v1alpha1.AllocationClaim).Name)
		}
	}
	return names
}

func poolAndNetwork(addresses ...string) []runtime.Object {
	return []runtime.Object{
		&v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: "ext-pool"}, Spec: v1alpha1.AddressPoolSpec{AdvertiseMode: v1alpha1.AdvertiseARP, Addresses: addresses}},
		&v1alpha1.ExternalNetwork{ObjectMeta: metav1.ObjectMeta{Name: "ext-net"}, Spec: v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseARP, AddressPools: []string{"ext-pool"}}},
	}
}

func elasticIP(name string, uid types.UID) *v1alpha1.ElasticIP {
	return &v1alpha1.ElasticIP{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: uid, Finalizers: []string{v1alpha1.FinalizerElasticIP}},
		Spec:       v1alpha1.ElasticIPSpec{ExternalNetwork: "ext-net"},
	}
}

func claimFor(addr string, eip *v1alpha1.ElasticIP) *v1alpha1.AllocationClaim {
	return &v1alpha1.AllocationClaim{
		ObjectMeta: metav1.ObjectMeta{Name: iprange.ClaimName(netip.MustParseAddr(addr)), UID: types.UID("claim-" + addr), CreationTimestamp: metav1.NewTime(time.Now())},
		Spec: v1alpha1.AllocationClaimSpec{AddressPool: "ext-pool", Address: addr, Consumer: v1alpha1.ConsumerReference{
			Kind: v1alpha1.ConsumerKindElasticIP, Namespace: eip.Namespace, Name: eip.Name, UID: string(eip.UID)}},
	}
}

// After a crash between claim creation and status write, the claim is adopted by
// consumer UID: no second reservation.
func TestSyncAdoptsClaimAfterCrash(t *testing.T) {
	eip := elasticIP("nginx-eip", "uid-1")
	objs := append(poolAndNetwork("10.225.51.0/24"), eip, claimFor("10.225.51.9", eip))
	f := newFixture(t, objs)
	got := f.sync("default/nginx-eip")
	if got.Status.Address != "10.225.51.9" || got.Status.Phase != v1alpha1.ElasticIPAvailable {
		t.Errorf("status = %s %s, want the adopted 10.225.51.9 Available", got.Status.Phase, got.Status.Address)
	}
	if creates := f.claimCreates(); len(creates) != 0 {
		t.Errorf("created claims %v, want none", creates)
	}
}

// A lagging cache costs a retry: AlreadyExists moves on to the next candidate.
func TestSyncSkipsClaimsTheCacheHasNotSeen(t *testing.T) {
	other := elasticIP("other", "uid-2")
	eip := elasticIP("nginx-eip", "uid-1")
	objs := append(poolAndNetwork("10.225.51.0/24"), eip)
	f := newFixture(t, objs, claimFor("10.225.51.1", other)) // in the API only
	got := f.sync("default/nginx-eip")
	if got.Status.Address != "10.225.51.2" {
		t.Errorf("address = %s, want 10.225.51.2", got.Status.Address)
	}
	if creates := f.claimCreates(); len(creates) != 2 || creates[0] != "10.225.51.1" || creates[1] != "10.225.51.2" {
		t.Errorf("claim creates = %v, want [10.225.51.1 10.225.51.2]", creates)
	}
	// A retry before the informer shows the new claim adopts it instead of reserving again.
	f.client.ClearActions()
	f.sync("default/nginx-eip")
	if creates := f.claimCreates(); len(creates) != 0 {
		t.Errorf("retry created claims %v", creates)
	}
}

// Two claims for one ElasticIP (left by a leader handover): the recorded one is kept,
// the other deleted.
func TestSyncDeletesDuplicateClaims(t *testing.T) {
	eip := elasticIP("nginx-eip", "uid-1")
	eip.Status.Address = "10.225.51.7"
	objs := append(poolAndNetwork("10.225.51.0/24"), eip, claimFor("10.225.51.3", eip), claimFor("10.225.51.7", eip))
	f := newFixture(t, objs)
	got := f.sync("default/nginx-eip")
	if got.Status.Address != "10.225.51.7" {
		t.Errorf("address = %s, want the recorded 10.225.51.7", got.Status.Address)
	}
	if _, err := f.client.JuneauV1alpha1().AllocationClaims().Get(context.Background(), "10.225.51.3", metav1.GetOptions{}); err == nil {
		t.Error("duplicate claim 10.225.51.3 was not deleted")
	}
}

// A routine allocation is two writes, the claim and the status, with no finalizer and
// no Event: nothing has to wait for the deletion of an ElasticIP nobody uses.
func TestSyncRoutineAllocationWritesClaimAndStatusOnly(t *testing.T) {
	eip := elasticIP("nginx-eip", "uid-1")
	eip.Finalizers = nil
	f := newFixture(t, append(poolAndNetwork("10.225.51.0/24"), eip))
	got := f.sync("default/nginx-eip")
	if got.Status.Address != "10.225.51.1" || got.Status.Phase != v1alpha1.ElasticIPAvailable || len(got.Finalizers) != 0 {
		t.Errorf("status %s %q, finalizers %v; want Available 10.225.51.1 without a finalizer", got.Status.Phase, got.Status.Address, got.Finalizers)
	}
	if w := f.apiWrites(); !slices.Equal(w, []string{"create allocationclaims", "update elasticips/status"}) {
		t.Errorf("writes = %v, want the claim and the status only", w)
	}
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("Events %v for a routine allocation", ev)
	}
}

// An allocation that had to wait is announced once it succeeds; so is a first status
// that is a Warning.
func TestSyncAnnouncesAllocationAfterWaiting(t *testing.T) {
	eip := elasticIP("nginx-eip", "uid-1")
	other := elasticIP("other", "uid-2")
	f := newFixture(t, append(poolAndNetwork("10.225.51.1"), eip, other, claimFor("10.225.51.1", other)))
	got := f.sync("default/nginx-eip")
	if got.Status.Phase != v1alpha1.ElasticIPPending {
		t.Fatalf("phase %s, want Pending", got.Status.Phase)
	}
	if ev := f.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+v1alpha1.ReasonNoAddressAvailable) {
		t.Errorf("Events %v, want one Warning NoAddressAvailable", ev)
	}
	// The other one's claim goes; the address is free again.
	if err := f.client.JuneauV1alpha1().AllocationClaims().Delete(context.Background(), "10.225.51.1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	claim, err := f.inf.Juneau().V1alpha1().AllocationClaims().Lister().Get("10.225.51.1")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.inf.Juneau().V1alpha1().AllocationClaims().Informer().GetIndexer().Delete(claim); err != nil {
		t.Fatal(err)
	}
	f.ctrl.claimHandler().OnDelete(claim)
	if err := f.inf.Juneau().V1alpha1().ElasticIPs().Informer().GetIndexer().Update(got); err != nil {
		t.Fatal(err)
	}
	got = f.sync("default/nginx-eip")
	if got.Status.Address != "10.225.51.1" {
		t.Fatalf("address %q, want 10.225.51.1", got.Status.Address)
	}
	if ev := f.events(); !slices.ContainsFunc(ev, func(e string) bool { return strings.HasPrefix(e, "Normal "+v1alpha1.ReasonAllocated+" ") }) {
		t.Errorf("Events %v, want a Normal Allocated", ev)
	}
}

// A NetworkInterface naming the ElasticIP makes its deletion wait: the finalizer goes on
// before the NetworkInterface can be recorded as the user.
func TestSyncAddsFinalizerForNetworkInterfaces(t *testing.T) {
	eip := elasticIP("nginx-eip", "uid-1")
	eip.Finalizers = nil
	eip.Status = v1alpha1.ElasticIPStatus{Phase: v1alpha1.ElasticIPAvailable, Address: "10.225.51.1"}
	nic := &v1alpha1.NetworkInterface{ObjectMeta: metav1.ObjectMeta{Name: "web.eth0", Namespace: "default", UID: "nic-uid"},
		Spec: v1alpha1.NetworkInterfaceSpec{PodRef: v1alpha1.PodReference{Name: "web"}, NodeName: "node-a", ElasticIP: "nginx-eip"}}
	f := newFixture(t, append(poolAndNetwork("10.225.51.0/24"), eip, claimFor("10.225.51.1", eip), nic))
	got := f.sync("default/nginx-eip")
	if len(got.Finalizers) != 1 || got.Finalizers[0] != v1alpha1.FinalizerElasticIP {
		t.Errorf("finalizers = %v", got.Finalizers)
	}
	if got.Status.Attachment != nil {
		t.Errorf("holder %+v recorded before the finalizer was in place", got.Status.Attachment)
	}
	if w := f.apiWrites(); !slices.Equal(w, []string{"patch elasticips"}) {
		t.Errorf("writes = %v, want the finalizer alone", w)
	}
}

// An ElasticIP without the finalizer, deleted: the watch's delete event releases its
// claim at once, without the orphan grace period, with the Event Released; a second
// look (the same claim seen again) releases nothing twice.
func TestGoneElasticIPReleasedAtOnce(t *testing.T) {
	eip := elasticIP("nginx-eip", "uid-1")
	eip.Finalizers = nil
	eip.Status = v1alpha1.ElasticIPStatus{Phase: v1alpha1.ElasticIPAvailable, Address: "10.225.51.1"}
	claim := claimFor("10.225.51.1", eip) // created just now: well within the grace period
	f := newFixture(t, append(poolAndNetwork("10.225.51.0/24"), eip, claim))
	if err := f.client.JuneauV1alpha1().ElasticIPs("default").Delete(context.Background(), eip.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.inf.Juneau().V1alpha1().ElasticIPs().Informer().GetIndexer().Delete(eip); err != nil {
		t.Fatal(err)
	}
	f.ctrl.onElasticIPGone(cache.DeletedFinalStateUnknown{Key: "default/nginx-eip", Obj: eip})
	if n := f.ctrl.claimLoop.Len(); n != 1 {
		t.Fatalf("claim loop holds %d keys, want the claim's", n)
	}
	_, ctx := ktesting.NewTestContext(t)
	f.client.ClearActions()
	for range 2 {
		if err := f.ctrl.syncClaim(ctx, claim.Name); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range f.client.Actions() {
		if a.GetResource().Resource == "elasticips" {
			t.Errorf("read the deleted ElasticIP again: %s", a.GetVerb())
		}
	}
	if _, err := f.client.JuneauV1alpha1().AllocationClaims().Get(context.Background(), claim.Name, metav1.GetOptions{}); err == nil {
		t.Error("the claim of the deleted ElasticIP is still there")
	}
	if ev := f.events(); len(ev) != 1 || ev[0] != `Normal Released released address "10.225.51.1"` {
		t.Errorf("Events %v, want one Released", ev)
	}
}

// A claim whose consumer the watch never showed deleted still waits for the grace period.
func TestOrphanClaimWaitsForGrace(t *testing.T) {
	eip := elasticIP("nginx-eip", "uid-1")
	claim := claimFor("10.225.51.1", eip)
	f := newFixture(t, append(poolAndNetwork("10.225.51.0/24"), claim))
	_, ctx := ktesting.NewTestContext(t)
	if err := f.ctrl.syncClaim(ctx, claim.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.JuneauV1alpha1().AllocationClaims().Get(context.Background(), claim.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("a young orphan claim was deleted: %v", err)
	}
}

// A pool named by two networks belongs to the older one: its ElasticIPs allocate from
// it, the newer network's ElasticIPs get none of it and are an Error naming the owner.
func TestSyncPoolClaimedByTwoNetworks(t *testing.T) {
	objs := poolAndNetwork("10.225.51.0/24")
	objs[1].(*v1alpha1.ExternalNetwork).CreationTimestamp = metav1.Unix(100, 0)
	newer := &v1alpha1.ExternalNetwork{ObjectMeta: metav1.ObjectMeta{Name: "newer-net", CreationTimestamp: metav1.Unix(200, 0)},
		Spec: v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseARP, AddressPools: []string{"ext-pool"}}}
	owned := elasticIP("owned", "uid-1")
	refused := elasticIP("refused", "uid-2")
	refused.Spec.ExternalNetwork = "newer-net"
	f := newFixture(t, append(objs, newer, owned, refused))

	if got := f.sync("default/owned"); got.Status.Address != "10.225.51.1" || got.Status.Phase != v1alpha1.ElasticIPAvailable {
		t.Errorf("ElasticIP of the owning network: %s %q, want Available 10.225.51.1", got.Status.Phase, got.Status.Address)
	}
	f.client.ClearActions()
	got := f.sync("default/refused")
	c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionAllocated)
	if got.Status.Phase != v1alpha1.ElasticIPError || got.Status.Address != "" || c == nil ||
		c.Reason != v1alpha1.ReasonInvalidAddressPool || !strings.Contains(c.Message, `"ext-pool" (belongs to ExternalNetwork "ext-net")`) {
		t.Errorf("ElasticIP of the newer network: %s %q %+v, want an Error naming the owner", got.Status.Phase, got.Status.Address, c)
	}
	if creates := f.claimCreates(); len(creates) != 0 {
		t.Errorf("the newer network reserved %v", creates)
	}
}

// A pool made again smaller than before, without the address an ElasticIP holds: the
// reservation stands, so the ElasticIP stays as it was (Available, Allocated True with
// the reason Allocated) and its message and a Warning Event name the address and the
// pool; nobody else is given the address.
func TestSyncAddressOutsideThePools(t *testing.T) {
	eip := elasticIP("held", "uid-1")
	eip.Status.Address = "10.225.51.6"
	eip.Status.Phase = v1alpha1.ElasticIPAvailable
	claim := claimFor("10.225.51.6", eip)
	claim.Spec.AddressPool = "tiny-pool"
	objs := []runtime.Object{
		&v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: "tiny-pool"}, Spec: v1alpha1.AddressPoolSpec{AdvertiseMode: v1alpha1.AdvertiseARP, Addresses: []string{"10.225.51.5"}}},
		&v1alpha1.ExternalNetwork{ObjectMeta: metav1.ObjectMeta{Name: "ext-net"}, Spec: v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseARP, AddressPools: []string{"tiny-pool"}}},
		eip, claim,
	}
	f := newFixture(t, objs)
	got := f.sync("default/held")
	c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionAllocated)
	if got.Status.Phase != v1alpha1.ElasticIPAvailable || got.Status.Address != "10.225.51.6" || c == nil || c.Status != metav1.ConditionTrue ||
		c.Reason != v1alpha1.ReasonAllocated || !strings.Contains(c.Message, `address "10.225.51.6" reserved from AddressPool "tiny-pool", which no longer holds it`) {
		t.Errorf("status %s %q %+v, want Available, Allocated True naming the address and the pool", got.Status.Phase, got.Status.Address, c)
	}
	if ev := f.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning AddressOutsidePools Address \"10.225.51.6\" was reserved from AddressPool \"tiny-pool\", which no longer holds it") {
		t.Errorf("events %q, want one Warning naming the address and the pool", ev)
	}
	if _, err := f.client.JuneauV1alpha1().AllocationClaims().Get(context.Background(), "10.225.51.6", metav1.GetOptions{}); err != nil {
		t.Errorf("the reservation went: %v", err)
	}
	// Another ElasticIP gets the one address the pool has, never the dropped one.
	other := elasticIP("other", "uid-2")
	if err := f.inf.Juneau().V1alpha1().ElasticIPs().Informer().GetIndexer().Add(other); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.JuneauV1alpha1().ElasticIPs("default").Create(context.Background(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := f.sync("default/other"); got.Status.Address != "10.225.51.5" {
		t.Errorf("the other ElasticIP got %q, want 10.225.51.5", got.Status.Address)
	}
}

// An AddressPool deleted while an ElasticIP holds one of its addresses (the webhook
// refuses this; a race or a forced deletion can still do it): the ElasticIP keeps its
// address, its user and its advertisement, so its status agrees with the traffic that
// still flows — Attached, Allocated True with the reason Allocated — and the network's
// other ElasticIPs get no new address (Pending, MissingDependency).
func TestSyncPoolDeletedUnderAnAttachedElasticIP(t *testing.T) {
	eip := elasticIP("held", "uid-1")
	eip.Status.Address = "10.225.51.5"
	holderRef := v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindElasticIPAttachment, Name: "held-attach", UID: "att-uid"}
	eip.Status.Attachment = &holderRef
	eip.Status.Phase = v1alpha1.ElasticIPAttached
	att := &v1alpha1.ElasticIPAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "held-attach", Namespace: "default", UID: "att-uid"},
		Spec: v1alpha1.ElasticIPAttachmentSpec{ElasticIPRef: v1alpha1.ElasticIPReference{Name: "held"},
			TargetRef: v1alpha1.AttachmentTarget{NetworkInterfaceName: "web.eth0"}},
		Status: v1alpha1.ElasticIPAttachmentStatus{NodeName: "node-a"},
	}
	nic := &v1alpha1.NetworkInterface{
		ObjectMeta: metav1.ObjectMeta{Name: "web.eth0", Namespace: "default", UID: "nic-uid"},
		Spec:       v1alpha1.NetworkInterfaceSpec{NodeName: "node-a", PodRef: v1alpha1.PodReference{Name: "web", UID: "pod-uid", Interface: "eth0"}},
		Status:     v1alpha1.NetworkInterfaceStatus{Address: "10.244.1.5/32"},
	}
	network := poolAndNetwork()[1] // its pool, ext-pool, is gone
	waiting := elasticIP("new", "uid-2")
	f := newFixture(t, []runtime.Object{network, eip, claimFor("10.225.51.5", eip), att, nic, waiting})

	got := f.sync("default/held")
	al := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionAllocated)
	if got.Status.Phase != v1alpha1.ElasticIPAttached || got.Status.Address != "10.225.51.5" || got.Status.Attachment == nil ||
		al == nil || al.Status != metav1.ConditionTrue || al.Reason != v1alpha1.ReasonAllocated ||
		!strings.Contains(al.Message, `reserved from AddressPool "ext-pool", which no longer holds it (the pool was deleted`) {
		t.Errorf("status %s %q %v %+v, want Attached with the address kept and Allocated True saying the pool is gone",
			got.Status.Phase, got.Status.Address, got.Status.Attachment, al)
	}
	ads, err := f.client.JuneauV1alpha1().ARPAdvertisements().List(context.Background(), metav1.ListOptions{})
	if err != nil || len(ads.Items) != 1 || ads.Items[0].Spec.NodeName != "node-a" || ads.Items[0].Spec.Address != "10.225.51.5" {
		t.Errorf("advertisements %+v (%v), want one on node-a for 10.225.51.5: the Node keeps answering", ads, err)
	}
	for _, c := range got.Status.Conditions {
		if c.Status == metav1.ConditionTrue && v1alpha1.EventType(c.Reason) == corev1.EventTypeWarning {
			t.Errorf("%s is True with the failure reason %s", c.Type, c.Reason)
		}
	}
	got = f.sync("default/new")
	if al := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionAllocated); got.Status.Address != "" ||
		al == nil || al.Status != metav1.ConditionFalse || al.Reason != v1alpha1.ReasonMissingDependency {
		t.Errorf("a new ElasticIP of the network: %q %+v, want no address, Allocated False MissingDependency", got.Status.Address, al)
	}
}

// Only a NetworkInterface that may carry the address makes deletion wait: one made after
// its Pod's network was set up was never plumbed, and an ElasticIP that has the
// finalizer already needs nothing more.
func TestNeedsFinalizer(t *testing.T) {
	eip := elasticIP("nginx-eip", "uid-1")
	bare := eip.DeepCopy()
	bare.Finalizers = nil
	nic := &v1alpha1.NetworkInterface{ObjectMeta: metav1.ObjectMeta{Name: "web.eth0", Namespace: "default"},
		Spec: v1alpha1.NetworkInterfaceSpec{ElasticIP: "nginx-eip"}}
	late := nic.DeepCopy()
	late.Spec.CreatedAfterPodNetwork = true
	f := newFixture(t, []runtime.Object{late})
	for _, tc := range []struct {
		name string
		eip  *v1alpha1.ElasticIP
		nics []*v1alpha1.NetworkInterface
		want bool
	}{
		{"unused", bare, nil, false},
		{"named by an interface", bare, []*v1alpha1.NetworkInterface{nic}, true},
		{"already has it", eip, []*v1alpha1.NetworkInterface{nic}, false},
		{"named only by an interface made after the Pod's network", bare, f.ctrl.nicsOf(bare), false},
	} {
		if got := needsFinalizer(tc.eip, tc.nics); got != tc.want {
			t.Errorf("%s: needsFinalizer = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// dualStack is a network with an IPv4 pool and an IPv6 pool, in that order.
func dualStack() []runtime.Object {
	return []runtime.Object{
		&v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: "four"}, Spec: v1alpha1.AddressPoolSpec{AdvertiseMode: v1alpha1.AdvertiseARP, Addresses: []string{"10.225.51.0/24"}}},
		&v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: "six"}, Spec: v1alpha1.AddressPoolSpec{AdvertiseMode: v1alpha1.AdvertiseARP, Addresses: []string{"fd00:225:51::/64"}}},
		&v1alpha1.ExternalNetwork{ObjectMeta: metav1.ObjectMeta{Name: "ext-net"}, Spec: v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseARP, AddressPools: []string{"four", "six"}}},
	}
}

func elasticIP6(name string, uid types.UID) *v1alpha1.ElasticIP {
	e := elasticIP(name, uid)
	e.Spec.IPFamily = v1alpha1.IPv6
	return e
}

// An IPv6 ElasticIP takes the first free address of the network's IPv6 pools, under a
// claim named with '-' for ':'; an IPv4 one on the same network keeps to the IPv4 pool.
func TestSyncIPv6Allocation(t *testing.T) {
	six := elasticIP6("six", "uid-6")
	four := elasticIP("four", "uid-4")
	f := newFixture(t, append(dualStack(), six, four))
	got := f.sync("default/six")
	if got.Status.Address != "fd00:225:51::1" || got.Status.Phase != v1alpha1.ElasticIPAvailable {
		t.Fatalf("IPv6 ElasticIP: %s %q, want Available fd00:225:51::1", got.Status.Phase, got.Status.Address)
	}
	if creates := f.claimCreates(); len(creates) != 1 || creates[0] != "fd00-225-51--1" {
		t.Errorf("claim creates = %v, want [fd00-225-51--1]", creates)
	}
	claim, err := f.client.JuneauV1alpha1().AllocationClaims().Get(context.Background(), "fd00-225-51--1", metav1.GetOptions{})
	if err != nil || claim.Spec.Address != "fd00:225:51::1" || claim.Spec.AddressPool != "six" {
		t.Fatalf("claim = %+v, %v; want spec.address fd00:225:51::1 from six", claim, err)
	}
	if got := f.sync("default/four"); got.Status.Address != "10.225.51.1" {
		t.Errorf("IPv4 ElasticIP on the same network: %q, want 10.225.51.1", got.Status.Address)
	}
}

// An IPv6 ElasticIP adopts its own claim after a crash, found by consumer UID.
func TestSyncIPv6AdoptsClaim(t *testing.T) {
	six := elasticIP6("six", "uid-6")
	f := newFixture(t, append(dualStack(), six, claimFor("fd00:225:51::9", six)))
	if got := f.sync("default/six"); got.Status.Address != "fd00:225:51::9" {
		t.Fatalf("address = %q, want the adopted fd00:225:51::9", got.Status.Address)
	}
	if creates := f.claimCreates(); len(creates) != 0 {
		t.Errorf("created %v, want nothing", creates)
	}
}

// A requested IPv6 address held by another consumer: AddressInUse naming it.
func TestSyncIPv6RequestedInUse(t *testing.T) {
	other := elasticIP6("other", "uid-o")
	six := elasticIP6("six", "uid-6")
	six.Spec.RequestedIP = "fd00:225:51::7"
	f := newFixture(t, append(dualStack(), six), claimFor("fd00:225:51::7", other))
	got := f.sync("default/six")
	c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionAllocated)
	if c == nil || c.Reason != v1alpha1.ReasonAddressInUse || !strings.Contains(c.Message, `ElasticIP "default/other"`) {
		t.Fatalf("Allocated = %+v, want AddressInUse naming default/other", c)
	}
}

// A network without a pool of the ElasticIP's family: Pending, NoAddressAvailable,
// saying which family is missing.
func TestSyncIPv6WithoutIPv6Pool(t *testing.T) {
	six := elasticIP6("six", "uid-6")
	f := newFixture(t, append(poolAndNetwork("10.225.51.0/24"), six))
	got := f.sync("default/six")
	c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionAllocated)
	if got.Status.Phase != v1alpha1.ElasticIPPending || c == nil || c.Reason != v1alpha1.ReasonNoAddressAvailable ||
		!strings.Contains(c.Message, `ExternalNetwork "ext-net" has no IPv6 AddressPool ("ext-pool")`) {
		t.Fatalf("phase %s, Allocated = %+v", got.Status.Phase, c)
	}
	if creates := f.claimCreates(); len(creates) != 0 {
		t.Errorf("created %v, want nothing", creates)
	}
}

// The Released Event of a deleted IPv6 ElasticIP gives the address, not the claim's name.
func TestGoneIPv6ElasticIPReleasedNamesTheAddress(t *testing.T) {
	eip := elasticIP6("six", "uid-6")
	eip.Finalizers = nil
	claim := claimFor("fd00:225:51::1", eip)
	claim.Spec.AddressPool = "six"
	f := newFixture(t, append(dualStack(), claim))
	f.ctrl.onElasticIPGone(eip)
	_, ctx := ktesting.NewTestContext(t)
	if err := f.ctrl.syncClaim(ctx, claim.Name); err != nil {
		t.Fatal(err)
	}
	if ev := f.events(); len(ev) != 1 || ev[0] != `Normal Released released address "fd00:225:51::1"` {
		t.Errorf("Events %v, want one Released naming fd00:225:51::1", ev)
	}
}
