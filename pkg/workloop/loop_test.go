package workloop

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
