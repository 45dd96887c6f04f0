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
	"fmt"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/podaddr"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	applyv1alpha1 "github.com/loutres/juneau/pkg/generated/applyconfiguration/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	listers "github.com/loutres/juneau/pkg/generated/listers/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/node/cniserver"
	"github.com/loutres/juneau/pkg/status"
	"github.com/loutres/juneau/pkg/workloop"
)

// giveUp is how long a report waits for its NetworkInterface to reach the cache (the
// controller makes it when the Pod is scheduled, so it is there before the sandbox in
// all but a busy cluster's cases) before it is dropped.
const giveUp = 30 * time.Second

// Writer is the cniserver.Observer that writes the reported addresses: a work loop
// keyed by Pod (namespace/name), fed by the reports and by the events of this Node's
// NetworkInterfaces (WatchNetworkInterfaces), so a report that came before its
// NetworkInterface is written when that comes.
type Writer struct {
	node   string
	status status.NetworkInterfaceWriter
	nics   listers.NetworkInterfaceLister
	pods   corelisters.PodLister
	now    func() time.Time
	loop   *workloop.Controller

	mu      sync.Mutex
	pending map[string]report
}

// report is the newest report of one Pod.
type report struct {
	uid   types.UID
	addrs []string
	at    time.Time
}

// New makes a Writer for the Pods of node, reading NetworkInterfaces and Pods from the
// agent's caches (both of this Node), its queue's metrics reported to queues (may be
// nil). It is run by Run, after Watch of the NetworkInterfaces' informer.
func New(node string, client versioned.Interface, nics listers.NetworkInterfaceLister, pods corelisters.PodLister, queues workqueue.MetricsProvider) *Writer {
	w := &Writer{
		node: node, status: status.NetworkInterfaces(client, v1alpha1.FieldManagerNode, nil), nics: nics, pods: pods, now: time.Now,
		pending: map[string]report{},
	}
	w.loop = workloop.NewController("sandboxaddr", w.sync, workloop.Options{QueueMetrics: queues})
	return w
}

// WatchNetworkInterfaces has the events of the informer of this Node's
// NetworkInterfaces bring back the reports that wait for them; Run waits for its cache.
func (w *Writer) WatchNetworkInterfaces(nics cache.SharedIndexInformer) error {
	return w.loop.Watch(workloop.Watch{Informer: nics, Handler: w.handler()})
}

// handler: the eth0 NetworkInterface of a Pod with a report waiting is a reason to
// write it.
func (w *Writer) handler() cache.ResourceEventHandler {
	return workloop.Funcs(func(obj any) {
		nic, ok := obj.(*v1alpha1.NetworkInterface)
		if !ok || nic.Name != v1alpha1.NetworkInterfaceName(nic.Spec.PodRef.Name, v1alpha1.DefaultInterface) {
			return
		}
		k := nic.Namespace + "/" + nic.Spec.PodRef.Name
		w.mu.Lock()
		_, waiting := w.pending[k]
		w.mu.Unlock()
		if waiting {
			w.loop.Loop.Add(k)
		}
	})
}

// Plumbed takes the Pod's addresses of a report (cniserver.Observer); it never fails the
// plugin's ADD.
func (w *Writer) Plumbed(ctx context.Context, p cniserver.Plumbing) error {
	addrs := Addresses(p.Addresses)
	if len(addrs) == 0 || p.UID == "" {
		return nil
	}
	k := p.Namespace + "/" + p.Pod
	w.mu.Lock()
	w.pending[k] = report{uid: p.UID, addrs: addrs, at: w.now()}
	w.mu.Unlock()
	w.loop.Loop.Add(k)
	w.loop.Loop.AddAfter(k, giveUp) // to drop it if it is still waiting then
	return nil
}

// Unplumbed forgets what the Pod's sandbox reported: it is gone (cniserver.Observer).
func (w *Writer) Unplumbed(_ context.Context, p cniserver.Plumbing) error {
	k := p.Namespace + "/" + p.Pod
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

// Run writes the reports, one at a time, until ctx ends.
func (w *Writer) Run(ctx context.Context) { w.loop.Run(ctx, 1) }

// sync writes the Pod's newest report, if it still waits, when its NetworkInterface is
// there; a failed write is retried by the loop.
func (w *Writer) sync(ctx context.Context, key string) error {
	w.mu.Lock()
	r, ok := w.pending[key]
	w.mu.Unlock()
	if !ok {
		return nil
	}
	if w.now().Sub(r.at) >= giveUp {
		w.forget(key, r)
		klog.FromContext(ctx).V(2).Info("Dropped the Pod's sandbox addresses: its NetworkInterface did not come",
			"pod", key, "addresses", r.addrs, "waited", giveUp)
		return nil
	}
	ns, name, _ := cache.SplitMetaNamespaceKey(key) // a key the Writer made of both
	done, err := w.apply(ctx, ns, name, r)
	if err != nil {
		return fmt.Errorf("writing the sandbox addresses %v of Pod %s into its NetworkInterface: %w", r.addrs, key, err)
	}
	if done {
		w.forget(key, r)
	}
	return nil
}

// forget drops the report r of key, unless a newer one replaced it.
func (w *Writer) forget(key string, r report) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if cur, ok := w.pending[key]; ok && cur.at.Equal(r.at) {
		delete(w.pending, key)
	}
}

// apply writes r into the Pod's eth0 NetworkInterface when that is still useful: the
// NetworkInterface is this Pod's (by UID), of this Node, not a direct one, the kubelet has
// not reported the Pod's IPs yet, and it does not hold them already. It says whether the
// report is done with (written or of no use); not while the Pod's NetworkInterface is not
// in the cache (its event brings the report back).
func (w *Writer) apply(ctx context.Context, namespace, pod string, r report) (done bool, err error) {
	if p, err := w.pods.Pods(namespace).Get(pod); err == nil && p.UID == r.uid && len(podaddr.OfPod(p)) > 0 {
		return true, nil
	}
	name := v1alpha1.NetworkInterfaceName(pod, v1alpha1.DefaultInterface)
	nic, err := w.nics.NetworkInterfaces(namespace).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	case nic.Spec.PodRef.UID != string(r.uid):
		// An earlier Pod's, or this Pod's is not in the cache yet.
		return false, nil
	case nic.Spec.NodeName != w.node, nic.Spec.ElasticIP != "", slices.Equal(nic.Status.SandboxAddresses, r.addrs):
		return true, nil
	}
	// The writer applies with the NetworkInterface's UID: one deleted or replaced by
	// another of the name since the cache saw it is not written (nor retried).
	apply := applyv1alpha1.NetworkInterface(name, namespace).
		WithStatus(applyv1alpha1.NetworkInterfaceStatus().WithSandboxAddresses(r.addrs...))
	if _, err := w.status.Write(ctx, nic, apply, nil, nil, "sandboxAddresses", r.addrs); err != nil {
		return false, err
	}
	return true, nil
}
