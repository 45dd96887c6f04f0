// Package manager builds every controller of `juneau controller` on shared informers and
// runs them: the one list of controllers (controllers, below), the informer factories
// they share, and the order of start-up — build every controller (each registers its
// handlers and indexes), start the informers, wait for their caches, run the
// controllers (docs/design.md#controllers).
package manager

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/loutres/juneau/pkg/apis/juneau/cached"
	"github.com/loutres/juneau/pkg/apis/juneau/tenancy"
	"github.com/loutres/juneau/pkg/controllers/webhookreplicas"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	juneauinformers "github.com/loutres/juneau/pkg/generated/informers/externalversions"
	"github.com/loutres/juneau/pkg/workloop"
)

// Config is what the controllers are built from.
type Config struct {
	Kube   kubernetes.Interface
	Juneau versioned.Interface
	// Recorder records every controller's Events.
	Recorder record.EventRecorder
	// Registerer gets the controllers' metrics and the work queues'.
	Registerer prometheus.Registerer
	// Resync is the informers' resync period.
	Resync time.Duration
	// LeaseNamespace holds the node agents' heartbeat Leases.
	LeaseNamespace string
	// OrphanGrace is how long a claim whose consumer is gone stays before it is deleted.
	OrphanGrace time.Duration
	// StatefulKinds are the workload kinds, besides apps/StatefulSet, whose Pods keep
	// their automatic ElasticIP when re-created under the same name.
	StatefulKinds []schema.GroupKind
	// WebhookReplicas find and probe the webhook's replicas; an Interval of 0 turns
	// the probing off.
	WebhookReplicas webhookreplicas.Options
}

// runner is a built controller.
type runner interface {
	Run(ctx context.Context, workers int)
}

// Manager holds the shared informer factories and the controllers built on them.
type Manager struct {
	cfg    Config
	queues workqueue.MetricsProvider
	// kube and juneau are cluster-wide; leases watches only LeaseNamespace.
	kube      kubeinformers.SharedInformerFactory
	juneau    juneauinformers.SharedInformerFactory
	leases    kubeinformers.SharedInformerFactory
	factories []factory
	runners   []runner
}

// factory is what Manager needs of an informer factory.
type factory interface {
	Start(stop <-chan struct{})
	WaitForCacheSync(stop <-chan struct{}) map[reflect.Type]bool
	Shutdown()
}

// New builds every controller of the list; it starts nothing.
func New(cfg Config) (*Manager, error) {
	queues, err := workloop.NewQueueMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	// The caches hold no managedFields (nothing reads them, and they are a large part
	// of the controller's memory, docs/performance.md, row 6) and one copy of the
	// strings every object repeats (cached.Lean).
	m := &Manager{
		cfg:    cfg,
		queues: queues,
		kube:   kubeinformers.NewSharedInformerFactoryWithOptions(cfg.Kube, cfg.Resync, kubeinformers.WithTransform(cached.Lean)),
		juneau: juneauinformers.NewSharedInformerFactoryWithOptions(cfg.Juneau, cfg.Resync, juneauinformers.WithTransform(cached.Lean)),
		leases: kubeinformers.NewSharedInformerFactoryWithOptions(cfg.Kube, cfg.Resync, kubeinformers.WithNamespace(cfg.LeaseNamespace),
			kubeinformers.WithTransform(cached.Lean)),
	}
	m.factories = []factory{m.kube, m.juneau, m.leases}
	// Of a Namespace, only its name and labels are read (the networks' namespaceSelectors).
	if err := m.kube.Core().V1().Namespaces().Informer().SetTransform(tenancy.TrimNamespace); err != nil {
		return nil, fmt.Errorf("trimming cached Namespaces: %w", err)
	}
	// Of Pods and Nodes, only what a controller reads (docs/performance.md#scale).
	if err := m.kube.Core().V1().Pods().Informer().SetTransform(cached.Pod); err != nil {
		return nil, fmt.Errorf("trimming cached Pods: %w", err)
	}
	if err := m.kube.Core().V1().Nodes().Informer().SetTransform(cached.Node); err != nil {
		return nil, fmt.Errorf("trimming cached Nodes: %w", err)
	}
	for _, c := range controllers {
		r, err := c.build(m)
		if err != nil {
			return nil, fmt.Errorf("%s controller: %w", c.name, err)
		}
		m.runners = append(m.runners, r)
	}
	return m, nil
}

// Run starts the informers, waits for their caches, calls ready, and runs every
// controller with workers workers until ctx ends.
func (m *Manager) Run(ctx context.Context, workers int, ready func()) error {
	for _, f := range m.factories {
		f.Start(ctx.Done())
		defer f.Shutdown()
	}
	for _, f := range m.factories {
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("cache of %v did not sync", typ)
			}
		}
	}
	ready()
	var g errgroup.Group
	for _, r := range m.runners {
		g.Go(func() error { r.Run(ctx, workers); return nil })
	}
	return g.Wait()
}
