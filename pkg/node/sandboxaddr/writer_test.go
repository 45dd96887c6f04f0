package sandboxaddr

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned/fake"
	listers "github.com/loutres/juneau/pkg/generated/listers/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/node/cniserver"
)

func nic(pod, uid, node, eip string) *v1alpha1.NetworkInterface {
	return &v1alpha1.NetworkInterface{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: v1alpha1.NetworkInterfaceName(pod, v1alpha1.DefaultInterface), UID: types.UID("nic-" + uid)},
		Spec: v1alpha1.NetworkInterfaceSpec{NodeName: node, ElasticIP: eip,
			PodRef: v1alpha1.PodReference{Name: pod, UID: uid, Interface: v1alpha1.DefaultInterface}},
	}
}

// fixture is a Writer for node-a over caches the test fills, whose writes go to a fake
// API holding the same NetworkInterfaces.
type fixture struct {
	w    *Writer
	nics cache.Indexer
	pods cache.Indexer
	api  *fake.Clientset
	ctx  context.Context
	// later is how far the Writer's clock is ahead of the real one.
	later atomic.Int64
}

func newFixture(t *testing.T, objs ...*v1alpha1.NetworkInterface) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	f := &fixture{
		nics: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		pods: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		api:  fake.NewClientset(),
		ctx:  ctx,
	}
	f.w = New("node-a", f.api, listers.NewNetworkInterfaceLister(f.nics), corelisters.NewPodLister(f.pods), nil)
	for _, n := range objs {
		f.addNIC(t, n)
	}
	f.w.now = func() time.Time { return time.Now().Add(time.Duration(f.later.Load())) }
	done := make(chan struct{})
	go func() { f.w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

// addNIC puts the NetworkInterface into the API and the cache, and hands the Writer
// its event, as the controller's creation reaches all three.
func (f *fixture) addNIC(t *testing.T, n *v1alpha1.NetworkInterface) {
	t.Helper()
	if _, err := f.api.JuneauV1alpha1().NetworkInterfaces(n.Namespace).Create(f.ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.nics.Add(n); err != nil {
		t.Fatal(err)
	}
	f.w.handler().OnAdd(n, false)
}

// deleteNIC removes the NetworkInterface from the API and the cache, with its event.
func (f *fixture) deleteNIC(t *testing.T, n *v1alpha1.NetworkInterface) {
	t.Helper()
	if err := f.api.JuneauV1alpha1().NetworkInterfaces(n.Namespace).Delete(f.ctx, n.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.nics.Delete(n); err != nil {
		t.Fatal(err)
	}
	f.w.handler().OnDelete(n)
}

func (f *fixture) report(t *testing.T, pod, uid string, addrs ...string) {
	t.Helper()
	if err := f.w.Plumbed(f.ctx, cniserver.Plumbing{Namespace: "default", Pod: pod, UID: types.UID(uid), Addresses: addrs}); err != nil {
		t.Fatal(err)
	}
}

// sandboxAddresses are what the API holds for the Pod's eth0 NetworkInterface.
func (f *fixture) sandboxAddresses(t *testing.T, pod string) []string {
	t.Helper()
	n, err := f.api.JuneauV1alpha1().NetworkInterfaces("default").Get(f.ctx, v1alpha1.NetworkInterfaceName(pod, v1alpha1.DefaultInterface), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Status.SandboxAddresses
}

func (f *fixture) waitFor(t *testing.T, pod string, want []string) {
	t.Helper()
	var got []string
	err := wait.PollUntilContextTimeout(f.ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got = f.sandboxAddresses(t, pod)
		return slices.Equal(got, want), nil
	})
	if err != nil {
		t.Fatalf("NetworkInterface of %s: sandboxAddresses %v, want %v", pod, got, want)
	}
}

// idle waits until the Writer has nothing pending, then says how many writes it made.
func (f *fixture) idle(t *testing.T) int {
	t.Helper()
	err := wait.PollUntilContextTimeout(f.ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		f.w.mu.Lock()
		defer f.w.mu.Unlock()
		return len(f.w.pending) == 0 && f.w.loop.Loop.Len() == 0, nil
	})
	if err != nil {
		t.Fatalf("the writer never went idle: %d reports pending", len(f.w.pending))
	}
	writes := 0
	for _, a := range f.api.Actions() {
		if a.GetVerb() == "patch" && a.GetSubresource() == "status" {
			writes++
		}
	}
	return writes
}

// TestWritesTheReportedAddresses: a Pod's report is written into its eth0
// NetworkInterface, one address per family, IPv4 first, with juneau-node as manager.
func TestWritesTheReportedAddresses(t *testing.T) {
	f := newFixture(t, nic("web", "pod-1", "node-a", ""))
	f.report(t, "web", "pod-1", "fd00:244::5", "not-an-address", "10.244.1.5", "10.244.1.6")
	f.waitFor(t, "web", []string{"10.244.1.5", "fd00:244::5"})
	if n := f.idle(t); n != 1 {
		t.Errorf("%d status writes, want 1", n)
	}
	// The same report again writes nothing: the cache holds it already.
	got, err := f.api.JuneauV1alpha1().NetworkInterfaces("default").Get(f.ctx, "web.eth0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.nics.Update(got); err != nil {
		t.Fatal(err)
	}
	f.report(t, "web", "pod-1", "10.244.1.5", "fd00:244::5")
	if n := f.idle(t); n != 1 {
		t.Errorf("%d status writes after the same report again, want 1", n)
	}
}

// TestWaitsForTheNetworkInterface: a report that comes before the Pod's
// NetworkInterface (or while the cache holds an earlier Pod's of the same name) is
// written once the Pod's own is there.
func TestWaitsForTheNetworkInterface(t *testing.T) {
	f := newFixture(t, nic("db", "earlier-pod", "node-a", ""))
	f.report(t, "web", "pod-1", "10.244.1.5")
	f.report(t, "db", "pod-2", "10.244.1.7")
	f.addNIC(t, nic("web", "pod-1", "node-a", ""))
	f.waitFor(t, "web", []string{"10.244.1.5"})
	f.deleteNIC(t, nic("db", "earlier-pod", "node-a", ""))
	f.addNIC(t, nic("db", "pod-2", "node-a", ""))
	f.waitFor(t, "db", []string{"10.244.1.7"})
}

// TestWritesNothingUseless: nothing is written for a Pod the kubelet already reported
// IPs for, a direct eth0 (it carries an ElasticIP), or another Node's Pod.
func TestWritesNothingUseless(t *testing.T) {
	f := newFixture(t, nic("reported", "pod-1", "node-a", ""), nic("direct", "pod-2", "node-a", "web-eip"), nic("elsewhere", "pod-3", "node-b", ""))
	if err := f.pods.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "reported", UID: "pod-1"},
		Status: corev1.PodStatus{PodIP: "10.244.1.5", PodIPs: []corev1.PodIP{{IP: "10.244.1.5"}}}}); err != nil {
		t.Fatal(err)
	}
	f.report(t, "reported", "pod-1", "10.244.1.5")
	f.report(t, "direct", "pod-2", "10.244.1.6")
	f.report(t, "elsewhere", "pod-3", "10.244.1.7")
	f.report(t, "no-address", "pod-4")
	if n := f.idle(t); n != 0 {
		t.Errorf("%d status writes, want none", n)
	}
}

// TestUnplumbedForgets: a Pod whose sandbox is torn down before its NetworkInterface
// came is forgotten; nothing is written for it later.
func TestUnplumbedForgets(t *testing.T) {
	f := newFixture(t)
	f.report(t, "web", "pod-1", "10.244.1.5")
	if err := f.w.Unplumbed(f.ctx, cniserver.Plumbing{Namespace: "default", Pod: "web", UID: "pod-1"}); err != nil {
		t.Fatal(err)
	}
	if n := f.idle(t); n != 0 {
		t.Errorf("%d status writes, want none", n)
	}
	f.addNIC(t, nic("web", "pod-1", "node-a", ""))
	if n := f.idle(t); n != 0 || len(f.sandboxAddresses(t, "web")) != 0 {
		t.Errorf("%d status writes, sandboxAddresses %v: want none", n, f.sandboxAddresses(t, "web"))
	}
}

// TestGivesUp: a report whose NetworkInterface did not come within giveUp is dropped;
// the NetworkInterface coming later gets nothing.
func TestGivesUp(t *testing.T) {
	f := newFixture(t)
	f.report(t, "web", "pod-1", "10.244.1.5")
	f.later.Store(int64(giveUp))
	f.w.loop.Loop.Add("default/web") // as the report's own retry at giveUp does
	if n := f.idle(t); n != 0 {
		t.Errorf("%d status writes, want none", n)
	}
	f.addNIC(t, nic("web", "pod-1", "node-a", ""))
	if n := f.idle(t); n != 0 || len(f.sandboxAddresses(t, "web")) != 0 {
		t.Errorf("%d status writes, sandboxAddresses %v: want none", n, f.sandboxAddresses(t, "web"))
	}
}
