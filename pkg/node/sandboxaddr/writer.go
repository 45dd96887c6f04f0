// Package sandboxaddr writes the addresses a Pod's sandbox got into the Pod's eth0
// NetworkInterface (status.sandboxAddresses), from the juneau CNI plugin's report at the
// end of its ADD, so that the controller attaches the Pod's ElasticIPs before the kubelet
// reports the Pod's IPs (docs/reference.md#networkinterface).
//
// The kubelet reports a Pod's IPs at its next look at the Pod after its containers
// started, and a Pod whose readiness gate turns True after that report is Ready only at
// the kubelet's look after that: about a second later (its relisting of the containers).
// With the addresses written from the CNI ADD, the gate is True in most cases by the time
// of the report that carries the IPs, and the Pod is Ready in it.
//
// What is written is best effort: a report the Writer cannot write (the NetworkInterface
// not created within giveUp, an API error) is dropped, and the controller goes on from
// the kubelet's report as without it.
package sandboxaddr

import (
	"context"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/podaddr"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	applyv1alpha1 "github.com/loutres/juneau/pkg/generated/applyconfiguration/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	listers "github.com/loutres/juneau/pkg/generated/listers/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/node/cniserver"
	"github.com/loutres/juneau/pkg/status"
)

// giveUp is how long a report waits for its NetworkInterface to reach the cache (the
// controller makes it when the Pod is scheduled, so it is there before the sandbox in
// all but a busy cluster's cases) before it is dropped.
const giveUp = 30 * time.Second

// Writer is the cniserver.Observer that writes the reported addresses.
type Writer struct {
	node   string
	status status.NetworkInterfaceWriter
	nics   listers.NetworkInterfaceLister
	pods   corelisters.PodLister
	now    func() time.Time
	queue  workqueue.TypedRateLimitingInterface[types.NamespacedName]

	mu      sync.Mutex
	pending map[types.NamespacedName]report
}

// report is the newest report of one Pod (by namespace and name).
type report struct {
	uid   types.UID
	addrs []string
	at    time.Time
}

// New makes a Writer for the Pods of node, reading NetworkInterfaces and Pods from the
// agent's caches (both of this Node).
func New(node string, client versioned.Interface, nics listers.NetworkInterfaceLister, pods corelisters.PodLister) *Writer {
	return &Writer{
		node: node, status: status.NetworkInterfaces(client, v1alpha1.FieldManagerNode, nil), nics: nics, pods: pods, now: time.Now,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](5*time.Millisecond, time.Second),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "sandboxaddr"}),
		pending: map[types.NamespacedName]report{},
	}
}

// Plumbed takes the Pod's addresses of a report (cniserver.Observer); it never fails the
// plugin's ADD.
func (w *Writer) Plumbed(ctx context.Context, p cniserver.Plumbing) error {
	addrs := Addresses(p.Addresses)
	if len(addrs) == 0 || p.UID == "" {
		return nil
	}
	k := types.NamespacedName{Namespace: p.Namespace, Name: p.Pod}
	w.mu.Lock()
	w.pending[k] = report{uid: p.UID, addrs: addrs, at: w.now()}
	w.mu.Unlock()
	w.queue.Add(k)
	return nil
}

// Unplumbed forgets what the Pod's sandbox reported: it is gone (cniserver.Observer).
func (w *Writer) Unplumbed(_ context.Context, p cniserver.Plumbing) error {
	k := types.NamespacedName{Namespace: p.Namespace, Name: p.Pod}
	w.mu.Lock()
	if r, ok := w.pending[k]; ok && (p.UID == "" || r.uid == p.UID) {
		delete(w.pending, k)
	}
	w.mu.Unlock()
	return nil
}

// Addresses are the addresses of reported as the runtime reports a Pod's IPs
// (podaddr.FirstPerFamily), in their string form.
func Addresses(reported []string) []string {
	var out []string
	for _, a := range podaddr.FirstPerFamily(reported) {
		out = append(out, a.String())
	}
	return out
}

// Run writes the reports until ctx ends, one at a time.
func (w *Writer) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		w.queue.ShutDown()
	}()
	for {
		k, quit := w.queue.Get()
		if quit {
			return
		}
		retry := w.write(ctx, k)
		switch {
		case retry:
			w.queue.AddRateLimited(k)
		default:
			w.queue.Forget(k)
		}
		w.queue.Done(k)
	}
}

// write writes one Pod's newest report; it says whether to try again later.
func (w *Writer) write(ctx context.Context, k types.NamespacedName) bool {
	w.mu.Lock()
	r, ok := w.pending[k]
	w.mu.Unlock()
	if !ok {
		return false
	}
	logger := klog.FromContext(ctx).WithValues("pod", klog.KRef(k.Namespace, k.Name), "addresses", r.addrs)
	retry, err := w.apply(ctx, k, r)
	if err != nil {
		logger.Info("Could not write the Pod's sandbox addresses into its NetworkInterface", "err", err)
	}
	if retry && w.now().Sub(r.at) < giveUp {
		return true
	}
	if retry {
		logger.V(2).Info("Dropped the Pod's sandbox addresses: its NetworkInterface did not come", "waited", giveUp)
	}
	w.mu.Lock()
	if cur, ok := w.pending[k]; ok && cur.at.Equal(r.at) {
		delete(w.pending, k)
	}
	w.mu.Unlock()
	return false
}

// apply writes r into the Pod's eth0 NetworkInterface when that is still useful: the
// NetworkInterface is this Pod's (by UID), of this Node, not a direct one, the kubelet has
// not reported the Pod's IPs yet, and it does not hold them already.
func (w *Writer) apply(ctx context.Context, k types.NamespacedName, r report) (retry bool, err error) {
	if pod, err := w.pods.Pods(k.Namespace).Get(k.Name); err == nil && pod.UID == r.uid && (pod.Status.PodIP != "" || len(pod.Status.PodIPs) > 0) {
		return false, nil
	}
	name := v1alpha1.NetworkInterfaceName(k.Name, v1alpha1.DefaultInterface)
	nic, err := w.nics.NetworkInterfaces(k.Namespace).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return true, err
	case nic.Spec.PodRef.UID != string(r.uid):
		// An earlier Pod's, or this Pod's is not in the cache yet.
		return true, nil
	case nic.Spec.NodeName != w.node, nic.Spec.ElasticIP != "", slices.Equal(nic.Status.SandboxAddresses, r.addrs):
		return false, nil
	}
	// The writer applies with the NetworkInterface's UID: one deleted or replaced by
	// another of the name since the cache saw it is not written (nor retried).
	apply := applyv1alpha1.NetworkInterface(name, k.Namespace).
		WithStatus(applyv1alpha1.NetworkInterfaceStatus().WithSandboxAddresses(r.addrs...))
	if _, err := w.status.Write(ctx, nic, apply, nil, nil, "sandboxAddresses", r.addrs); err != nil {
		return true, err
	}
	return false, nil
}
