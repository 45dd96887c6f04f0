// Package pool is the controller that writes AddressPool status (docs/reference.md#addresspool): how many
// addresses the pool has, how many are reserved by AllocationClaims, and whether a
// Node address has come to lie inside it. It also exports the pools' figures as
// Prometheus gauges.
//
// The counts are kept up to date from claim events (counts.go) and written at most once
// per pool per Options.CountInterval, however many claims come and go in between; a
// change of the pool itself or of a Node address is written at once.
package pool

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	applyv1alpha1 "github.com/loutres/juneau/pkg/generated/applyconfiguration/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	informers "github.com/loutres/juneau/pkg/generated/informers/externalversions/juneau/v1alpha1"
	listers "github.com/loutres/juneau/pkg/generated/listers/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/status"
	"github.com/loutres/juneau/pkg/workloop"
)

// ControllerName names the loop, its queue and its log lines.
const ControllerName = "addresspool"

// Informers are the shared informers the controller reads.
type Informers struct {
	Pools  informers.AddressPoolInformer
	Claims informers.AllocationClaimInformer
	Nodes  coreinformers.NodeInformer
}

// Options tune the controller.
type Options struct {
	workloop.Options
	// Registerer, when set, gets the pool gauges (see NewCollector).
	Registerer prometheus.Registerer
	// CountInterval is how long a claim event waits for others before the pool's counts
	// are written (DefaultCountInterval when zero; negative: at once).
	CountInterval time.Duration
}

// DefaultCountInterval coalesces the count writes of a burst of allocations: one status
// write per pool per second at most.
const DefaultCountInterval = time.Second

// Controller keeps AddressPool status.
type Controller struct {
	*workloop.Controller
	status   status.AddressPoolWriter
	pools    listers.AddressPoolLister
	nodes    corelisters.NodeLister
	claims   listers.AllocationClaimLister
	counts   *counts
	interval time.Duration
}

// NewController registers the index, the event handlers and, with opts.Registerer,
// the gauges; it starts nothing.
func NewController(client versioned.Interface, inf Informers, recorder record.EventRecorder, opts Options) (*Controller, error) {
	c := &Controller{
		status: status.AddressPools(client, v1alpha1.FieldManagerController, recorder,
			status.Announced{Type: v1alpha1.ConditionReady, Policy: readyEvents}),
		pools:    inf.Pools.Lister(),
		nodes:    inf.Nodes.Lister(),
		claims:   inf.Claims.Lister(),
		counts:   newCounts(),
		interval: opts.CountInterval,
	}
	if c.interval == 0 {
		c.interval = DefaultCountInterval
	}
	c.Controller = workloop.NewController(ControllerName, c.sync, opts.Options)
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(NewCollector(c.pools)); err != nil {
			return nil, fmt.Errorf("registering AddressPool metrics: %w", err)
		}
	}
	err := c.Watch(
		workloop.Watch{Informer: inf.Pools.Informer(), Handler: c.poolHandler()},
		workloop.Watch{Informer: inf.Claims.Informer(), Handler: c.claimHandler()},
		workloop.Watch{Informer: inf.Nodes.Informer(), Handler: c.nodeHandler()},
	)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// claimHandler counts the claim in (or out of) the pools holding its address and wakes
// them after the count interval, so that a burst of claims is one write per pool.
func (c *Controller) claimHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if claim, ok := obj.(*v1alpha1.AllocationClaim); ok {
				c.countsChanged(c.counts.addClaim(claim))
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*v1alpha1.AllocationClaim)
			n, ok2 := newObj.(*v1alpha1.AllocationClaim)
			if !ok1 || !ok2 || o.Spec == n.Spec {
				return
			}
			c.countsChanged(c.counts.removeClaim(o))
			c.countsChanged(c.counts.addClaim(n))
		},
		DeleteFunc: func(obj any) {
			if claim, ok := workloop.Unwrap(obj).(*v1alpha1.AllocationClaim); ok {
				c.countsChanged(c.counts.removeClaim(claim))
			}
		},
	}
}

// countsChanged wakes the pools once the count interval has passed: a key already
// waiting keeps its time, so a pool is written at most once per interval.
func (c *Controller) countsChanged(pools []string) {
	for _, name := range pools {
		if c.interval < 0 {
			c.Loop.Add(name)
		} else {
			c.Loop.AddAfter(name, c.interval)
		}
	}
}

// poolHandler counts a new or changed pool afresh and wakes it at once.
func (c *Controller) poolHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pool, ok := obj.(*v1alpha1.AddressPool); ok {
				c.counts.setPool(pool, c.allClaims)
				c.Loop.AddObject(pool)
			}
		},
		UpdateFunc: func(_, obj any) {
			if pool, ok := obj.(*v1alpha1.AddressPool); ok {
				c.counts.setPool(pool, c.allClaims)
				c.Loop.AddObject(pool)
			}
		},
		DeleteFunc: func(obj any) {
			if pool, ok := workloop.Unwrap(obj).(*v1alpha1.AddressPool); ok {
				c.counts.deletePool(pool.Name)
				c.Loop.AddObject(pool)
			}
		},
	}
}

// allClaims lists the claim cache, for counting a pool afresh.
func (c *Controller) allClaims() []*v1alpha1.AllocationClaim {
	all, _ := c.claims.List(labels.Everything())
	return all
}

// nodeHandler wakes every pool when a Node appears, goes, or changes its addresses;
// the frequent status updates that change no address are ignored.
func (c *Controller) nodeHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.enqueueAll() },
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.Node)
			n, ok2 := newObj.(*corev1.Node)
			if ok1 && ok2 && slices.Equal(o.Status.Addresses, n.Status.Addresses) {
				return
			}
			c.enqueueAll()
		},
		DeleteFunc: func(any) { c.enqueueAll() },
	}
}

func (c *Controller) enqueueAll() {
	pools, err := c.pools.List(labels.Everything())
	if err != nil {
		return
	}
	for _, p := range pools {
		c.Loop.AddObject(p)
	}
}

// sync writes one pool's status.
func (c *Controller) sync(ctx context.Context, key string) error {
	pool, err := c.pools.Get(key)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	merged := poolStatus(pool, c.counts.count(pool, c.allClaims), nodes)
	merged.Conditions = status.Merge(pool.Status.Conditions, merged.Conditions, metav1.NewTime(c.Clock.Now()))
	if equality.Semantic.DeepEqual(merged, pool.Status) {
		return nil
	}
	ready := meta.FindStatusCondition(merged.Conditions, v1alpha1.ConditionReady)
	_, err = c.status.Write(ctx, pool, statusApply(pool, merged, ready), pool.Status.Conditions, merged.Conditions,
		"total", merged.Total, "allocated", merged.Allocated, "reason", ready.Reason)
	return err
}

// statusApply is the apply configuration of the fields this controller owns. The counts
// are always sent, zero included, so a count that falls to zero is written.
func statusApply(pool *v1alpha1.AddressPool, st v1alpha1.AddressPoolStatus, ready *metav1.Condition) *applyv1alpha1.AddressPoolApplyConfiguration {
	sa := applyv1alpha1.AddressPoolStatus().
		WithTotal(st.Total).
		WithAllocated(st.Allocated).
		WithAvailable(st.Available)
	if ready != nil {
		sa.WithConditions(status.Apply(*ready))
	}
	return applyv1alpha1.AddressPool(pool.Name).WithStatus(sa)
}

// readyEvents: a pool that is not Ready (or not Ready for another reason) is a Warning,
// becoming Ready again is Normal; a new pool that is Ready from the start is not
// announced.
var readyEvents = status.Policy{Quiet: metav1.ConditionTrue, WarnOnLoss: true}
