// Package network is the controller that writes ExternalNetwork status (docs/reference.md#externalnetwork):
// Ready while every named AddressPool exists, advertises the way the network does, and
// belongs to no other network.
package network

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	applyv1alpha1 "github.com/loutres/juneau/pkg/generated/applyconfiguration/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	informers "github.com/loutres/juneau/pkg/generated/informers/externalversions/juneau/v1alpha1"
	listers "github.com/loutres/juneau/pkg/generated/listers/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/status"
	"github.com/loutres/juneau/pkg/workloop"
)

// ControllerName names the loop, its queue and its log lines.
const ControllerName = "externalnetwork"

// Informers are the shared informers the controller reads.
type Informers struct {
	Networks informers.ExternalNetworkInformer
	Pools    informers.AddressPoolInformer
}

// Options tune the controller.
type Options struct {
	// Errors counts failed syncs; may be nil.
	Errors workloop.ErrorCounter
	// QueueMetrics receives the work queue's metrics (workloop.NewQueueMetrics); may be nil.
	QueueMetrics workqueue.MetricsProvider
	// Clock stamps condition transitions; nil means the real clock.
	Clock clock.PassiveClock
}

// Controller keeps ExternalNetwork status.
type Controller struct {
	client   versioned.Interface
	recorder record.EventRecorder
	clock    clock.PassiveClock

	networks listers.ExternalNetworkLister
	pools    listers.AddressPoolLister
	loop     *workloop.Loop
	synced   []cache.InformerSynced
}

// NewController registers the event handlers; it starts nothing. Networks are few, so
// the controller needs no index: a pool event scans them.
func NewController(client versioned.Interface, inf Informers, recorder record.EventRecorder, opts Options) (*Controller, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	c := &Controller{
		client:   client,
		recorder: recorder,
		clock:    opts.Clock,
		networks: inf.Networks.Lister(),
		pools:    inf.Pools.Lister(),
	}
	c.loop = workloop.New(ControllerName, c.sync, workloop.Config{Errors: opts.Errors, Metrics: opts.QueueMetrics})
	synced, err := workloop.Register([]workloop.Watch{
		// Every network event wakes all networks: adding or removing a pool from one
		// can change which network owns a pool named twice.
		{Informer: inf.Networks.Informer(), Handler: workloop.Funcs(func(any) { c.enqueueNaming("") })},
		{Informer: inf.Pools.Informer(), Handler: workloop.Funcs(c.onPool)},
	})
	if err != nil {
		return nil, err
	}
	c.synced = synced
	return c, nil
}

// Run waits for the caches and runs workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.loop.Run(ctx, workers, c.synced...)
}

func (c *Controller) onPool(obj any) {
	if p, ok := obj.(*v1alpha1.AddressPool); ok {
		c.enqueueNaming(p.Name)
	}
}

// enqueueNaming queues the networks that name the pool, or all networks for "".
func (c *Controller) enqueueNaming(pool string) {
	networks, err := c.networks.List(labels.Everything())
	if err != nil {
		return
	}
	for _, n := range networks {
		if pool == "" || slices.Contains(n.Spec.AddressPools, pool) {
			c.loop.AddObject(n)
		}
	}
}

// sync writes one network's status.
func (c *Controller) sync(ctx context.Context, key string) error {
	net, err := c.networks.Get(key)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	pools := map[string]*v1alpha1.AddressPool{}
	for _, name := range net.Spec.AddressPools {
		p, err := c.pools.Get(name)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return err
		default:
			pools[name] = p
		}
	}
	networks, err := c.networks.List(labels.Everything())
	if err != nil {
		return err
	}
	merged := networkStatus(net, pools, networks)
	merged.Conditions = status.Merge(net.Status.Conditions, merged.Conditions, metav1.NewTime(c.clock.Now()))
	if equality.Semantic.DeepEqual(merged, net.Status) {
		return nil
	}
	ready := meta.FindStatusCondition(merged.Conditions, v1alpha1.ConditionReady)
	apply := applyv1alpha1.ExternalNetwork(net.Name).WithUID(net.UID).WithStatus(
		applyv1alpha1.ExternalNetworkStatus().WithConditions(status.Apply(*ready)))
	_, err = c.client.JuneauV1alpha1().ExternalNetworks().ApplyStatus(ctx, apply,
		metav1.ApplyOptions{FieldManager: v1alpha1.FieldManagerController, Force: true})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("writing status of ExternalNetwork %q: %w", net.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Wrote ExternalNetwork status", "externalNetwork", klog.KObj(net), "reason", ready.Reason)
	status.Announce(c.recorder, net, readyEvents, meta.FindStatusCondition(net.Status.Conditions, v1alpha1.ConditionReady), ready)
	return nil
}

// readyEvents: a network that is not Ready is a Warning, becoming Ready again is
// Normal; a new network that is Ready from the start is not announced.
var readyEvents = status.Policy{Quiet: metav1.ConditionTrue, WarnOnLoss: true}
