package wiring

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// recordingLeases records, for each call the lease controller makes, whether its
// context was already done and when it would end.
type recordingLeases struct {
	coordinationclient.LeaseInterface
	got []call
}

type call struct {
	err         error
	deadline    time.Time
	hasDeadline bool
}

func (r *recordingLeases) record(ctx context.Context) {
	d, ok := ctx.Deadline()
	r.got = append(r.got, call{err: ctx.Err(), deadline: d, hasDeadline: ok})
}

func (r *recordingLeases) Get(ctx context.Context, _ string, _ metav1.GetOptions) (*coordinationv1.Lease, error) {
	r.record(ctx)
	return &coordinationv1.Lease{}, nil
}

func (r *recordingLeases) Create(ctx context.Context, l *coordinationv1.Lease, _ metav1.CreateOptions) (*coordinationv1.Lease, error) {
	r.record(ctx)
	return l, nil
}

func (r *recordingLeases) Update(ctx context.Context, l *coordinationv1.Lease, _ metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	r.record(ctx)
	return l, nil
}

// TestHeartbeatOutlivesShutdown: the heartbeat's Lease requests made with the agent's
// context after it ended still run, each bounded by heartbeatRequestTimeout, so a
// renewal in flight at shutdown completes instead of failing (and being logged at
// error level by client-go's lease controller).
func TestHeartbeatOutlivesShutdown(t *testing.T) {
	leases := detachedLeases{fake.NewClientset()}.CoordinationV1().Leases("juneau-node")
	if _, ok := leases.(detachedLeaseClient); !ok {
		t.Fatalf("the heartbeat's Lease client is %T, not detached", leases)
	}
	rec := &recordingLeases{}
	c := detachedLeaseClient{rec}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "juneau-node-node-a"}}
	_, _ = c.Get(ctx, l.Name, metav1.GetOptions{})
	_, _ = c.Create(ctx, l, metav1.CreateOptions{})
	_, _ = c.Update(ctx, l, metav1.UpdateOptions{})
	if len(rec.got) != 3 {
		t.Fatalf("%d calls reached the client, want 3", len(rec.got))
	}
	for i, got := range rec.got {
		if got.err != nil || !got.hasDeadline || time.Until(got.deadline) > heartbeatRequestTimeout {
			t.Errorf("call %d: context %v, deadline %v (set %v); want a live one ending within %v", i, got.err, got.deadline, got.hasDeadline, heartbeatRequestTimeout)
		}
	}
}
