package podeip

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned/fake"
	"github.com/loutres/juneau/pkg/generated/informers/externalversions"
	"github.com/loutres/juneau/pkg/status"
	"github.com/loutres/juneau/pkg/workloop"
)

type fixture struct {
	t        *testing.T
	ctx      context.Context
	kube     *kubefake.Clientset
	client   *fake.Clientset
	inf      Informers
	recorder *record.FakeRecorder
	clock    *clocktesting.FakeClock
	c        *Controller
}

// newFixture puts Pods into the fake Kubernetes clientset, everything else into the
// fake juneau clientset, and the informer caches in step with both.
func newFixture(t *testing.T, clock *clocktesting.FakeClock, objs ...runtime.Object) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	var kubeObjs, juneauObjs []runtime.Object
	for _, o := range objs {
		if _, ok := o.(*corev1.Pod); ok {
			kubeObjs = append(kubeObjs, o)
		} else {
			juneauObjs = append(juneauObjs, o)
		}
	}
	if clock == nil {
		clock = clocktesting.NewFakeClock(t0)
	}
	f := &fixture{t: t, ctx: ctx, kube: kubefake.NewClientset(kubeObjs...), client: fake.NewClientset(juneauObjs...),
		recorder: record.NewFakeRecorder(100), clock: clock}
	kubeFactory := kubeinformers.NewSharedInformerFactory(f.kube, 0)
	factory := externalversions.NewSharedInformerFactory(f.client, 0)
	j := factory.Juneau().V1alpha1()
	f.inf = Informers{Pods: kubeFactory.Core().V1().Pods(), ElasticIPs: j.ElasticIPs(), Attachments: j.ElasticIPAttachments(),
		NetworkInterfaces: j.NetworkInterfaces(), Networks: j.ExternalNetworks()}
	c, err := NewController(f.kube, f.client, f.inf, f.recorder, Options{Options: workloop.Options{Clock: f.clock},
		StatefulKinds: []schema.GroupKind{{Group: "apps.kruise.io", Kind: "StatefulSet"}}})
	if err != nil {
		t.Fatalf("NewController: %v", err)
	}
	f.c = c
	f.refresh()
	return f
}

// refresh makes the caches hold what the fake API servers hold, as the informers would
// once they caught up.
func (f *fixture) refresh() {
	f.t.Helper()
	pods, err := f.kube.CoreV1().Pods("").List(f.ctx, metav1.ListOptions{})
	f.check(err)
	var list []any
	for i := range pods.Items {
		list = append(list, &pods.Items[i])
	}
	f.check(f.inf.Pods.Informer().GetIndexer().Replace(list, ""))
	j := f.client.JuneauV1alpha1()
	eips, err := j.ElasticIPs("").List(f.ctx, metav1.ListOptions{})
	f.check(err)
	f.replace(f.inf.ElasticIPs.Informer(), eips.Items)
	atts, err := j.ElasticIPAttachments("").List(f.ctx, metav1.ListOptions{})
	f.check(err)
	f.replace(f.inf.Attachments.Informer(), atts.Items)
	nics, err := j.NetworkInterfaces("").List(f.ctx, metav1.ListOptions{})
	f.check(err)
	f.replace(f.inf.NetworkInterfaces.Informer(), nics.Items)
	nets, err := j.ExternalNetworks().List(f.ctx, metav1.ListOptions{})
	f.check(err)
	f.replace(f.inf.Networks.Informer(), nets.Items)
}

func replaceItems[T any](f *fixture, informer cache.SharedIndexInformer, items []T) {
	var list []any
	for i := range items {
		list = append(list, &items[i])
	}
	f.check(informer.GetIndexer().Replace(list, ""))
}

func (f *fixture) replace(informer cache.SharedIndexInformer, items any) {
	switch items := items.(type) {
	case []v1alpha1.ElasticIP:
		replaceItems(f, informer, items)
	case []v1alpha1.ElasticIPAttachment:
		replaceItems(f, informer, items)
	case []v1alpha1.NetworkInterface:
		replaceItems(f, informer, items)
	case []v1alpha1.ExternalNetwork:
		replaceItems(f, informer, items)
	}
}

func (f *fixture) check(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

// sync runs one reconcile and returns when it wants to look again.
func (f *fixture) sync(key string) time.Duration {
	f.t.Helper()
	f.kube.ClearActions()
	f.client.ClearActions()
	after, err := f.c.reconcile(f.ctx, key)
	if err != nil {
		f.t.Fatalf("sync(%s): %v", key, err)
	}
	return after
}

// writes lists "verb resource" of the write actions of the last sync, juneau objects
// first (the Pod patch comes last in a sync).
func (f *fixture) writes() []string {
	var out []string
	for _, a := range append(f.client.Actions(), f.kube.Actions()...) {
		switch a.GetVerb() {
		case "get", "list", "watch":
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

// events drains the recorded Events as "Type Reason Message".
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

func (f *fixture) expectWrites(want ...string) {
	f.t.Helper()
	if got := f.writes(); !slices.Equal(got, want) {
		f.t.Errorf("writes = %q, want %q", got, want)
	}
}

// expectEvents checks the Events since the last call by type and reason, and that
// each message contains the given fragments.
func (f *fixture) expectEvents(want ...string) []string {
	f.t.Helper()
	got := f.events()
	var kinds []string
	for _, e := range got {
		parts := strings.SplitN(e, " ", 3)
		kinds = append(kinds, parts[0]+" "+parts[1])
	}
	if !slices.Equal(kinds, want) {
		f.t.Errorf("events = %q, want %q", got, want)
	}
	return got
}

func (f *fixture) eip(name string) *v1alpha1.ElasticIP {
	f.t.Helper()
	e, err := f.client.JuneauV1alpha1().ElasticIPs(testNS).Get(f.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	f.check(err)
	return e
}

// pick records the attachment as the ElasticIP's user, as the ElasticIP controller would,
// and refreshes the caches.
func (f *fixture) pick(eipName, attachment string) {
	f.t.Helper()
	a, err := f.client.JuneauV1alpha1().ElasticIPAttachments(testNS).Get(f.ctx, attachment, metav1.GetOptions{})
	f.check(err)
	if a.UID == "" { // the fake API server assigns none
		a.UID = types.UID("att-uid-" + attachment)
		a, err = f.client.JuneauV1alpha1().ElasticIPAttachments(testNS).Update(f.ctx, a, metav1.UpdateOptions{})
		f.check(err)
	}
	eip := f.eip(eipName)
	heldBy(a)(eip)
	_, err = f.client.JuneauV1alpha1().ElasticIPs(testNS).UpdateStatus(f.ctx, eip, metav1.UpdateOptions{})
	f.check(err)
	f.refresh()
}

// expectCondition checks the Pod's juneau.loutres.me/elastic-ip-assigned condition.
func (f *fixture) expectCondition(pod string, want corev1.ConditionStatus, reason, message string) {
	f.t.Helper()
	p, err := f.kube.CoreV1().Pods(testNS).Get(f.ctx, pod, metav1.GetOptions{})
	f.check(err)
	c := status.PodCondition(p, v1alpha1.PodConditionElasticIPAssigned)
	if c == nil || c.Status != want || c.Reason != reason || !strings.Contains(c.Message, message) {
		f.t.Errorf("condition %s of Pod %s = %+v, want %s/%s with %q", v1alpha1.PodConditionElasticIPAssigned, pod, c, want, reason, message)
	}
}

func (f *fixture) createNIC(pod *corev1.Pod) {
	_, err := f.client.JuneauV1alpha1().NetworkInterfaces(testNS).Create(f.ctx, nicOf(pod), metav1.CreateOptions{})
	f.check(err)
}

// TestSyncFollowLifecycle: allocate, attach once the NIC is there, write the address
// back, then detach and release when the Pod is gone.
func TestSyncFollowLifecycle(t *testing.T) {
	pod := newPod("web", withEIP("ext-net", v1alpha1.AnnotationEIPBandwidth, "20"))
	f := newFixture(t, nil, pod, network("ext-net", false))
	key := testNS + "/web"

	f.sync(key)
	f.expectWrites("create elasticips")
	f.expectEvents("Normal " + v1alpha1.EventElasticIPCreated)
	eip := f.eip("web")
	if eip.Labels[v1alpha1.LabelPod] != "web" || eip.Spec.ExternalNetwork != "ext-net" || *eip.Spec.BandwidthMbps != 20 ||
		owner(eip.OwnerReferences) != "uid-web" || eip.Annotations[v1alpha1.AnnotationReleaseStrategy] != "Follow" {
		t.Errorf("created ElasticIP = %+v", eip)
	}

	f.refresh()
	f.sync(key)
	f.expectWrites() // waiting for the NIC
	f.createNIC(pod)
	f.refresh()
	f.sync(key)
	f.expectWrites("create elasticipattachments")
	f.expectEvents("Normal " + v1alpha1.EventAttachmentCreated)

	eip.Status.Address = "10.225.51.5"
	_, err := f.client.JuneauV1alpha1().ElasticIPs(testNS).UpdateStatus(f.ctx, eip, metav1.UpdateOptions{})
	f.check(err)
	f.refresh()
	f.sync(key)
	f.expectWrites() // an address, but the ElasticIP has not picked the attachment yet
	f.pick("web", "web")
	f.sync(key)
	f.expectWrites("patch pods", "patch pods/status")
	f.expectEvents("Normal " + v1alpha1.EventAllocated)
	f.expectCondition("web", corev1.ConditionTrue, v1alpha1.ReasonAssigned, `ElasticIP "web" (10.225.51.5) is attached to this Pod by NAT through ElasticIPAttachment "web"`)
	patch := string(f.kube.Actions()[len(f.kube.Actions())-2].(clienttesting.PatchAction).GetPatch())
	if !strings.Contains(patch, `"uid":"uid-web"`) {
		t.Errorf("patch %s is not guarded by the Pod's UID", patch)
	}
	got, err := f.kube.CoreV1().Pods(testNS).Get(f.ctx, "web", metav1.GetOptions{})
	f.check(err)
	if got.Annotations[v1alpha1.AnnotationAllocatedEIPName] != "web" || got.Annotations[v1alpha1.AnnotationAllocatedEIPAddr] != "10.225.51.5" ||
		got.Annotations[v1alpha1.AnnotationPodWithEIP] != "true" {
		t.Errorf("Pod annotations = %v", got.Annotations)
	}
	f.refresh()
	f.sync(key)
	f.expectWrites() // steady

	f.check(f.kube.CoreV1().Pods(testNS).Delete(f.ctx, "web", metav1.DeleteOptions{}))
	f.refresh()
	f.sync(key)
	f.expectWrites("delete elasticipattachments")
	f.refresh()
	f.sync(key)
	f.expectWrites("delete elasticips")
	evs := f.expectEvents("Normal "+v1alpha1.EventAttachmentDeleted, "Normal "+v1alpha1.EventReleased)
	if len(evs) == 2 && !strings.Contains(evs[1], "release strategy Follow") {
		t.Errorf("release event %q does not give the strategy", evs[1])
	}
	if f.eip("web") != nil {
		t.Error("ElasticIP not released")
	}
}

// TestSyncDelayedReleaseSurvivesRestart: the gone-since mark is written once; a new
// controller (a restart) reads it and waits only for the rest of the delay.
func TestSyncDelayedReleaseSurvivesRestart(t *testing.T) {
	sts := newPod("db-0", withEIP("ext-net"), ownedBy("apps/v1", "StatefulSet"))
	clock := clocktesting.NewFakeClock(t0)
	f := newFixture(t, clock, ownEIP(sts, "10m0s", address("10.225.51.7")), ownAttachment(sts, "db-0"))
	key := testNS + "/db-0"

	if after := f.sync(key); after != 10*time.Minute {
		t.Errorf("requeue after %v, want 10m", after)
	}
	f.expectWrites("delete elasticipattachments", "patch elasticips")
	f.expectEvents("Normal "+v1alpha1.EventAttachmentDeleted, "Normal "+v1alpha1.EventReleaseScheduled)
	if got := f.eip("db-0").Annotations[v1alpha1.AnnotationPodGoneSince]; got != "2026-03-04T05:06:07Z" {
		t.Errorf("gone-since = %q", got)
	}

	f.refresh()
	clock.Step(4 * time.Minute)
	if after := f.sync(key); after != 6*time.Minute {
		t.Errorf("requeue after %v, want 6m", after)
	}
	f.expectWrites()

	// A restart: a new controller over the same API state.
	eip := f.eip("db-0")
	f = newFixture(t, clock, eip)
	if after := f.sync(key); after != 6*time.Minute {
		t.Errorf("after restart: requeue after %v, want 6m", after)
	}
	f.expectWrites()
	clock.Step(6 * time.Minute)
	if after := f.sync(key); after != 0 {
		t.Errorf("requeue after %v once released", after)
	}
	f.expectWrites("delete elasticips")
	f.expectEvents("Normal " + v1alpha1.EventReleased)
}

// TestSyncStatefulPodComesBack: a re-created Pod of the same name gets its ElasticIP
// back, the mark is cleared and a new attachment is made for it.
func TestSyncStatefulPodComesBack(t *testing.T) {
	old := newPod("db-0", withEIP("ext-net"), ownedBy("apps.kruise.io/v1beta1", "StatefulSet"))
	back := newPod("db-0", withEIP("ext-net"), ownedBy("apps.kruise.io/v1beta1", "StatefulSet"), withUID("uid-db-0-2"))
	f := newFixture(t, nil, back, nicOf(back), ownAttachment(old, "db-0"),
		ownEIP(old, "10m0s", address("10.225.51.7"), goneSince("2026-03-04T05:00:00Z")))
	key := testNS + "/db-0"

	f.sync(key)
	f.expectWrites("delete elasticipattachments", "patch elasticips")
	f.expectEvents("Normal "+v1alpha1.EventAttachmentDeleted, "Normal "+v1alpha1.EventReleaseCancelled)
	eip := f.eip("db-0")
	if _, ok := eip.Annotations[v1alpha1.AnnotationPodGoneSince]; ok || eip.Annotations[v1alpha1.AnnotationReleaseStrategy] != "10m0s" {
		t.Errorf("annotations = %v", eip.Annotations)
	}
	f.refresh()
	f.sync(key)
	f.expectWrites("create elasticipattachments")
	a, err := f.client.JuneauV1alpha1().ElasticIPAttachments(testNS).Get(f.ctx, "db-0", metav1.GetOptions{})
	f.check(err)
	if owner(a.OwnerReferences) != "uid-db-0-2" || a.Spec.ElasticIPRef.Name != "db-0" {
		t.Errorf("attachment = %+v", a)
	}
	f.expectEvents("Normal " + v1alpha1.EventAttachmentCreated)
	f.refresh()
	f.pick("db-0", "db-0")
	f.sync(key)
	f.expectWrites("patch pods", "patch pods/status")
	f.expectEvents("Normal " + v1alpha1.EventAllocated)
}

// TestSyncNeverTakesOver: a user's ElasticIP of the wanted name is reported once and
// left alone; once it is gone the Pod gets its own.
func TestSyncNeverTakesOver(t *testing.T) {
	pod := newPod("web", withEIP("ext-net"))
	user := userEIP("web", address("10.225.51.9"))
	f := newFixture(t, nil, pod, nicOf(pod), user, network("ext-net", false))
	key := testNS + "/web"

	f.sync(key)
	f.expectWrites("patch pods/status")
	evs := f.expectEvents("Warning " + v1alpha1.EventElasticIPNameTaken)
	if len(evs) == 1 && !strings.Contains(evs[0], `ElasticIP "web"`) {
		t.Errorf("event %q", evs[0])
	}
	f.expectCondition("web", corev1.ConditionFalse, v1alpha1.EventElasticIPNameTaken, `ElasticIP "web" exists and was not made for this Pod`)
	f.refresh()
	f.sync(key)
	f.expectWrites()
	f.expectEvents() // reported once

	f.check(f.client.JuneauV1alpha1().ElasticIPs(testNS).Delete(f.ctx, "web", metav1.DeleteOptions{}))
	f.refresh()
	f.sync(key)
	f.expectWrites("create elasticips", "patch pods/status") // the condition follows: being created
	if got, _ := f.kube.CoreV1().Pods(testNS).Get(f.ctx, "web", metav1.GetOptions{}); got.Annotations[v1alpha1.AnnotationAllocatedEIPAddr] != "" {
		t.Error("the user's address was written back")
	}
}

// TestSyncFailureEvent: a write the API server refuses for good (the webhook's denial)
// is not retried with back-off: a Warning Event once and the Pod's condition say so
// and what to fix, and the key is looked at again after a minute. A write that failed
// for a passing reason is retried, and its Event says so.
func TestSyncFailureEvent(t *testing.T) {
	pod := newPod("web", withEIP("ext-net"))
	f := newFixture(t, nil, pod, network("ext-net", false))
	f.client.PrependReactor("create", "elasticips", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(v1alpha1.Resource("elasticips"), "web", errString("denied by the webhook"))
	})
	for range 2 {
		if after, err := f.c.reconcile(f.ctx, testNS+"/web"); err != nil || after != time.Minute {
			t.Errorf("reconcile: after %v, error %v; want a look again in a minute and no retry", after, err)
		}
		f.refresh()
	}
	evs := f.expectEvents("Warning " + v1alpha1.ReasonWriteRefused)
	if len(evs) == 1 && (!strings.Contains(evs[0], "denied by the webhook") || !strings.Contains(evs[0], "not retried")) {
		t.Errorf("event %q", evs[0])
	}
	f.expectCondition("web", corev1.ConditionFalse, v1alpha1.ReasonWriteRefused, `Creating ElasticIP "web" was refused by the API server`)

	f = newFixture(t, nil, pod, network("ext-net", false))
	f.client.PrependReactor("create", "elasticips", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd is slow")
	})
	if _, err := f.c.reconcile(f.ctx, testNS+"/web"); err == nil {
		t.Error("no error: a passing failure would not be retried")
	}
	evs = f.expectEvents("Warning " + v1alpha1.EventFailedCreate)
	if len(evs) == 1 && !strings.Contains(evs[0], "it is retried") {
		t.Errorf("event %q does not say it is retried", evs[0])
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// TestSyncNamedElasticIP: pod-eip-name attaches the named ElasticIP and never deletes it.
func TestSyncNamedElasticIP(t *testing.T) {
	pod := newPod("app", auto(v1alpha1.AliasPodEIPInstance, "shared"))
	f := newFixture(t, nil, pod, nicOf(pod))
	key := testNS + "/app"
	f.sync(key)
	f.expectWrites("patch pods/status")
	f.expectEvents("Warning " + v1alpha1.EventElasticIPNotFound)

	_, err := f.client.JuneauV1alpha1().ElasticIPs(testNS).Create(f.ctx, userEIP("shared", address("10.225.51.9")), metav1.CreateOptions{})
	f.check(err)
	f.refresh()
	if keys := f.c.elasticIPKeys(userEIP("shared")); !slices.Equal(keys, []string{testNS + "/shared", key}) {
		t.Errorf("keys of the named ElasticIP = %q", keys)
	}
	f.sync(key)
	f.expectWrites("create elasticipattachments", "patch pods/status")
	f.refresh()
	f.pick("shared", "app")
	f.sync(key)
	f.expectWrites("patch pods", "patch pods/status")

	f.check(f.kube.CoreV1().Pods(testNS).Delete(f.ctx, "app", metav1.DeleteOptions{}))
	f.refresh()
	f.sync(key)
	f.expectWrites("delete elasticipattachments")
	f.refresh()
	f.sync(key)
	f.expectWrites()
	if f.eip("shared") == nil {
		t.Error("the named ElasticIP was deleted")
	}
}

func TestEventKeys(t *testing.T) {
	f := newFixture(t, nil,
		newPod("a", auto(v1alpha1.AnnotationPodEIPName, "shared")),
		newPod("b", withEIP("")),
		newPod("c", nil),
		newPod("d", auto(v1alpha1.AnnotationPodWithEIP, "false")),
	)
	if got := f.c.elasticIPKeys(userEIP("b")); !slices.Equal(got, []string{"ns/b"}) {
		t.Errorf("ElasticIP keys = %q", got)
	}
	if got := attachmentKeys(userAttachment("x", "y", "z.eth0")); !slices.Equal(got, []string{"ns/x", "ns/y"}) {
		t.Errorf("attachment keys = %q", got)
	}
	nic := nicOf(newPod("a", nil))
	if got := nicKeys(nic); !slices.Equal(got, []string{"ns/a"}) {
		t.Errorf("NIC keys = %q", got)
	}
	nic.Spec.PodRef.Interface = "ext0"
	if got := nicKeys(nic); len(got) != 0 {
		t.Errorf("extra NIC keys = %q", got)
	}
	if got := f.c.allocatingKeys(); !slices.Equal(got, []string{"ns/b"}) {
		t.Errorf("allocating keys = %q", got)
	}
}

// TestSyncDualStack: a Pod asking for both families gets an IPv4 and an IPv6 ElasticIP,
// an attachment of each, both addresses written back under their own keys, and its
// condition True naming both.
func TestSyncDualStack(t *testing.T) {
	pod := newPod("web", withEIP("ext-net", v1alpha1.AnnotationPodEIPIPFamilies, "IPv4,IPv6"))
	f := newFixture(t, nil, pod, nicOf(pod), network("ext-net", false))
	key := testNS + "/web"
	f.sync(key)
	f.expectWrites("create elasticips", "create elasticips")
	if e := f.eip("web-ipv6"); e == nil || e.Spec.IPFamily != v1alpha1.IPv6 || e.Labels[v1alpha1.LabelPod] != "web" {
		t.Fatalf("IPv6 ElasticIP %+v", e)
	}
	for name, addr := range map[string]string{"web": "10.225.51.5", "web-ipv6": "fd00:225:51::5"} {
		e := f.eip(name)
		e.Status.Address = addr
		_, err := f.client.JuneauV1alpha1().ElasticIPs(testNS).UpdateStatus(f.ctx, e, metav1.UpdateOptions{})
		f.check(err)
	}
	f.refresh()
	f.sync(key)
	f.expectWrites("create elasticipattachments", "create elasticipattachments")
	f.refresh()
	f.pick("web", "web")
	f.pick("web-ipv6", "web-ipv6")
	f.sync(key)
	f.expectWrites("patch pods", "patch pods/status")
	got, err := f.kube.CoreV1().Pods(testNS).Get(f.ctx, "web", metav1.GetOptions{})
	f.check(err)
	if got.Annotations[v1alpha1.AnnotationAllocatedEIPAddr] != "10.225.51.5" || got.Annotations[v1alpha1.AnnotationAllocatedEIPName] != "web" ||
		got.Annotations[v1alpha1.AnnotationAllocatedEIPAddr6] != "fd00:225:51::5" || got.Annotations[v1alpha1.AnnotationAllocatedEIPName6] != "web-ipv6" {
		t.Errorf("annotations %v", got.Annotations)
	}
	f.expectCondition("web", corev1.ConditionTrue, v1alpha1.ReasonAssigned, `ElasticIP "web-ipv6" (fd00:225:51::5) is attached to this Pod by NAT through ElasticIPAttachment "web-ipv6"`)
	f.refresh()
	f.sync(key)
	f.expectWrites()
}
