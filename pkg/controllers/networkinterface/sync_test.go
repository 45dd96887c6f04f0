package networkinterface

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	applyv1alpha1 "github.com/loutres/juneau/pkg/generated/applyconfiguration/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned/fake"
	"github.com/loutres/juneau/pkg/generated/informers/externalversions"
)

type fixture struct {
	t        *testing.T
	ctx      context.Context
	client   *fake.Clientset
	inf      Informers
	recorder *record.FakeRecorder
	clock    *clocktesting.FakeClock
	c        *Controller
}

// newFixture seeds the fake clientset and the informer caches with the same objects.
func newFixture(t *testing.T, pods []*corev1.Pod, objs ...runtime.Object) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	f := &fixture{
		t: t, ctx: ctx,
		client:   fake.NewClientset(objs...),
		recorder: record.NewFakeRecorder(100),
		clock:    clocktesting.NewFakeClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)),
	}
	kubeFactory := kubeinformers.NewSharedInformerFactory(kubefake.NewClientset(), 0)
	factory := externalversions.NewSharedInformerFactory(f.client, 0)
	f.inf = Informers{
		Pods:              kubeFactory.Core().V1().Pods(),
		NetworkInterfaces: factory.Juneau().V1alpha1().NetworkInterfaces(),
		ElasticIPs:        factory.Juneau().V1alpha1().ElasticIPs(),
	}
	// The fake clientset gives created objects no UID; the API server does.
	f.client.PrependReactor("create", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if obj, err := meta.Accessor(action.(clienttesting.CreateAction).GetObject()); err == nil && obj.GetUID() == "" {
			obj.SetUID(types.UID("uid-" + obj.GetName()))
		}
		return false, nil, nil
	})
	c, err := NewController(f.client, f.inf, f.recorder, Options{Clock: f.clock})
	if err != nil {
		t.Fatalf("NewController: %v", err)
	}
	f.c = c
	for _, p := range pods {
		f.setPod(p)
	}
	f.refreshCache()
	return f
}

func (f *fixture) setPod(p *corev1.Pod) {
	if err := f.inf.Pods.Informer().GetIndexer().Update(p); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) deletePod(p *corev1.Pod) {
	if err := f.inf.Pods.Informer().GetIndexer().Delete(p); err != nil {
		f.t.Fatal(err)
	}
}

// refreshCache makes the caches hold what the fake API server holds, as the informers
// would once they caught up.
func (f *fixture) refreshCache() {
	f.t.Helper()
	nics, err := f.client.JuneauV1alpha1().NetworkInterfaces("").List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	var list []any
	for i := range nics.Items {
		list = append(list, &nics.Items[i])
	}
	if err := f.inf.NetworkInterfaces.Informer().GetIndexer().Replace(list, ""); err != nil {
		f.t.Fatal(err)
	}
	eips, err := f.client.JuneauV1alpha1().ElasticIPs("").List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	list = nil
	for i := range eips.Items {
		list = append(list, &eips.Items[i])
	}
	if err := f.inf.ElasticIPs.Informer().GetIndexer().Replace(list, ""); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) sync(key string) {
	f.t.Helper()
	f.client.ClearActions()
	if err := f.c.sync(f.ctx, key); err != nil {
		f.t.Fatalf("sync(%s): %v", key, err)
	}
}

// writes lists the verbs and resources of the write actions of the last sync.
func (f *fixture) writes() []string {
	var out []string
	for _, a := range f.client.Actions() {
		switch a.GetVerb() {
		case "get", "list", "watch":
			continue
		}
		s := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			s += "/" + a.GetSubresource()
		}
		out = append(out, s)
	}
	return out
}

func (f *fixture) nic(name string) *v1alpha1.NetworkInterface {
	f.t.Helper()
	nic, err := f.client.JuneauV1alpha1().NetworkInterfaces("default").Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("get NetworkInterface %s: %v", name, err)
	}
	return nic
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

func readyOf(t *testing.T, nic *v1alpha1.NetworkInterface) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(nic.Status.Conditions, v1alpha1.ConditionReady)
	if c == nil {
		t.Fatalf("NetworkInterface %s has no Ready condition: %+v", nic.Name, nic.Status)
	}
	return *c
}

func runningPod(opts ...podOpt) *corev1.Pod {
	return testPod(append([]podOpt{func(p *corev1.Pod) {
		p.Status.PodIP = "10.244.1.5"
		p.Status.PodIPs = []corev1.PodIP{{IP: "10.244.1.5"}}
	}}, opts...)...)
}

func TestSyncCreatesNICsWithStatus(t *testing.T) {
	// Scheduled, its network not set up yet: the direct NIC comes first, as it must.
	ann := annotated(v1alpha1.AnnotationNetworks, `[{"interface":"ext0","elasticIP":"gw-eip"}]`)
	f := newFixture(t, []*corev1.Pod{testPod(ann)}, testEIP("10.225.51.5"))

	f.sync("default/web")
	want := []string{
		"create networkinterfaces", "create networkinterfaces",
		"patch networkinterfaces/status", "patch networkinterfaces/status",
	}
	if got := f.writes(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("writes %v, want %v", got, want)
	}
	// The Pod gets its IP.
	pod := runningPod(ann)
	f.setPod(pod)
	f.refreshCache()
	f.sync("default/web")
	eth0 := f.nic("web.eth0")
	if eth0.Status.Address != "10.244.1.5/32" || eth0.Status.Phase != v1alpha1.NetworkInterfaceReady {
		t.Errorf("eth0 status %+v, want Ready 10.244.1.5/32", eth0.Status)
	}
	if len(eth0.OwnerReferences) != 1 || eth0.OwnerReferences[0].UID != pod.UID {
		t.Errorf("eth0 ownerReferences %+v", eth0.OwnerReferences)
	}
	ext0 := f.nic("web.ext0")
	if ext0.Spec.ElasticIP != "gw-eip" || ext0.Spec.CreatedAfterPodNetwork {
		t.Errorf("ext0 spec %+v", ext0.Spec)
	}
	if c := readyOf(t, ext0); c.Reason != v1alpha1.ReasonWaitingForElasticIP || ext0.Status.Address != "" {
		t.Errorf("ext0 Ready %+v address %q, want WaitingForElasticIP and no address", c, ext0.Status.Address)
	}

	if ev := f.events(); len(ev) != 0 {
		t.Errorf("events %v: a Vpc NIC getting its address and a first wait are no news", ev)
	}

	// Nothing changed: the next sync writes nothing.
	f.refreshCache()
	f.sync("default/web")
	if got := f.writes(); len(got) != 0 {
		t.Errorf("idempotent sync wrote %v", got)
	}
}

// TestSyncReadsTheSandboxAddresses: before the kubelet reports the Pod's IP, eth0 takes
// its address from the sandbox addresses the node agent wrote, keeps that field (the
// agent's), and the kubelet's report of the same IP writes nothing.
func TestSyncReadsTheSandboxAddresses(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{testPod()})
	f.sync("default/web")
	_, err := f.client.JuneauV1alpha1().NetworkInterfaces("default").ApplyStatus(f.ctx,
		applyv1alpha1.NetworkInterface("web.eth0", "default").WithStatus(applyv1alpha1.NetworkInterfaceStatus().WithSandboxAddresses("10.244.1.5")),
		metav1.ApplyOptions{FieldManager: v1alpha1.FieldManagerNode, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	f.refreshCache()
	f.sync("default/web")
	eth0 := f.nic("web.eth0")
	if eth0.Status.Address != "10.244.1.5/32" || eth0.Status.Phase != v1alpha1.NetworkInterfaceReady ||
		len(eth0.Status.SandboxAddresses) != 1 {
		t.Errorf("eth0 status %+v, want Ready 10.244.1.5/32 with the agent's sandboxAddresses kept", eth0.Status)
	}
	for _, pod := range []*corev1.Pod{testPod(), runningPod()} {
		f.setPod(pod)
		f.refreshCache()
		f.sync("default/web")
		if got := f.writes(); len(got) != 0 {
			t.Errorf("Pod IPs %v: the sync wrote %v, want nothing", pod.Status.PodIPs, got)
		}
	}
}

func TestSyncFollowsTheElasticIPDecision(t *testing.T) {
	pod := testPod(annotated(v1alpha1.AnnotationNetworks, `[{"interface":"ext0","elasticIP":"gw-eip"}]`))
	f := newFixture(t, []*corev1.Pod{pod}, testEIP("10.225.51.5"))
	f.sync("default/web")
	f.refreshCache()
	waitingSince := readyOf(t, f.nic("web.ext0")).LastTransitionTime
	f.events()

	// The ElasticIP controller picks web.ext0: its event wakes the Pod.
	eip := testEIP("10.225.51.5", heldByUID(v1alpha1.AttachmentKindNetworkInterface, "web.ext0", "uid-web.ext0"))
	if _, err := f.client.JuneauV1alpha1().ElasticIPs("default").UpdateStatus(f.ctx, eip, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.refreshCache()
	f.c.onElasticIP(eip)
	if f.c.Loop.Len() != 1 {
		t.Fatalf("ElasticIP event queued %d keys, want the Pod's", f.c.Loop.Len())
	}
	f.clock.Step(time.Minute)
	f.sync("default/web")
	if got := f.writes(); len(got) != 1 || got[0] != "patch networkinterfaces/status" {
		t.Errorf("writes %v, want one status patch", got)
	}
	ext0 := f.nic("web.ext0")
	if ext0.Status.Address != "10.225.51.5/32" || len(ext0.Status.Rules) != 1 || ext0.Status.Rules[0].Table != 0x0ae13305 {
		t.Errorf("ext0 status %+v, want the ElasticIP with its rule", ext0.Status)
	}
	ready := readyOf(t, ext0)
	if ready.Status != metav1.ConditionTrue || ready.LastTransitionTime.Equal(&waitingSince) {
		t.Errorf("Ready %+v, want True with a new transition time", ready)
	}
	if ev := f.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Normal Ready") {
		t.Errorf("events %v, want one Normal Ready", ev)
	}

	// Another NIC takes over: the address goes away again.
	eip = testEIP("10.225.51.5", heldBy(v1alpha1.AttachmentKindNetworkInterface, "other.eth0"))
	if _, err := f.client.JuneauV1alpha1().ElasticIPs("default").UpdateStatus(f.ctx, eip, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.refreshCache()
	f.sync("default/web")
	ext0 = f.nic("web.ext0")
	if ext0.Status.Address != "" || len(ext0.Status.Routes) != 0 || len(ext0.Status.Rules) != 0 {
		t.Errorf("ext0 kept address/routes/rules after losing the ElasticIP: %+v", ext0.Status)
	}
	if ev := f.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning WaitingForElasticIP") {
		t.Errorf("events %v, want one Warning WaitingForElasticIP", ev)
	}
}

func TestSyncDeletesNICsOfGonePod(t *testing.T) {
	pod := runningPod()
	f := newFixture(t, []*corev1.Pod{pod}, existingNIC("web", "eth0", "pod-uid", ""), existingNIC("web", "ext0", "pod-uid", ""))
	f.deletePod(pod)
	f.sync("default/web")
	for _, a := range f.client.Actions() {
		if d, ok := a.(clienttesting.DeleteAction); ok {
			if pre := d.GetDeleteOptions().Preconditions; pre == nil || pre.UID == nil {
				t.Errorf("delete of %s without a UID precondition", d.GetName())
			}
		}
	}
	for _, name := range []string{"web.eth0", "web.ext0"} {
		if _, err := f.client.JuneauV1alpha1().NetworkInterfaces("default").Get(f.ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s still there (err %v)", name, err)
		}
	}
}

func TestSyncTerminatingPodKeepsNICs(t *testing.T) {
	pod := runningPod(deleting)
	f := newFixture(t, []*corev1.Pod{pod}, existingNIC("web", "eth0", "pod-uid", ""), existingNIC("web", "ext0", "pod-uid", "gw-eip"))
	f.sync("default/web")
	for _, w := range f.writes() {
		if !strings.HasSuffix(w, "/status") {
			t.Errorf("terminating Pod caused %q", w)
		}
	}
	f.nic("web.eth0")
	f.nic("web.ext0")
}

func TestSyncReplacesNICsOfEarlierPod(t *testing.T) {
	newPod := runningPod(func(p *corev1.Pod) { p.UID = "new-uid" })
	f := newFixture(t, []*corev1.Pod{newPod}, existingNIC("web", "eth0", "old-uid", ""))

	f.sync("default/web")
	if got := f.writes(); strings.Join(got, ",") != "delete networkinterfaces" {
		t.Fatalf("writes %v, want only the delete of the old NIC", got)
	}
	// The delete event reaches the cache; the next sync makes the new NIC.
	f.refreshCache()
	f.sync("default/web")
	if got := f.nic("web.eth0").Spec.PodRef.UID; got != "new-uid" {
		t.Errorf("web.eth0 belongs to Pod UID %q, want new-uid", got)
	}
}

func TestSyncInvalidAnnotationsWarnOnce(t *testing.T) {
	pod := runningPod(annotated(v1alpha1.AnnotationNetworks, `[{"interface":"ext0"}] trailing`))
	f := newFixture(t, []*corev1.Pod{pod}, existingNIC("web", "eth0", "pod-uid", ""))
	f.sync("default/web")
	for _, w := range f.writes() {
		if !strings.HasSuffix(w, "/status") {
			t.Errorf("Pod with unreadable annotations caused %q", w)
		}
	}
	ev := warnings(f.events())
	if len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+v1alpha1.EventInvalidAnnotations) ||
		!strings.Contains(ev[0], "metadata.annotations[juneau.loutres.me/networks]") {
		t.Fatalf("events %v, want one Warning naming the annotation", ev)
	}
	f.refreshCache()
	f.sync("default/web")
	if ev := warnings(f.events()); len(ev) != 0 {
		t.Errorf("the same problem was reported again: %v", ev)
	}

	// Fixed annotations: NICs are built again, and a new problem would be reported anew.
	fixed := runningPod(annotated(v1alpha1.AnnotationNetworks, `[{"interface":"ext0"}]`))
	f.setPod(fixed)
	f.sync("default/web")
	f.nic("web.ext0")
	f.setPod(pod)
	f.sync("default/web")
	if ev := warnings(f.events()); len(ev) != 1 {
		t.Errorf("warnings after the problem came back: %v", ev)
	}
}

func warnings(events []string) []string {
	var out []string
	for _, e := range events {
		if strings.HasPrefix(e, corev1.EventTypeWarning+" ") {
			out = append(out, e)
		}
	}
	return out
}

func TestSyncWritesNodeNameOnlyWhenMissing(t *testing.T) {
	pod := runningPod(labelled(v1alpha1.LabelKubeVirt, v1alpha1.LabelKubeVirtLauncher, v1alpha1.LabelKubeVirtVMName, "vm1"))
	f := newFixture(t, []*corev1.Pod{pod}, existingNIC("web", "eth0", "pod-uid", ""))
	f.sync("default/web")
	if got := f.nic("web.eth0").Spec.AllocationIdentity; got != "vmi.vm1" {
		t.Errorf("allocationIdentity %q, want vmi.vm1", got)
	}
}

func TestNICEventsQueueThePod(t *testing.T) {
	f := newFixture(t, nil)
	f.c.onNIC(existingNIC("web", "eth0", "pod-uid", ""))
	f.c.onNIC(existingNIC("web", "ext0", "pod-uid", ""))
	if f.c.Loop.Len() != 1 {
		t.Errorf("queue holds %d keys, want 1 (the Pod)", f.c.Loop.Len())
	}
}

// An ElasticIP annotation added to a running Pod (past the webhook) never makes a NIC
// that would be taken for the holder: eth0 stays as the Pod's network was set up, an
// extra direct NIC is made Failed, and the Pod gets one Warning.
func TestSyncAnnotationAddedToRunningPod(t *testing.T) {
	pod := runningPod()
	f := newFixture(t, []*corev1.Pod{pod}, testEIP("10.225.51.5"))
	f.sync("default/web")
	f.refreshCache()
	f.events()

	late := runningPod(annotated(v1alpha1.AnnotationElasticIP, "gw-eip",
		v1alpha1.AnnotationNetworks, `[{"interface":"ext0","elasticIP":"gw-eip2"}]`))
	f.setPod(late)
	f.sync("default/web")
	if got := f.writes(); strings.Join(got, ",") != "create networkinterfaces,patch networkinterfaces/status" {
		t.Errorf("writes %v, want only the creation of web.ext0 and its status", got)
	}
	if eth0 := f.nic("web.eth0"); eth0.Spec.ElasticIP != "" {
		t.Errorf("eth0 became direct: %+v", eth0.Spec)
	}
	ext0 := f.nic("web.ext0")
	if !ext0.Spec.CreatedAfterPodNetwork || ext0.Status.Phase != v1alpha1.NetworkInterfaceFailed ||
		readyOf(t, ext0).Reason != v1alpha1.ReasonPodNetworkAlreadySetUp {
		t.Errorf("ext0 %+v %+v, want marked and Failed", ext0.Spec, ext0.Status)
	}
	ev := warnings(f.events())
	if len(ev) != 2 || !strings.Contains(strings.Join(ev, "\n"), `Warning PodNetworkAlreadySetUp The Pod's network was set up with NetworkInterface "web.eth0"`) {
		t.Errorf("warnings %v, want one on the Pod about eth0 and one on ext0", ev)
	}
	f.refreshCache()
	f.sync("default/web")
	if ev := warnings(f.events()); len(ev) != 0 {
		t.Errorf("reported again: %v", ev)
	}
}
