package admission

import (
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Live reads are the webhook's only load on the API server besides its informers: a
// GET confirming that an object missing from the cache is missing, and a list checking
// once more a conflict the cache did not show (see confirmed). Anyone who can reach the
// webhook can send it reviews, so these reads are bounded by one budget, and a list of
// a whole kind is shared: at most one per kind is in flight, and every review that
// asks while one runs gets the next, which starts after it asked. Reviews thus never
// cause a list each, and a flood of reviews costs the API server at most the budget.
const (
	// liveReadsPerSecond and liveReadsBurst size the budget. A review of a real write
	// makes a live read or two, and only when its cache shows nothing in the way.
	liveReadsPerSecond = 20
	liveReadsBurst     = 50
	// liveReadUnit is the API server's time one read of the budget stands for. A list
	// that takes longer counts as that many reads: the API server scans every object
	// of the kind (of the namespace) for a field selector, so a list costs it more as
	// the objects grow, and more still when it is loaded. The budget thus bounds the
	// time the webhook's live reads take from the API server per second, whatever the
	// number of objects (docs/performance.md#scale).
	liveReadUnit = 10 * time.Millisecond
)

// ErrNoBudget: the budget of live reads is spent. A re-check is then skipped (the
// cache's answer stands; the controllers resolve the races it misses), and a GET is
// answered "too many requests" (the API server's user retries).
var ErrNoBudget = errors.New("the webhook is reading the API server at its limit")

// liveReads keeps the budget and the shared lists. A nil *liveReads allows every read
// and shares none (unit tests).
type liveReads struct {
	limiter *rate.Limiter
	metrics *Metrics

	mu    sync.Mutex
	kinds map[string]*kindLists
}

func newLiveReads() *liveReads {
	return &liveReads{limiter: rate.NewLimiter(liveReadsPerSecond, liveReadsBurst), kinds: map[string]*kindLists{}}
}

// kindLists are the lists of one kind: whether one runs, and the one that starts next.
type kindLists struct {
	running bool
	next    *listRound
}

type listRound struct {
	done    chan struct{}
	waiters int // reviews waiting for it
	items   any
	err     error
}

// allow takes one read from the budget for a read of what.
func (l *liveReads) allow(what string) bool {
	if l == nil {
		return true
	}
	if !l.limiter.Allow() {
		l.metrics.liveRead(what, "skipped")
		return false
	}
	l.metrics.liveRead(what, "read")
	return true
}

// charge counts a live list that took took as the reads it stands for, beyond the one
// allow took before it: the budget goes into debt, and the reads after it wait for it
// to be paid back.
func (l *liveReads) charge(took time.Duration) {
	if l == nil {
		return
	}
	if extra := min(int(took/liveReadUnit)-1, liveReadsBurst); extra > 0 {
		l.limiter.ReserveN(time.Now(), extra)
	}
}

// timed runs a live list and charges the budget for its time.
func timed[T any](l *liveReads, list func() (T, error)) (T, error) {
	start := time.Now()
	got, err := list()
	l.charge(time.Since(start))
	return got, err
}

// sharedList returns the result of a list of kind that started after the call, made
// by list; callers asking while a list of the kind runs share the next one.
func sharedList[T any](ctx context.Context, l *liveReads, kind string, list func(context.Context) ([]T, error)) ([]T, error) {
	if l == nil {
		return list(ctx)
	}
	l.mu.Lock()
	k := l.kinds[kind]
	if k == nil {
		k = &kindLists{}
		l.kinds[kind] = k
	}
	r := k.next
	if r == nil {
		if !l.allow(kind) {
			l.mu.Unlock()
			return nil, ErrNoBudget
		}
		r = &listRound{done: make(chan struct{})}
		k.next = r
		if !k.running {
			l.start(kind, k, func(ctx context.Context) (any, error) { return list(ctx) })
		}
	} else {
		l.metrics.liveRead(kind, "shared")
	}
	r.waiters++
	l.mu.Unlock()
	select {
	case <-r.done:
		if r.err != nil {
			return nil, r.err
		}
		return r.items.([]T), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// start runs k.next (l.mu held); when it ends, the round that gathered meanwhile starts.
func (l *liveReads) start(kind string, k *kindLists, list func(context.Context) (any, error)) {
	r := k.next
	k.next, k.running = nil, true
	go func() {
		// The list serves several reviews: it has its own deadline, not one caller's.
		ctx, cancel := context.WithTimeout(context.Background(), reviewTimeout)
		defer cancel()
		r.items, r.err = timed(l, func() (any, error) { return list(ctx) })
		close(r.done)
		l.mu.Lock()
		defer l.mu.Unlock()
		k.running = false
		if k.next != nil {
			l.start(kind, k, list)
		}
	}()
}
