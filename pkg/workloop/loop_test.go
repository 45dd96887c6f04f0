package workloop

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

type counter struct{ n atomic.Int64 }

func (c *counter) Inc() { c.n.Add(1) }

func TestLoopRetriesThenSucceeds(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var calls atomic.Int64
	errs := &counter{}
	l := New("test", func(_ context.Context, key string) error {
		if key != "ns/a" {
			t.Errorf("key = %q", key)
		}
		if calls.Add(1) < 3 {
			return errors.New("transient")
		}
		return nil
	}, Config{Errors: errs})
	go l.Run(ctx, 1)
	l.AddObject(&v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}})
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return calls.Load() == 3, nil
	}); err != nil {
		t.Fatalf("sync called %d times, want 3", calls.Load())
	}
	if errs.n.Load() != 2 {
		t.Errorf("errors counted %d, want 2", errs.n.Load())
	}
}

func TestUnwrapTombstone(t *testing.T) {
	obj := &v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}
	if got := Unwrap(cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: obj}); got != obj {
		t.Errorf("Unwrap(tombstone) = %v", got)
	}
	if got := Unwrap(obj); got != obj {
		t.Errorf("Unwrap(obj) = %v", got)
	}
}

func TestHandleErrDropsAfterBudget(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	l := New("budget", nil, Config{})
	for range MaxRetries {
		l.handleErr(ctx, "k", errors.New("x"))
	}
	if n := l.queue.NumRequeues("k"); n != MaxRetries {
		t.Fatalf("requeues = %d, want %d", n, MaxRetries)
	}
	l.handleErr(ctx, "k", errors.New("x"))
	if n := l.queue.NumRequeues("k"); n != 0 {
		t.Errorf("after the budget the key is forgotten; requeues = %d", n)
	}
	l.queue.ShutDown()
}

// A write the API server could not get past an unreachable webhook replica is tried again
// after WebhookRetry, without the back-off, WebhookRetries times in a row; then the
// back-off takes over. A webhook's refusal is no such failure.
func TestWebhookUnreachableRetriesSoon(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	l := New("webhook", nil, Config{})
	defer l.queue.ShutDown()
	unreachable := fmt.Errorf("writing annotations: %w", apierrors.NewInternalError(errors.New(
		`failed calling webhook "pods.validate.juneau.loutres.me": failed to call webhook: Post "https://juneau-webhook.juneau-system.svc:443/validate-pods?timeout=5s": context deadline exceeded`)))
	refused := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "web",
		errors.New(`admission webhook "pods.validate.juneau.loutres.me" denied the request`))
	if !WebhookUnreachable(unreachable) || WebhookUnreachable(refused) || WebhookUnreachable(errors.New("failed calling webhook")) {
		t.Fatalf("WebhookUnreachable: unreachable %v, refused %v, plain %v",
			WebhookUnreachable(unreachable), WebhookUnreachable(refused), WebhookUnreachable(errors.New("failed calling webhook")))
	}
	start := time.Now()
	l.handleErr(ctx, "ns/web", unreachable)
	key, _ := l.queue.Get()
	if took := time.Since(start); key != "ns/web" || took < WebhookRetry || took > WebhookRetry+time.Second {
		t.Fatalf("got %q back after %s, want ns/web after %s", key, took, WebhookRetry)
	}
	l.queue.Done(key)
	if n := l.queue.NumRequeues("ns/web"); n != 0 {
		t.Errorf("a soon retry counted %d back-off requeues, want 0", n)
	}
	for range WebhookRetries {
		l.handleErr(ctx, "ns/web", unreachable)
	}
	if n := l.queue.NumRequeues("ns/web"); n != 1 {
		t.Errorf("after %d soon retries, back-off requeues %d, want 1", WebhookRetries, n)
	}
	l.handleErr(ctx, "ns/web", nil)
	l.handleErr(ctx, "ns/web", unreachable)
	if n := l.queue.NumRequeues("ns/web"); n != 0 {
		t.Errorf("after a success the soon retries start again; back-off requeues %d", n)
	}
}
