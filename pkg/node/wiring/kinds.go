package wiring

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/loutres/juneau/pkg/apis/juneau/cached"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	juneauinformers "github.com/loutres/juneau/pkg/generated/informers/externalversions"
	"github.com/loutres/juneau/pkg/node/agent"
)

// factories are the agent's informer factories, one per set of objects it caches.
type factories struct {
	// attachments: the ElasticIPAttachments of every Node, cached trimmed to what the
	// agent reads (agent.TrimAttachment): in-cluster clients here reach ElasticIPs
	// attached anywhere (docs/datapath.md).
	attachments juneauinformers.SharedInformerFactory
	// onNode: the juneau objects whose spec.nodeName is this Node.
	onNode juneauinformers.SharedInformerFactory
	// juneau: every object of the other juneau kinds.
	juneau juneauinformers.SharedInformerFactory
	// kube: every object of the Kubernetes kinds but Pods.
	kube kubeinformers.SharedInformerFactory
	// pods: the Pods whose spec.nodeName is this Node.
	pods kubeinformers.SharedInformerFactory
}

// kind is one kind of object the agent watches; every event of every kind triggers a
// sync of the agent.
type kind struct {
	name string
	// direct: the CNI server answers from this cache too (agent.DirectSource), and
	// answers only once it synced.
	direct bool
	// cache takes the kind's informer from f and sets its lister among l.
	cache func(f *factories, l *agent.Listers) cache.SharedIndexInformer
}

// kinds are the kinds the agent watches. A new kind is an entry here, and for the agent
// to read it a field of agent.Listers that the agent's inputs gather from.
var kinds = []kind{
	{name: "ElasticIPAttachment", cache: func(f *factories, l *agent.Listers) cache.SharedIndexInformer {
		return bind(f.attachments.Juneau().V1alpha1().ElasticIPAttachments(), &l.Attachments)
	}},
	{name: "ARPAdvertisement", cache: func(f *factories, l *agent.Listers) cache.SharedIndexInformer {
		return bind(f.onNode.Juneau().V1alpha1().ARPAdvertisements(), &l.Advertisements)
	}},
	{name: "Node", cache: func(f *factories, l *agent.Listers) cache.SharedIndexInformer {
		inf := bind(f.kube.Core().V1().Nodes(), &l.Nodes)
		// Not started yet, so this cannot fail.
		_ = inf.SetTransform(cached.Node)
		return inf
	}},
	{name: "ServiceCIDR", cache: func(f *factories, l *agent.Listers) cache.SharedIndexInformer {
		return bind(f.kube.Networking().V1().ServiceCIDRs(), &l.ServiceCIDRs)
	}},
	{name: "Pod", direct: true, cache: func(f *factories, l *agent.Listers) cache.SharedIndexInformer {
		return bind(f.pods.Core().V1().Pods(), &l.Pods)
	}},
	{name: "NetworkInterface", direct: true, cache: func(f *factories, l *agent.Listers) cache.SharedIndexInformer {
		return bind(f.onNode.Juneau().V1alpha1().NetworkInterfaces(), &l.NICs)
	}},
	{name: "ElasticIP", direct: true, cache: func(f *factories, l *agent.Listers) cache.SharedIndexInformer {
		inf := bind(f.juneau.Juneau().V1alpha1().ElasticIPs(), &l.ElasticIPs)
		// Not started yet, so this cannot fail.
		_ = inf.SetTransform(agent.TrimElasticIP)
		return inf
	}},
	{name: "ExternalNetwork", cache: func(f *factories, l *agent.Listers) cache.SharedIndexInformer {
		return bind(f.juneau.Juneau().V1alpha1().ExternalNetworks(), &l.Networks)
	}},
	{name: "BGPPeer", cache: func(f *factories, l *agent.Listers) cache.SharedIndexInformer {
		return bind(f.juneau.Juneau().V1alpha1().BGPPeers(), &l.BGPPeers)
	}},
	{name: "BGPAdvertisement", cache: func(f *factories, l *agent.Listers) cache.SharedIndexInformer {
		return bind(f.onNode.Juneau().V1alpha1().BGPAdvertisements(), &l.BGPAdvertisements)
	}},
}

// informer is a generated informer whose lister is an L.
type informer[L any] interface {
	Informer() cache.SharedIndexInformer
	Lister() L
}

// bind sets *lister to i's lister and returns i's informer.
func bind[L any](i informer[L], lister *L) cache.SharedIndexInformer {
	*lister = i.Lister()
	return i.Informer()
}

// caches are the informers of the kinds the agent watches, and the listers it reads
// them through.
type caches struct {
	listers agent.Listers
	// direct answers the CNI server from the caches of the direct kinds.
	direct *agent.DirectSource
	// informers of kinds, in its order.
	informers []cache.SharedIndexInformer
	factories []interface {
		Start(stop <-chan struct{})
		Shutdown()
	}
}

// newCaches makes the informers of every kind, started by start. They never resync:
// each sync of the agent reads every cache, and the agent resyncs on its own period
// (--resync-period); an informer resync would only hand the agent's one handler
// every cached object again (300,000 of them at 100,000 mappings) to trigger a sync.
func newCaches(kube kubernetes.Interface, juneau versioned.Interface, nodeName string) *caches {
	const resync = 0
	onNode := func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
	}
	// Every cache drops managedFields (and keeps one copy of the strings every object
	// repeats, cached.Lean), the attachments' and ElasticIPs' keep only what the
	// agent reads (agent.TrimAttachment, agent.TrimElasticIP), the Nodes' only their
	// addresses and Pod CIDRs (cached.Node): with 100,000 ElasticIPs and 1,000 Nodes in
	// the cluster, what every agent caches of them whole is most of its memory
	// (docs/performance.md#scale).
	lean := cached.Lean
	f := &factories{
		attachments: juneauinformers.NewSharedInformerFactoryWithOptions(juneau, resync, juneauinformers.WithTransform(agent.TrimAttachment)),
		onNode: juneauinformers.NewSharedInformerFactoryWithOptions(juneau, resync, juneauinformers.WithTweakListOptions(onNode),
			juneauinformers.WithTransform(lean)),
		juneau: juneauinformers.NewSharedInformerFactoryWithOptions(juneau, resync, juneauinformers.WithTransform(lean)),
		kube:   kubeinformers.NewSharedInformerFactoryWithOptions(kube, resync, kubeinformers.WithTransform(lean)),
		pods:   kubeinformers.NewSharedInformerFactoryWithOptions(kube, resync, kubeinformers.WithTweakListOptions(onNode), kubeinformers.WithTransform(lean)),
	}
	c := &caches{}
	c.factories = append(c.factories, f.attachments, f.onNode, f.kube, f.pods, f.juneau)
	var direct []cache.InformerSynced
	for _, k := range kinds {
		inf := k.cache(f, &c.listers)
		c.informers = append(c.informers, inf)
		if k.direct {
			direct = append(direct, inf.HasSynced)
		}
	}
	c.direct = &agent.DirectSource{Pods: c.listers.Pods, NICs: c.listers.NICs, ElasticIPs: c.listers.ElasticIPs, Synced: func() bool {
		for _, synced := range direct {
			if !synced() {
				return false
			}
		}
		return true
	}}
	return c
}

// informerOf is the informer of the kind named name (of kinds).
func (c *caches) informerOf(name string) cache.SharedIndexInformer {
	for i, k := range kinds {
		if k.name == name {
			return c.informers[i]
		}
	}
	panic("no kind " + name)
}

// watch makes every event of every kind trigger a sync of a.
func (c *caches) watch(a *agent.Agent) error { return a.Watch(c.informers...) }

// start starts every informer; they stop when stop is closed.
func (c *caches) start(stop <-chan struct{}) {
	for _, f := range c.factories {
		f.Start(stop)
	}
}

// shutdown waits for the informers to stop, after stop was closed.
func (c *caches) shutdown() {
	for i := len(c.factories) - 1; i >= 0; i-- {
		c.factories[i].Shutdown()
	}
}
