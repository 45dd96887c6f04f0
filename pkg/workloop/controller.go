package workloop

import (
	"context"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Options tune a controller's loop: where it reports, and the clock that stamps its
// condition transitions.
type Options struct {
	// Errors counts failed syncs; may be nil.
	Errors ErrorCounter
	// QueueMetrics receives the work queue's metrics (NewQueueMetrics); may be nil.
	QueueMetrics workqueue.MetricsProvider
	// Clock stamps condition transitions; nil means the real clock.
	Clock clock.PassiveClock
}

// Controller is what every single-loop controller has in common: its Loop, the
// informers that feed it and its Clock. A controller embeds it, adds its handlers
// with Watch and is run by Run (docs/design.md#controllers).
type Controller struct {
	Loop   *Loop
	Clock  clock.PassiveClock
	synced []cache.InformerSynced
}

// NewController makes the loop named name around sync; nothing runs until Run.
func NewController(name string, sync SyncFunc, opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Controller{
		Loop:  New(name, sync, Config{Errors: opts.Errors, Metrics: opts.QueueMetrics}),
		Clock: opts.Clock,
	}
}

// Watch adds each handler to its informer; Run waits for those informers' caches.
func (c *Controller) Watch(watches ...Watch) error {
	synced, err := Register(watches)
	if err != nil {
		return err
	}
	c.synced = append(c.synced, synced...)
	return nil
}

// Run waits for the watched caches and runs workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.Loop.Run(ctx, workers, c.synced...)
}
