package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/cached"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	applyv1alpha1 "github.com/loutres/juneau/pkg/generated/applyconfiguration/juneau/v1alpha1"
	juneauinformers "github.com/loutres/juneau/pkg/generated/informers/externalversions"
	"github.com/loutres/juneau/pkg/status"
	"github.com/loutres/juneau/test/framework"
)

// agentLoad plays the API writes of the node agents of kwok's Nodes, which run none:
// each Node's agent renews its heartbeat Lease (juneau-node/juneau-node-<node>, lasting
// 40 s and renewed every 10 s, the defaults of `juneau node`); marks Answering=True,
// once per generation and as the agents' field manager, on each ARPAdvertisement of its
// Node, as an agent does once it answers for the address; and writes the readiness gate
// of each Pod of its Node that lists it, False when the Pod appears and True once its
// address is answered. Without it the controller of the scale benchmark would see every
// agent dead and no address answered. What the agents read is not played: each agent
// watches the Pods and juneau's objects of its own Node, 1,000 watches in all where the
// benchmark has one of each kind.
type agentLoad struct {
	renewals, answers, gates, failures atomic.Int64

	cancel    context.CancelFunc
	queue     workqueue.TypedRateLimitingInterface[string]
	factories []interface{ Shutdown() }
	done      sync.WaitGroup
}

const (
	agentLeaseNamespace = "juneau-node"
	agentLeaseDuration  = 40 * time.Second
	// agentWriters renew the Leases (each its share of the Nodes) and, as many again,
	// mark the advertisements.
	agentWriters = 8
)

// startAgentLoad starts the agents' writes for the Nodes; answered, when set, runs
// after each advertisement is marked (the floor makes there the writes the controller
// makes once an address is answered).
func startAgentLoad(ctx context.Context, e *env, cp *framework.ControlPlane, namespace string, nodes int,
	answered func(context.Context, *v1alpha1.ARPAdvertisement) error) *agentLoad {
	ctx, cancel := context.WithCancel(ctx)
	a := &agentLoad{cancel: cancel, queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
	ensureNamespace(e, cp, agentLeaseNamespace)
	leases := fastKube(cp).CoordinationV1().Leases(agentLeaseNamespace)
	for w := range agentWriters {
		a.done.Go(func() {
			// Writer w renews the Leases of the Nodes w, w+agentWriters, ... in turn, so
			// that every Lease is renewed each quarter of its duration.
			var mine []*coordinationv1.Lease
			for i := w; i < nodes; i += agentWriters {
				now := metav1.NowMicro()
				l, err := leases.Create(ctx, &coordinationv1.Lease{
					ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.NodeLeasePrefix + kwokNodeName(i)},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(kwokNodeName(i)), AcquireTime: &now, RenewTime: &now,
						LeaseDurationSeconds: ptr.To(int32(agentLeaseDuration / time.Second))},
				}, metav1.CreateOptions{FieldManager: v1alpha1.FieldManagerNode})
				if err != nil {
					a.failures.Add(1)
					continue
				}
				mine = append(mine, l)
			}
			if len(mine) == 0 {
				return
			}
			tick := time.NewTicker(agentLeaseDuration / 4 / time.Duration(len(mine)))
			defer tick.Stop()
			for i := 0; ; i = (i + 1) % len(mine) {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				l := mine[i].DeepCopy()
				l.Spec.RenewTime = ptr.To(metav1.NowMicro())
				got, err := leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManagerNode})
				if err != nil {
					a.failures.Add(1)
					continue
				}
				mine[i] = got
				a.renewals.Add(1)
			}
		})
	}

	juneau := fastClient(cp)
	factory := juneauinformers.NewSharedInformerFactory(juneau, 0)
	ads := factory.Juneau().V1alpha1().ARPAdvertisements()
	unanswered := func(obj any) {
		if ad, ok := obj.(*v1alpha1.ARPAdvertisement); ok && ad.DeletionTimestamp == nil && ad.Spec.NodeName != "" {
			c := meta.FindStatusCondition(ad.Status.Conditions, v1alpha1.ConditionAnswering)
			if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != ad.Generation {
				a.queue.Add(adKey + ad.Name)
			}
		}
	}
	if _, err := ads.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: unanswered, UpdateFunc: func(_, obj any) { unanswered(obj) },
	}); err != nil {
		e.Fatal(err)
	}
	kubeFactory := informers.NewSharedInformerFactoryWithOptions(fastKube(cp), 0,
		informers.WithNamespace(namespace), informers.WithTransform(cached.Pod))
	gated := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" && len(p.Spec.ReadinessGates) > 0 {
			a.queue.Add(podKey + p.Name)
		}
	}
	if _, err := kubeFactory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: gated}); err != nil {
		e.Fatal(err)
	}
	for _, f := range []interface{ Start(<-chan struct{}) }{factory, kubeFactory} {
		f.Start(ctx.Done())
	}
	factory.WaitForCacheSync(ctx.Done())
	kubeFactory.WaitForCacheSync(ctx.Done())
	answering := status.ARPAdvertisements(juneau, v1alpha1.FieldManagerNode, nil)
	gates := &gateWriter{kube: fastKube(cp), namespace: namespace, answered: map[string]bool{}, written: map[string]bool{}}
	for range agentWriters {
		a.done.Go(func() {
			for {
				key, quit := a.queue.Get()
				if quit {
					return
				}
				var err error
				if name, ok := strings.CutPrefix(key, podKey); ok {
					err = gates.write(ctx, name, &a.gates)
				} else if ad, gerr := ads.Lister().Get(strings.TrimPrefix(key, adKey)); gerr == nil {
					if err = a.answer(ctx, answering, ad, answered); err == nil {
						// The Pod's gate turns True once its Node answers for its address;
						// the benchmark's ElasticIPs are its Pods' automatic ones, named
						// after them.
						if o, ok := advertisement.OwnerOf(ad); ok {
							gates.answer(o.Name)
							a.queue.Add(podKey + o.Name)
						}
					}
				}
				if err != nil && ctx.Err() == nil {
					a.failures.Add(1)
					a.queue.AddRateLimited(key) // as an agent's work queue retries
				} else {
					a.queue.Forget(key)
				}
				a.queue.Done(key)
			}
		})
	}
	a.factories = []interface{ Shutdown() }{factory, kubeFactory}
	return a
}

// Work queue keys of the agents' writes: an advertisement to mark answered, a Pod whose
// readiness gate to write.
const adKey, podKey = "ad/", "pod/"

// answer marks ad Answering=True for its generation, as the agent of its Node does once
// it answers ARP for the address, and runs answered.
func (a *agentLoad) answer(ctx context.Context, w status.ARPAdvertisementWriter, ad *v1alpha1.ARPAdvertisement,
	answered func(context.Context, *v1alpha1.ARPAdvertisement) error) error {
	cond := metav1.Condition{Type: v1alpha1.ConditionAnswering, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAnswering,
		Message: "answering ARP on interface eth0 (kwok)", ObservedGeneration: ad.Generation, LastTransitionTime: metav1.Now()}
	old := ad.Status.Conditions
	if _, err := w.Write(ctx, ad, applyv1alpha1.ARPAdvertisement(ad.Name).WithStatus(
		applyv1alpha1.ARPAdvertisementStatus().WithConditions(status.Apply(cond))), old, []metav1.Condition{cond}); err != nil {
		return err
	}
	if answered != nil {
		if err := answered(ctx, ad); err != nil {
			return err
		}
	}
	a.answers.Add(1)
	return nil
}

// gateWriter writes the readiness gate of the Pods (v1alpha1.PodConditionElasticIP), as
// the agent of a Pod's Node does: False as soon as it sees the Pod, True once it answers
// for the Pod's address; a write per change, as the agent compares with what it wrote.
// The work queue never runs one Pod's key twice at once, so its writes stay in order.
type gateWriter struct {
	kube      kubernetes.Interface
	namespace string

	mu       sync.Mutex
	answered map[string]bool // Pods whose address is answered
	written  map[string]bool // Pods with a gate written, and its status
}

func (g *gateWriter) answer(pod string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.answered[pod] = true
}

func (g *gateWriter) write(ctx context.Context, pod string, count *atomic.Int64) error {
	g.mu.Lock()
	ready := g.answered[pod]
	was, ok := g.written[pod]
	g.mu.Unlock()
	if ok && was == ready {
		return nil
	}
	cond := corev1.PodCondition{Type: v1alpha1.PodConditionElasticIP, Status: corev1.ConditionFalse, Reason: v1alpha1.ReasonNotProgrammed,
		Message: "no ElasticIP is attached to this Pod on this Node yet", LastTransitionTime: metav1.Now()}
	if ready {
		cond.Status, cond.Reason, cond.Message = corev1.ConditionTrue, v1alpha1.ReasonProgrammed, "ElasticIP traffic programmed (kwok)"
	}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{cond}}})
	if _, err := g.kube.CoreV1().Pods(g.namespace).Patch(ctx, pod, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{FieldManager: v1alpha1.FieldManagerNode}, "status"); err != nil {
		return err
	}
	g.mu.Lock()
	g.written[pod] = ready
	g.mu.Unlock()
	count.Add(1)
	return nil
}

// String sums the agents' writes up for the log.
func (a *agentLoad) String() string {
	return fmt.Sprintf("the agents' load: %d Lease renewals, %d advertisements answered, %d readiness gates written, %d writes failed",
		a.renewals.Load(), a.answers.Load(), a.gates.Load(), a.failures.Load())
}

// stop ends the agents' writes and waits for them.
func (a *agentLoad) stop() {
	a.cancel()
	a.queue.ShutDown()
	a.done.Wait()
	for _, f := range a.factories {
		f.Shutdown()
	}
}
