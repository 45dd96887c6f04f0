// Package heartbeat is the controller that turns an ARPAdvertisement's Answering
// condition Unknown when the node agent of its Node stops reporting: every agent renews
// a heartbeat Lease, juneau-node-<node> in the agents' namespace, as kubelets renew their
// node Leases; once it expires, the agent's word that it answers ARP is stale
// (docs/reference.md#arp-advertisement). The agent sets the condition again when it is
// back.
package heartbeat

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationinformers "k8s.io/client-go/informers/coordination/v1"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/controllers/indexes"
	applyv1alpha1 "github.com/loutres/juneau/pkg/generated/applyconfiguration/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	informers "github.com/loutres/juneau/pkg/generated/informers/externalversions/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/status"
	"github.com/loutres/juneau/pkg/workloop"
)

// ControllerName names the loop, its queue and its log lines.
const ControllerName = "answering"

// Informers are the shared informers the controller reads. Leases must be those of
// Options.Namespace.
type Informers struct {
	Advertisements informers.ARPAdvertisementInformer
	Leases         coordinationinformers.LeaseInformer
}

// Options tune the controller. Its Clock also judges Lease expiry.
type Options struct {
	workloop.Options
	// Namespace of the agents' Leases.
	Namespace string
	// Registerer receives juneau_node_agent_not_reporting; may be nil.
	Registerer prometheus.Registerer
}

// Controller watches the agents' Leases. Its keys are Node names.
type Controller struct {
	*workloop.Controller
	status    status.ARPAdvertisementWriter
	namespace string
	adverts   cache.SharedIndexInformer
	leases    coordinationlisters.LeaseLister
	// notReporting is 1 for each Node with advertisements whose agent's heartbeat
	// Lease is expired or missing.
	notReporting *prometheus.GaugeVec
}

// NewController registers the event handlers; it starts nothing.
func NewController(client versioned.Interface, inf Informers, recorder record.EventRecorder, opts Options) (*Controller, error) {
	c := &Controller{status: status.ARPAdvertisements(client, v1alpha1.FieldManagerController, recorder),
		namespace: opts.Namespace, adverts: inf.Advertisements.Informer(), leases: inf.Leases.Lister()}
	if err := indexes.Add(c.adverts, indexes.AdvertisementByNode); err != nil {
		return nil, err
	}
	c.notReporting = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "juneau", Subsystem: "node", Name: "agent_not_reporting",
		Help: "1 for each Node that has ARPAdvertisements while its node agent's heartbeat Lease is expired or missing (no agent answers for them)."},
		[]string{"node"})
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(c.notReporting); err != nil {
			return nil, err
		}
	}
	c.Controller = workloop.NewController(ControllerName, c.sync, opts.Options)
	err := c.Watch(
		workloop.Watch{Informer: c.adverts, Handler: workloop.Funcs(c.onAdvertisement)},
		workloop.Watch{Informer: inf.Leases.Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: c.onLease,
			UpdateFunc: func(old, cur any) {
				if o, ok := old.(*coordinationv1.Lease); ok {
					if n, ok := cur.(*coordinationv1.Lease); ok && Extends(o, n, c.Clock.Now()) {
						return // its expiry check is due anyway: nothing to judge now
					}
				}
				c.onLease(cur)
			},
			DeleteFunc: func(obj any) { c.onLease(workloop.Unwrap(obj)) },
		}},
	)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Controller) onAdvertisement(obj any) {
	if ad, ok := obj.(*v1alpha1.ARPAdvertisement); ok && ad.Spec.NodeName != "" {
		c.Loop.Add(ad.Spec.NodeName)
	}
}

func (c *Controller) onLease(obj any) {
	if l, ok := obj.(*coordinationv1.Lease); ok && l.Namespace == c.namespace && strings.HasPrefix(l.Name, v1alpha1.NodeLeasePrefix) {
		c.Loop.Add(strings.TrimPrefix(l.Name, v1alpha1.NodeLeasePrefix))
	}
}

// sync judges one Node's Lease: alive, it comes back when the Lease would expire;
// expired or missing, every advertisement of the Node that says Answering=True gets
// Answering=Unknown.
func (c *Controller) sync(ctx context.Context, node string) error {
	lease, err := c.leases.Leases(c.namespace).Get(v1alpha1.NodeLeasePrefix + node)
	if apierrors.IsNotFound(err) {
		lease, err = nil, nil
	}
	if err != nil {
		return err
	}
	now := c.Clock.Now()
	hb := Judge(lease, c.namespace, node, now)
	if hb.Alive {
		c.notReporting.DeleteLabelValues(node)
		c.Loop.AddAfter(node, hb.Expires.Sub(now)+100*time.Millisecond)
		return nil
	}
	ads, err := indexes.ByIndex[*v1alpha1.ARPAdvertisement](c.adverts, indexes.AdvertisementByNode, node)
	if err != nil {
		return err
	}
	if len(ads) > 0 {
		c.notReporting.WithLabelValues(node).Set(1)
	} else {
		c.notReporting.DeleteLabelValues(node)
	}
	for _, ad := range ads {
		cond, wait := Unknown(ad, hb, now)
		if wait > 0 {
			c.Loop.AddAfter(node, wait+100*time.Millisecond)
		}
		if cond == nil || ad.DeletionTimestamp != nil {
			continue
		}
		cur, _ := status.One(ad.Status.Conditions, *cond, metav1.NewTime(now))
		apply := applyv1alpha1.ARPAdvertisement(ad.Name).WithStatus(
			applyv1alpha1.ARPAdvertisementStatus().WithConditions(status.Apply(cur)))
		written, err := c.status.Write(ctx, ad, apply, ad.Status.Conditions, []metav1.Condition{cur})
		if err != nil {
			return err
		}
		if written {
			klog.FromContext(ctx).Info("Node agent not reporting", "advertisement", ad.Name, "node", node, "reason", cur.Reason)
		}
	}
	return nil
}
