package main

import (
	"context"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// finishingLock is a Lease lock whose requests, once started, finish even when the
// process is told to stop: client-go's elector reads and renews the Lease with the
// context it runs under, so a stop during a request cut it short and the elector logged
// that as an error ("Error retrieving lease lock ... context canceled") on a healthy
// shutdown. Each request gets at most timeout; the elector still stops at its next
// check of the context, and releases the Lease (ReleaseOnCancel).
type finishingLock struct {
	resourcelock.Interface
	timeout time.Duration
}

func (l finishingLock) finishing(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
}

func (l finishingLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	ctx, cancel := l.finishing(ctx)
	defer cancel()
	return l.Interface.Get(ctx)
}

func (l finishingLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	ctx, cancel := l.finishing(ctx)
	defer cancel()
	return l.Interface.Create(ctx, r)
}

func (l finishingLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	ctx, cancel := l.finishing(ctx)
	defer cancel()
	return l.Interface.Update(ctx, r)
}
