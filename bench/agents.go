package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	applyv1alpha1 "github.com/loutres/juneau/pkg/generated/applyconfiguration/juneau/v1alpha1"
	juneauinformers "github.com/loutres/juneau/pkg/generated/informers/externalversions"
	"github.com/loutres/juneau/pkg/status"
	"github.com/loutres/juneau/test/framework"
)

// agentLoad plays the API writes of the node agents of kwok's Nodes, which run none:
// each Node's agent renews its heartbeat Lease (juneau-node/juneau-node-<node>, lasting
// 40 s and renewed every 10 s, the defaults of `juneau node`), and marks Answering=True,
// once per generation and as the agents' field manager, on each ARPAdvertisement of its
// Node, as an agent does once it answers for the address. Without it the controller of
// the scale benchmark would see every agent dead and no address answered.
type agentLoad struct {
	renewals, answers, failures atomic.Int64

	cancel  context.CancelFunc
	queue   workqueue.TypedInterface[string]
	factory juneauinformers.SharedInformerFactory
	done    sync.WaitGroup
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
func startAgentLoad(ctx context.Context, e *env, cp *framework.ControlPlane, nodes int,
	answered func(context.Context, *v1alpha1.ARPAdvertisement) error) *agentLoad {
	ctx, cancel := context.WithCancel(ctx)
	a := &agentLoad{cancel: cancel, queue: workqueue.NewTyped[string]()}
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
				a.queue.Add(ad.Name)
			}
		}
	}
	if _, err := ads.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: unanswered, UpdateFunc: func(_, obj any) { unanswered(obj) },
	}); err != nil {
		e.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	for range agentWriters {
		a.done.Go(func() {
			for {
				name, quit := a.queue.Get()
				if quit {
					return
				}
				ad, err := ads.Lister().Get(name)
				if err == nil {
					cond := metav1.Condition{Type: v1alpha1.ConditionAnswering, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAnswering,
						Message: "answering ARP on interface eth0 (kwok)", ObservedGeneration: ad.Generation, LastTransitionTime: metav1.Now()}
					_, err = juneau.JuneauV1alpha1().ARPAdvertisements().ApplyStatus(ctx,
						applyv1alpha1.ARPAdvertisement(name).WithStatus(applyv1alpha1.ARPAdvertisementStatus().WithConditions(status.Apply(cond))),
						metav1.ApplyOptions{FieldManager: v1alpha1.FieldManagerNode, Force: true})
					if err == nil && answered != nil {
						err = answered(ctx, ad)
					}
					if err == nil {
						a.answers.Add(1)
					} else if ctx.Err() == nil {
						a.failures.Add(1)
					}
				}
				a.queue.Done(name)
			}
		})
	}
	a.factory = factory
	return a
}

// String sums the agents' writes up for the log.
func (a *agentLoad) String() string {
	return fmt.Sprintf("the agents' load: %d Lease renewals, %d advertisements answered, %d writes failed",
		a.renewals.Load(), a.answers.Load(), a.failures.Load())
}

// stop ends the agents' writes and waits for them.
func (a *agentLoad) stop() {
	a.cancel()
	a.queue.ShutDown()
	a.done.Wait()
	a.factory.Shutdown()
}
