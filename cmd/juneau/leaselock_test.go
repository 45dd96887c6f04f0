package main

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ctxLock records the context of each request.
type ctxLock struct {
	resourcelock.Interface
	seen []error
}

func (l *ctxLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	_, hasDeadline := ctx.Deadline()
	if !hasDeadline {
		l.seen = append(l.seen, context.DeadlineExceeded)
	}
	l.seen = append(l.seen, ctx.Err())
	return nil, nil, nil
}

func (l *ctxLock) Create(ctx context.Context, _ resourcelock.LeaderElectionRecord) error {
	_, _, err := l.Get(ctx)
	return err
}

func (l *ctxLock) Update(ctx context.Context, _ resourcelock.LeaderElectionRecord) error {
	_, _, err := l.Get(ctx)
	return err
}

// TestFinishingLockOutlivesTheStop: a request to the Lease made as the process stops
// runs with a live context bounded by the timeout, not the stopped one.
func TestFinishingLockOutlivesTheStop(t *testing.T) {
	inner := &ctxLock{}
	l := finishingLock{Interface: inner, timeout: time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, _ = l.Get(ctx)
	_ = l.Create(ctx, resourcelock.LeaderElectionRecord{})
	_ = l.Update(ctx, resourcelock.LeaderElectionRecord{})
	if len(inner.seen) != 3 {
		t.Fatalf("requests saw %v, want 3 live contexts with a deadline", inner.seen)
	}
	for i, err := range inner.seen {
		if err != nil {
			t.Errorf("request %d ran with a finished context: %v", i, err)
		}
	}
}
