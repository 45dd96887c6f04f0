package attachment

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
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

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	f := &fixture{
		t: t, ctx: ctx,
		client:   fake.NewClientset(objs...),
		recorder: record.NewFakeRecorder(100),
		clock:    clocktesting.NewFakeClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)),
	}
	factory := externalversions.NewSharedInformerFactory(f.client, 0)
	f.inf = Informers{
		Attachments:       factory.Juneau().V1alpha1().ElasticIPAttachments(),
		ElasticIPs:        factory.Juneau().V1alpha1().ElasticIPs(),
		NetworkInterfaces: factory.Juneau().V1alpha1().NetworkInterfaces(),
	}
	c, err := NewController(f.client, f.inf, f.recorder, Options{Clock: f.clock})
	if err != nil {
		t.Fatalf("NewController: %v", err)
	}
	f.c = c
	f.refreshCache()
	return f
}

// refreshCache makes the caches hold what the fake API server holds.
func (f *fixture) refreshCache() {
	f.t.Helper()
	api := f.client.JuneauV1alpha1()
	atts, err := api.ElasticIPAttachments("").List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	eips, err := api.ElasticIPs("").List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	nics, err := api.NetworkInterfaces("").List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	var a, e, n []any
	for i := range atts.Items {
		a = append(a, &atts.Items[i])
	}
	for i := range eips.Items {
		e = append(e, &eips.Items[i])
	}
	for i := range nics.Items {
		n = append(n, &nics.Items[i])
	}
	for _, r := range []struct {
		inf  interface{ Replace([]any, string) error }
		objs []any
	}{
		{f.inf.Attachments.Informer().GetIndexer(), a},
		{f.inf.ElasticIPs.Informer().GetIndexer(), e},
		{f.inf.NetworkInterfaces.Informer().GetIndexer(), n},
	} {
		if err := r.inf.Replace(r.objs, ""); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) sync() {
	f.t.Helper()
	f.client.ClearActions()
	if err := f.c.sync(f.ctx, "default/web-nat"); err != nil {
		f.t.Fatalf("sync: %v", err)
	}
}

func (f *fixture) statusWrites() int {
	n := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "patch" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

func (f *fixture) attachment() *v1alpha1.ElasticIPAttachment {
	f.t.Helper()
	a, err := f.client.JuneauV1alpha1().ElasticIPAttachments("default").Get(f.ctx, "web-nat", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return a
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

func TestSyncAttachmentLifecycle(t *testing.T) {
	f := newFixture(t, testAttachment(), testEIP("10.225.51.5"))

	// The NIC does not exist yet: Error, with a Warning.
	f.sync()
	att := f.attachment()
	if att.Status.Phase != v1alpha1.AttachmentError || att.Status.ElasticIP != "10.225.51.5" {
		t.Errorf("status %+v, want Error with the ElasticIP's address", att.Status)
	}
	if ev := f.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+v1alpha1.ReasonMissingNetworkInterface) {
		t.Errorf("events %v", ev)
	}

	// The NIC appears on a node before its Pod has an IP; the ElasticIP picks us.
	if _, err := f.client.JuneauV1alpha1().NetworkInterfaces("default").Create(f.ctx, testNIC("", "node-a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.JuneauV1alpha1().ElasticIPs("default").UpdateStatus(f.ctx, testEIP("10.225.51.5", heldByUs), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.refreshCache()
	f.c.onNIC(testNIC("", "node-a"))
	if f.c.Loop.Len() != 1 {
		t.Errorf("NIC event queued %d keys, want 1", f.c.Loop.Len())
	}
	f.sync()
	att = f.attachment()
	if att.Status.Phase != v1alpha1.AttachmentPending || att.Status.NodeName != "node-a" || att.Status.PodIP != "" {
		t.Errorf("status %+v, want Pending on node-a without a Pod IP", att.Status)
	}

	// The Pod gets its IP.
	nic := testNIC("10.244.1.5/32", "node-a")
	if _, err := f.client.JuneauV1alpha1().NetworkInterfaces("default").UpdateStatus(f.ctx, nic, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.refreshCache()
	f.clock.Step(time.Minute)
	f.sync()
	att = f.attachment()
	ready := meta.FindStatusCondition(att.Status.Conditions, v1alpha1.ConditionReady)
	if att.Status.Phase != v1alpha1.AttachmentAttached || att.Status.PodIP != "10.244.1.5" || ready == nil || ready.Status != metav1.ConditionTrue {
		t.Fatalf("status %+v, want Attached with Pod IP 10.244.1.5", att.Status)
	}
	if !ready.LastTransitionTime.Time.Equal(f.clock.Now()) {
		t.Errorf("lastTransitionTime %v, want %v", ready.LastTransitionTime, f.clock.Now())
	}
	if ev := f.events(); len(ev) == 0 || !strings.HasPrefix(ev[len(ev)-1], "Normal "+v1alpha1.ReasonAttached) {
		t.Errorf("events %v, want Normal Attached last", ev)
	}

	// Nothing changed: nothing written.
	f.refreshCache()
	f.sync()
	if n := f.statusWrites(); n != 0 {
		t.Errorf("idempotent sync wrote status %d times", n)
	}

	// The ElasticIP goes away.
	if err := f.client.JuneauV1alpha1().ElasticIPs("default").Delete(f.ctx, "web-eip", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.refreshCache()
	f.sync()
	att = f.attachment()
	if att.Status.Phase != v1alpha1.AttachmentError || att.Status.ElasticIP != "" || att.Status.PodIP != "10.244.1.5" {
		t.Errorf("status %+v, want Error without the address but with the Pod IP", att.Status)
	}
	if ev := f.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+v1alpha1.ReasonMissingElasticIP) {
		t.Errorf("events %v", ev)
	}
}

func TestElasticIPEventQueuesItsAttachments(t *testing.T) {
	other := testAttachment()
	other.Name, other.Spec.ElasticIPRef.Name = "unrelated", "other-eip"
	f := newFixture(t, testAttachment(), other)
	f.c.onElasticIP(testEIP(""))
	if f.c.Loop.Len() != 1 {
		t.Errorf("queue holds %d keys, want 1", f.c.Loop.Len())
	}
}

func TestSyncOfGoneAttachmentDoesNothing(t *testing.T) {
	f := newFixture(t)
	f.sync()
	if n := len(f.client.Actions()); n != 0 {
		t.Errorf("%d actions for a missing attachment", n)
	}
}
