// Package workloop is the work loop every juneau controller and the node agent share.
//
// Loop is a controller's: a named, typed, rate-limited queue of object keys, workers
// that call a sync function, and one error policy (retry with back-off up to a budget,
// then drop and count; a write a webhook could not be called for, soon). Single is the
// node agent's: one key, so that every event asks for one sync of the whole node, at
// most one sync per minimum interval, a full one at least every resync period, retried
// with back-off after a failure. Both report the
// workqueue metrics of client-go on the registry given (NewQueueMetrics).
package workloop

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// MaxRetries is the retry budget of one key before it is dropped until its next event.
const MaxRetries = 15

// A write the API server could not get past an admission webhook because it could not
// call it (WebhookUnreachable: a replica on a Node that died, which the webhook's
// Service lists until that Node is declared NotReady, tens of seconds later) is tried
// again after WebhookRetry, not after the growing back-off: each call may reach another
// replica. After WebhookRetries such retries in a row the back-off takes over: then
// the webhook is down, not one replica.
const (
	WebhookRetry   = 200 * time.Millisecond
	WebhookRetries = 10
)

// WebhookUnreachable reports whether err is the API server's failure to call an
// admission webhook (an internal error "failed calling webhook"), as opposed to the
// webhook's answer.
func WebhookUnreachable(err error) bool {
	return apierrors.IsInternalError(err) && strings.Contains(err.Error(), "failed calling webhook")
}

// SyncFunc reconciles one key ("name" or "namespace/name").
type SyncFunc func(ctx context.Context, key string) error

// ErrorCounter counts sync errors; a Prometheus counter satisfies it.
type ErrorCounter interface{ Inc() }

// Loop owns a queue and the workers draining it.
type Loop struct {
	name   string
	queue  workqueue.TypedRateLimitingInterface[string]
	sync   SyncFunc
	errors ErrorCounter
	// byName counts failed syncs by controller (NewQueueMetrics); may be nil.
	byName ErrorCounter
	// webhookRetries counts the WebhookRetry retries in a row of each key.
	mu             sync.Mutex
	webhookRetries map[string]int
}

// Config says where a loop reports.
type Config struct {
	// Errors counts failed syncs; may be nil.
	Errors ErrorCounter
	// Metrics receives the queue's workqueue metrics (NewQueueMetrics); nil leaves them
	// to client-go's global provider, which records nothing unless a program sets one.
	Metrics workqueue.MetricsProvider
}

// New makes a loop; nothing runs until Run.
func New(name string, sync SyncFunc, cfg Config) *Loop {
	return &Loop{
		name: name,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: name, MetricsProvider: cfg.Metrics}),
		sync:           sync,
		errors:         cfg.Errors,
		byName:         syncErrorsOf(cfg.Metrics, name),
		webhookRetries: map[string]int{},
	}
}

// Name of the loop (and its queue).
func (l *Loop) Name() string { return l.name }

// Add enqueues a key.
func (l *Loop) Add(key string) { l.queue.Add(key) }

// AddAfter enqueues a key once d has passed: the only way controllers wait.
func (l *Loop) AddAfter(key string, d time.Duration) { l.queue.AddAfter(key, d) }

// AddObject enqueues the key of an object, unwrapping delete tombstones.
func (l *Loop) AddObject(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("%s: key of %T: %w", l.name, obj, err))
		return
	}
	l.queue.Add(key)
}

// Len is the number of queued keys (for tests and metrics).
func (l *Loop) Len() int { return l.queue.Len() }

// Handler maps every informer event of the watched kind to the object's own key.
func (l *Loop) Handler() cache.ResourceEventHandler {
	return Funcs(func(obj any) { l.AddObject(obj) })
}

// Funcs turns one mapping function into a handler for add, update (new object) and
// delete (tombstones unwrapped) events. The function must only enqueue keys.
func Funcs(fn func(obj any)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    fn,
		UpdateFunc: func(_, newObj any) { fn(newObj) },
		DeleteFunc: func(obj any) { fn(Unwrap(obj)) },
	}
}

// Unwrap returns the object inside a delete tombstone, or obj itself.
func Unwrap(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

// Run waits for the caches, starts workers and blocks until ctx ends.
func (l *Loop) Run(ctx context.Context, workers int, synced ...cache.InformerSynced) {
	defer utilruntime.HandleCrash()
	logger := klog.FromContext(ctx).WithValues("controller", l.name)
	ctx = klog.NewContext(ctx, logger)
	go func() {
		<-ctx.Done()
		l.queue.ShutDown()
	}()
	logger.Info("Starting controller")
	defer logger.Info("Shutting down controller")
	if !cache.WaitForNamedCacheSync(l.name, ctx.Done(), synced...) {
		return
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait.UntilWithContext(ctx, l.worker, time.Second)
		}()
	}
	wg.Wait()
}

func (l *Loop) worker(ctx context.Context) {
	for l.processNext(ctx) {
	}
}

func (l *Loop) processNext(ctx context.Context) bool {
	key, quit := l.queue.Get()
	if quit {
		return false
	}
	defer l.queue.Done(key)
	err := l.sync(ctx, key)
	l.handleErr(ctx, key, err)
	return true
}

// handleErr is the one error policy: forget on success, back off on error until the
// retry budget is spent, then drop the key (its next event brings it back).
func (l *Loop) handleErr(ctx context.Context, key string, err error) {
	if err == nil {
		l.queue.Forget(key)
		l.countWebhookRetry(key, false)
		return
	}
	if l.errors != nil {
		l.errors.Inc()
	}
	if l.byName != nil {
		l.byName.Inc()
	}
	logger := klog.FromContext(ctx)
	if WebhookUnreachable(err) {
		if n := l.countWebhookRetry(key, true); n <= WebhookRetries {
			logger.V(2).Info("Sync failed calling a webhook, retrying soon", "key", key, "retries", n, "err", err)
			l.queue.AddAfter(key, WebhookRetry)
			return
		}
	} else {
		l.countWebhookRetry(key, false)
	}
	if n := l.queue.NumRequeues(key); n < MaxRetries {
		logger.V(2).Info("Sync failed, retrying", "key", key, "retries", n, "err", err)
		l.queue.AddRateLimited(key)
		return
	}
	l.queue.Forget(key)
	l.countWebhookRetry(key, false)
	utilruntime.HandleErrorWithContext(ctx, err, "Dropping key out of the queue", "key", key)
}

// countWebhookRetry counts one more WebhookRetry retry of key and returns how many in a
// row it made, or forgets them (another outcome).
func (l *Loop) countWebhookRetry(key string, failed bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !failed {
		delete(l.webhookRetries, key)
		return 0
	}
	l.webhookRetries[key]++
	return l.webhookRetries[key]
}

// Watch pairs an informer with the handler that maps its events to keys.
type Watch struct {
	Informer cache.SharedIndexInformer
	Handler  cache.ResourceEventHandler
}

// Register adds every handler to its informer and returns the informers' HasSynced
// functions for Run.
func Register(watches []Watch) ([]cache.InformerSynced, error) {
	synced := make([]cache.InformerSynced, 0, len(watches))
	for _, w := range watches {
		if _, err := w.Informer.AddEventHandler(w.Handler); err != nil {
			return nil, fmt.Errorf("adding event handler: %w", err)
		}
		synced = append(synced, w.Informer.HasSynced)
	}
	return synced, nil
}

// SpecFuncs is Funcs for objects whose status updates do not matter to the watcher:
// an update calls fn only when metadata.generation changed (a spec change), so status
// writes by other controllers cost nothing.
func SpecFuncs(fn func(obj any)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: fn,
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(metav1.Object)
			n, ok2 := newObj.(metav1.Object)
			if !ok1 || !ok2 || o.GetGeneration() != n.GetGeneration() {
				fn(newObj)
			}
		},
		DeleteFunc: func(obj any) { fn(Unwrap(obj)) },
	}
}
