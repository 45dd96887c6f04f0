// Package network is the controller that writes ExternalNetwork status (docs/reference.md#externalnetwork):
// Ready while every named AddressPool exists, advertises the way the network does, and
// belongs to no other network.
package network

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/record"

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
type Options = workloop.Options

// Controller keeps ExternalNetwork status.
type Controller struct {
	*workloop.Controller
	status   status.ExternalNetworkWriter
	networks listers.ExternalNetworkLister
	pools    listers.AddressPoolLister
}

// NewController registers the event handlers; it starts nothing. Networks are few, so
// the controller needs no index: a pool event scans them.
func NewController(client versioned.Interface, inf Informers, recorder record.EventRecorder, opts Options) (*Controller, error) {
	c := &Controller{
		status: status.ExternalNetworks(client, v1alpha1.FieldManagerController, recorder,
			status.Announced{Type: v1alpha1.ConditionReady, Policy: readyEvents}),
		networks: inf.Networks.Lister(),
		pools:    inf.Pools.Lister(),
	}
	c.Controller = workloop.NewController(ControllerName, c.sync, opts)
	err := c.Watch(
		// Every network event wakes all networks: adding or removing a pool from one
		// can change which network owns a pool named twice.
		workloop.Watch{Informer: inf.Networks.Informer(), Handler: workloop.Funcs(func(any) { c.enqueueNaming("") })},
		workloop.Watch{Informer: inf.Pools.Informer(), Handler: workloop.Funcs(c.onPool)},
	)
	if err != nil {
		return nil, err
	}
	return c, nil
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
			c.Loop.AddObject(n)
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
	merged.Conditions = status.Merge(net.Status.Conditions, merged.Conditions, metav1.NewTime(c.Clock.Now()))
	if equality.Semantic.DeepEqual(merged, net.Status) {
		return nil
	}
	ready := meta.FindStatusCondition(merged.Conditions, v1alpha1.ConditionReady)
	_, err = c.status.Write(ctx, net, applyv1alpha1.ExternalNetwork(net.Name).WithStatus(
		applyv1alpha1.ExternalNetworkStatus().WithConditions(status.Apply(*ready))),
		net.Status.Conditions, merged.Conditions, "reason", ready.Reason)
	return err
}

// readyEvents: a network that is not Ready is a Warning, becoming Ready again is
// Normal; a new network that is Ready from the start is not announced.
var readyEvents = status.Policy{Quiet: metav1.ConditionTrue, WarnOnLoss: true}
