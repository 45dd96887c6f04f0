package wiring

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// heartbeatRequestTimeout bounds each request of the heartbeat once it no longer ends
// with the agent's context.
const heartbeatRequestTimeout = 5 * time.Second

// detachedLeases is kube for the heartbeat: its Lease requests are not cut by the
// agent's shutdown. client-go's lease controller logs a request that its context
// cancelled at error level, and retries it at once with the same context, so a renewal
// in flight when the agent stops would log half a dozen errors in a plain rollout. The
// controller starts no renewal once its context is done; the one in flight completes
// (within heartbeatRequestTimeout) and the controller returns.
type detachedLeases struct{ kubernetes.Interface }

func (d detachedLeases) CoordinationV1() coordinationclient.CoordinationV1Interface {
	return detachedCoordination{d.Interface.CoordinationV1()}
}

type detachedCoordination struct {
	coordinationclient.CoordinationV1Interface
}

func (d detachedCoordination) Leases(namespace string) coordinationclient.LeaseInterface {
	return detachedLeaseClient{d.CoordinationV1Interface.Leases(namespace)}
}

// detachedLeaseClient detaches the calls the lease controller makes: Get, Create and
// Update (Delete only in Start and Stop, which the agent does not call).
type detachedLeaseClient struct {
	coordinationclient.LeaseInterface
}

func detach(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), heartbeatRequestTimeout)
}

func (c detachedLeaseClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	ctx, cancel := detach(ctx)
	defer cancel()
	return c.LeaseInterface.Get(ctx, name, opts)
}

func (c detachedLeaseClient) Create(ctx context.Context, l *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	ctx, cancel := detach(ctx)
	defer cancel()
	return c.LeaseInterface.Create(ctx, l, opts)
}

func (c detachedLeaseClient) Update(ctx context.Context, l *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	ctx, cancel := detach(ctx)
	defer cancel()
	return c.LeaseInterface.Update(ctx, l, opts)
}
