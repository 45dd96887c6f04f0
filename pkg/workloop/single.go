package workloop

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// singleKey is the one key of a Single's queue.
const singleKey = "sync"

// FullSyncFunc syncs everything; full asks it to rebuild rather than trust what it
// applied before (after a failure, and every resync period).
type FullSyncFunc func(ctx context.Context, full bool) error

// SingleConfig tunes a Single. Zero values take the defaults.
type SingleConfig struct {
	// MinInterval is the least time between the starts of two syncs (default 10ms): a
	// burst of events costs one sync. The gap is also at least twice the last sync's
	// duration, up to MaxInterval (default 1s), so that a loop whose syncs grow long (a
	// Node with 100,000 mappings) spends at most about half its time syncing, however
	// fast events come, while short syncs follow a change within MinInterval. Time the
	// sync spent waiting for another process (Waited: an API request) does not count:
	// the gap bounds the loop's own work. The cap keeps a sync that was long anyway from
	// holding the next one back for as long again.
	MinInterval, MaxInterval time.Duration
	// Resync is the period of full syncs (default 1m).
	Resync time.Duration
	// RetryBase and RetryMax bound the exponential back-off after failed syncs
	// (defaults 100ms and 30s).
	RetryBase, RetryMax time.Duration
	// Clock drives every wait (default: the real clock).
	Clock clock.WithTicker
	// Metrics receives the queue's workqueue metrics; nil: client-go's global provider.
	Metrics workqueue.MetricsProvider
}

// Single runs one sync function for a whole component (the node agent): every Trigger
// asks for a sync; triggers arriving while one is queued or running coalesce into one;
// syncs start at least MinInterval, and twice the last sync's duration less its
// waits (Waited; up to MaxInterval), apart; a full sync comes at least every Resync
// (through AddAfter); a failed sync is retried with exponential back-off and makes the
// next one full. The queue is a rate-limited workqueue of one key.
type Single struct {
	name string
	sync FullSyncFunc
	cfg  SingleConfig

	queue atomic.Pointer[workqueue.TypedRateLimitingInterface[string]]
	// Read and written by the one worker only: the start of the last sync and of the
	// last full one, and how long the last sync took.
	last, lastFull time.Time
	lastTook       time.Duration
	failed         bool
	// waited is what the sync under way reported waiting for (Waited).
	waited time.Duration
	// errors counts failed syncs by loop name (NewQueueMetrics); may be nil.
	errors ErrorCounter
}

// NewSingle makes a Single; nothing runs until Run.
func NewSingle(name string, sync FullSyncFunc, cfg SingleConfig) *Single {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.MinInterval, 10*time.Millisecond)
	def(&cfg.MaxInterval, time.Second)
	def(&cfg.Resync, time.Minute)
	def(&cfg.RetryBase, 100*time.Millisecond)
	def(&cfg.RetryMax, 30*time.Second)
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Single{name: name, sync: sync, cfg: cfg, errors: syncErrorsOf(cfg.Metrics, name)}
}

// TransientRetries is how many times in a row a sync may fail with a transient error
// (Transient) before its failure is logged as an error.
const TransientRetries = 3

// Transient reports whether a failed sync, retried retries times already, is what a
// healthy cluster sees now and then and the next try mends: a conflict (another writer
// came first) or a NotFound (the object went away while the cache still held it). Such
// a failure is no error unless it keeps coming back.
func Transient(err error, retries int) bool {
	return retries < TransientRetries && (apierrors.IsConflict(err) || apierrors.IsNotFound(err))
}

// stopping reports a sync that failed because the loop is being stopped (its context
// ended: the process shuts down, or hands over to a successor): nothing is wrong then.
func stopping(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ctx.Err()))
}

// Waited tells the loop that the sync under way spent d waiting for another process
// (an API request), which the gap before the next sync does not count. Called by the
// sync function only.
func (s *Single) Waited(d time.Duration) { s.waited += d }

// Trigger asks for a sync. Before Run it does nothing: Run starts with a sync anyway.
func (s *Single) Trigger() {
	if q := s.queue.Load(); q != nil {
		(*q).Add(singleKey)
	}
}

// Run syncs until ctx ends, starting at once.
func (s *Single) Run(ctx context.Context) {
	defer utilruntime.HandleCrash()
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](s.cfg.RetryBase, s.cfg.RetryMax),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: s.name, Clock: s.cfg.Clock, MetricsProvider: s.cfg.Metrics})
	s.queue.Store(&q)
	defer q.ShutDown()
	go func() {
		<-ctx.Done()
		q.ShutDown()
	}()
	q.Add(singleKey)
	for s.processNext(ctx, q) {
	}
}

func (s *Single) processNext(ctx context.Context, q workqueue.TypedRateLimitingInterface[string]) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	now := s.cfg.Clock.Now()
	gap := max(s.cfg.MinInterval, min(2*s.lastTook, s.cfg.MaxInterval))
	if wait := gap - now.Sub(s.last); !s.last.IsZero() && wait > 0 {
		q.AddAfter(key, wait)
		return true
	}
	full := s.failed || s.lastFull.IsZero() || now.Sub(s.lastFull) >= s.cfg.Resync
	s.last, s.waited = now, 0
	err := s.sync(ctx, full)
	s.lastTook = max(0, s.cfg.Clock.Since(now)-s.waited)
	if err != nil {
		s.failed = true
		if s.errors != nil {
			s.errors.Inc()
		}
		logger, retries := klog.FromContext(ctx), q.NumRequeues(key)
		if Transient(err, retries) || stopping(ctx, err) {
			logger.V(2).Info("Sync failed; the next one is full", "loop", s.name, "retries", retries, "err", err)
		} else {
			logger.Error(err, "Sync failed; the next one is full", "loop", s.name, "retries", retries)
		}
		q.AddRateLimited(key)
		return true
	}
	s.failed = false
	q.Forget(key)
	if full {
		s.lastFull = now
	}
	// The delaying queue keeps the earliest of several AddAfters of one key, so this
	// brings the next full sync at most Resync after the last one.
	q.AddAfter(key, s.cfg.Resync)
	return true
}
