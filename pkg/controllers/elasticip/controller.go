package elasticip

import (
	"context"

	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/controllers/indexes"
	"github.com/loutres/juneau/pkg/controllers/ipam"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	informers "github.com/loutres/juneau/pkg/generated/informers/externalversions/juneau/v1alpha1"
	listers "github.com/loutres/juneau/pkg/generated/listers/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/workloop"
)

// ControllerName names the loop, its queue and its log lines.
const ControllerName = "elasticip"

// DefaultOrphanGrace is how long a claim whose consumer is gone stays before it is
// deleted, so that a lagging cache never frees a live address.
const DefaultOrphanGrace = 30 * time.Second

// Informers are the shared informers the controller reads.
type Informers struct {
	ElasticIPs        informers.ElasticIPInformer
	Claims            informers.AllocationClaimInformer
	Pools             informers.AddressPoolInformer
	Networks          informers.ExternalNetworkInformer
	Attachments       informers.ElasticIPAttachmentInformer
	NetworkInterfaces informers.NetworkInterfaceInformer
	Advertisements    informers.ARPAdvertisementInformer
	BGPAdvertisements informers.BGPAdvertisementInformer
	// Namespaces: their labels, for the networks' namespaceSelectors (tenancy.go).
	Namespaces coreinformers.NamespaceInformer
}

// Options tune the controller.
type Options struct {
	OrphanGrace time.Duration
	Clock       clock.Clock
	Metrics     *Metrics // may be nil
	// QueueMetrics receives the work queues' metrics (workloop.NewQueueMetrics); may be nil.
	QueueMetrics workqueue.MetricsProvider
}

// Controller reserves addresses for ElasticIPs, decides who uses each one, keeps the
// ARPAdvertisements (arp networks) and BGPAdvertisements (bgp networks) and releases
// everything on deletion (docs/reference.md#allocation to #arp-advertisement,
// docs/bgp.md). It is the only writer of ElasticIP status.
type Controller struct {
	client   versioned.Interface
	recorder record.EventRecorder
	clock    clock.Clock
	metrics  *Metrics
	grace    time.Duration

	eips        listers.ElasticIPLister
	claims      listers.AllocationClaimLister
	pools       listers.AddressPoolLister
	networks    listers.ExternalNetworkLister
	attachments listers.ElasticIPAttachmentLister
	nics        listers.NetworkInterfaceLister
	namespaces  corelisters.NamespaceLister
	inf         Informers

	// The advertisement kinds: arp and bgp, both in kinds.
	arp   *adKind[*v1alpha1.ARPAdvertisement]
	bgp   *adKind[*v1alpha1.BGPAdvertisement]
	kinds []advertiser

	index *ipam.Index // reserved addresses, fed from the claim informer

	// echoes remembers the claims this process created until the informer shows them,
	// so a retry never reserves a second address for the same ElasticIP, and the
	// statuses it wrote, so that the watch events of its own writes do not wake the
	// ElasticIP again (echo.go).
	echoes *echoes

	// gone remembers, for a grace period, the ElasticIPs the watch has shown deleted (by
	// UID, the last state seen): their claims are released at once, without the orphan
	// grace, since a deletion seen by the watch is final and UIDs are never reused.
	gone *utilcache.Expiring

	eipLoop   *workloop.Loop
	claimLoop *workloop.Loop
	synced    []cache.InformerSynced
}

// NewController registers event handlers and indexes; it starts nothing.
func NewController(client versioned.Interface, inf Informers, recorder record.EventRecorder, opts Options) (*Controller, error) {
	if opts.OrphanGrace <= 0 {
		opts.OrphanGrace = DefaultOrphanGrace
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	c := &Controller{
		client: client, recorder: recorder, clock: opts.Clock, metrics: opts.Metrics, grace: opts.OrphanGrace,
		eips: inf.ElasticIPs.Lister(), claims: inf.Claims.Lister(), pools: inf.Pools.Lister(),
		networks: inf.Networks.Lister(), attachments: inf.Attachments.Lister(),
		nics: inf.NetworkInterfaces.Lister(), namespaces: inf.Namespaces.Lister(),
		inf: inf, index: ipam.NewIndex(), echoes: newEchoes(),
		arp: arpKind(client, inf.Advertisements), bgp: bgpKind(client, inf.BGPAdvertisements),
		gone: utilcache.NewExpiringWithClock(opts.Clock),
	}
	c.kinds = []advertiser{c.arp, c.bgp}
	loopCfg := workloop.Config{Errors: c.metrics.errorCounter(), Metrics: opts.QueueMetrics}
	c.eipLoop = workloop.New(ControllerName, c.sync, loopCfg)
	c.claimLoop = workloop.New(ControllerName+"-orphan-claims", c.syncClaim, loopCfg)

	index := map[cache.SharedIndexInformer][]string{
		inf.Claims.Informer():            {indexes.ClaimByConsumerUID},
		inf.Attachments.Informer():       {indexes.AttachmentByElasticIP},
		inf.NetworkInterfaces.Informer(): {indexes.NICByElasticIP},
	}
	watches := []workloop.Watch{
		{Informer: inf.ElasticIPs.Informer(), Handler: c.eipHandler()},
		{Informer: inf.ElasticIPs.Informer(), Handler: cache.ResourceEventHandlerFuncs{DeleteFunc: c.onElasticIPGone}},
		{Informer: inf.Claims.Informer(), Handler: c.claimHandler()},
		// A change of a pool or of a network's spec (its pools, its namespaceSelector)
		// may change what any ElasticIP can have: a pool belongs to the oldest network
		// that names it, so one network's change reaches another's ElasticIPs.
		{Informer: inf.Pools.Informer(), Handler: workloop.SpecFuncs(func(any) { c.enqueueAll() })},
		{Informer: inf.Networks.Informer(), Handler: workloop.SpecFuncs(func(any) { c.enqueueAll() })},
		{Informer: inf.Attachments.Informer(), Handler: workloop.Funcs(c.onAttachment)},
		{Informer: inf.NetworkInterfaces.Informer(), Handler: workloop.Funcs(c.onNIC)},
		{Informer: inf.Namespaces.Informer(), Handler: c.namespaceHandler()},
	}
	for _, k := range c.kinds {
		index[k.indexed()] = []string{indexes.AdvertisementByOwner, indexes.AdvertisementByAddress}
		watches = append(watches, workloop.Watch{Informer: k.indexed(), Handler: k.handler(c)})
	}
	for informer, names := range index {
		if err := indexes.Add(informer, names...); err != nil {
			return nil, err
		}
	}
	synced, err := workloop.Register(watches)
	if err != nil {
		return nil, err
	}
	c.synced = synced
	return c, nil
}

// Run runs the ElasticIP workers and the orphan-claim loop until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	wg.Go(func() { c.claimLoop.Run(ctx, 1, c.synced...) })
	c.eipLoop.Run(ctx, workers, c.synced...)
	wg.Wait()
}

// claimHandler keeps the address index in step with the claim cache and wakes the
// consumer, the ElasticIPs waiting for an address, and the orphan check.
func (c *Controller) claimHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			claim, ok := obj.(*v1alpha1.AllocationClaim)
			if !ok {
				return
			}
			if addr, err := iprange.AddrOfClaimName(claim.Name); err == nil {
				c.index.Mark(addr)
			}
			c.echoes.claimShown(claim)
			// The claim this process created wakes nobody: the sync that created it
			// went on with it, and if that sync failed it is retried anyway.
			if !c.claimEcho(claim) {
				c.enqueueConsumer(claim)
			}
			c.claimLoop.AddObject(claim)
		},
		UpdateFunc: func(_, obj any) {
			if claim, ok := obj.(*v1alpha1.AllocationClaim); ok {
				c.claimLoop.AddObject(claim)
			}
		},
		DeleteFunc: func(obj any) {
			claim, ok := workloop.Unwrap(obj).(*v1alpha1.AllocationClaim)
			if !ok {
				return
			}
			if addr, err := iprange.AddrOfClaimName(claim.Name); err == nil {
				c.index.Unmark(addr)
			}
			c.enqueueConsumer(claim)
			c.enqueueWaitingForAddress()
		},
	}
}

// onElasticIPGone remembers a deleted ElasticIP and wakes the claim loop for its claims,
// which are released at once: an ElasticIP nobody uses carries no finalizer
// (docs/reference.md#deletion), so its deletion is only seen here. A claim that the cache
// shows later (created just before the deletion) is released when it arrives.
func (c *Controller) onElasticIPGone(obj any) {
	eip, ok := workloop.Unwrap(obj).(*v1alpha1.ElasticIP)
	if !ok || eip.UID == "" {
		return
	}
	c.gone.Set(eip.UID, eip, goneMemory(c.grace))
	claims, _ := indexes.ByIndex[*v1alpha1.AllocationClaim](c.inf.Claims.Informer(), indexes.ClaimByConsumerUID, string(eip.UID))
	for _, claim := range claims {
		c.claimLoop.AddObject(claim)
	}
}

// goneMemory is how long a deleted ElasticIP is remembered: past it, a claim that shows
// up late is an ordinary orphan.
func goneMemory(grace time.Duration) time.Duration { return max(grace, 5*time.Minute) }

// goneElasticIP returns the deleted ElasticIP of that UID, if the watch showed it lately.
func (c *Controller) goneElasticIP(uid string) (*v1alpha1.ElasticIP, bool) {
	v, ok := c.gone.Get(types.UID(uid))
	if !ok {
		return nil, false
	}
	eip, ok := v.(*v1alpha1.ElasticIP)
	return eip, ok
}

func (c *Controller) enqueueConsumer(claim *v1alpha1.AllocationClaim) {
	if claim.Spec.Consumer.Kind == v1alpha1.ConsumerKindElasticIP {
		c.eipLoop.Add(indexes.Key(claim.Spec.Consumer.Namespace, claim.Spec.Consumer.Name))
	}
}

// enqueueWaitingForAddress wakes every ElasticIP still without an address.
func (c *Controller) enqueueWaitingForAddress() {
	all, err := c.eips.List(labels.Everything())
	if err != nil {
		return
	}
	for _, eip := range all {
		if eip.Status.Address == "" || eip.Status.Phase == v1alpha1.ElasticIPPending {
			c.eipLoop.AddObject(eip)
		}
	}
}

func (c *Controller) enqueueAll() {
	all, err := c.eips.List(labels.Everything())
	if err != nil {
		return
	}
	for _, eip := range all {
		c.eipLoop.AddObject(eip)
	}
}

func (c *Controller) onAttachment(obj any) {
	if a, ok := obj.(*v1alpha1.ElasticIPAttachment); ok {
		c.eipLoop.Add(indexes.Key(a.Namespace, a.Spec.ElasticIPRef.Name))
	}
}

func (c *Controller) onNIC(obj any) {
	if nic, ok := obj.(*v1alpha1.NetworkInterface); ok && nic.Spec.ElasticIP != "" {
		c.eipLoop.Add(indexes.Key(nic.Namespace, nic.Spec.ElasticIP))
	}
}

func logger(ctx context.Context, eip *v1alpha1.ElasticIP) klog.Logger {
	return klog.FromContext(ctx).WithValues("elasticIP", klog.KObj(eip))
}
