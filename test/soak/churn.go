package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func eipName(i int) string { return fmt.Sprintf("eip-%05d", i) }

func attName(pod string) string { return pod + "-att" }

// create creates n new ElasticIPs and waits until each is Available.
func (s *soak) create(ctx context.Context, n int) {
	first := s.next
	err := s.parallel(ctx, n, func(ctx context.Context, i int) error {
		_, err := s.cp.Juneau.JuneauV1alpha1().ElasticIPs(s.ns).Create(ctx, &v1alpha1.ElasticIP{
			ObjectMeta: metav1.ObjectMeta{Name: eipName(first + i)},
			Spec:       v1alpha1.ElasticIPSpec{ExternalNetwork: network},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) { // a retry after a create that timed out but went through
			return nil
		}
		return err
	})
	if err != nil {
		s.r.Fatalf("creating ElasticIPs: %v", err)
	}
	for i := range n {
		s.live = append(s.live, first+i)
	}
	s.next += n
	s.created += n
	s.waitFor(ctx, fmt.Sprintf("%d new ElasticIPs Available", n), func() (bool, string) {
		ok := 0
		for i := first; i < first+n; i++ {
			e, err := s.eips.ElasticIPs(s.ns).Get(eipName(i))
			if err == nil && e.Status.Phase == v1alpha1.ElasticIPAvailable {
				ok++
			}
		}
		return ok == n, fmt.Sprintf("%d of %d", ok, n)
	})
}

// attachNewest attaches the newest ElasticIPs, one to each Pod's eth0, and waits until
// each is Attached and its Node answers for it.
func (s *soak) attachNewest(ctx context.Context) {
	newest := s.live[len(s.live)-len(s.pods):]
	err := s.parallel(ctx, len(s.pods), func(ctx context.Context, i int) error {
		_, err := s.cp.Juneau.JuneauV1alpha1().ElasticIPAttachments(s.ns).Create(ctx, &v1alpha1.ElasticIPAttachment{
			ObjectMeta: metav1.ObjectMeta{Name: attName(s.pods[i])},
			Spec: v1alpha1.ElasticIPAttachmentSpec{ElasticIPRef: v1alpha1.ElasticIPReference{Name: eipName(newest[i])},
				TargetRef: v1alpha1.AttachmentTarget{NetworkInterfaceName: v1alpha1.NetworkInterfaceName(s.pods[i], v1alpha1.DefaultInterface)}},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) { // a retry after a create that timed out but went through
			return nil
		}
		return err
	})
	if err != nil {
		s.r.Fatalf("attaching: %v", err)
	}
	s.attached += len(s.pods)
	s.waitFor(ctx, fmt.Sprintf("%d ElasticIPs Attached and answered", len(newest)), func() (bool, string) {
		ok := 0
		for _, i := range newest {
			e, err := s.eips.ElasticIPs(s.ns).Get(eipName(i))
			if err != nil || e.Status.Phase != v1alpha1.ElasticIPAttached {
				continue
			}
			ad, err := s.ads.Get(advertisement.PreferredName(s.ns, eipName(i)))
			if err != nil {
				continue
			}
			if c := meta.FindStatusCondition(ad.Status.Conditions, v1alpha1.ConditionAnswering); c != nil && c.Status == metav1.ConditionTrue {
				ok++
			}
		}
		return ok == len(newest), fmt.Sprintf("%d of %d", ok, len(newest))
	})
}

// detachAll deletes every attachment and waits until they are gone and no ElasticIP is
// Attached or advertised any more.
func (s *soak) detachAll(ctx context.Context) {
	err := s.parallel(ctx, len(s.pods), func(ctx context.Context, i int) error {
		err := s.cp.Juneau.JuneauV1alpha1().ElasticIPAttachments(s.ns).Delete(ctx, attName(s.pods[i]), metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		s.r.Fatalf("detaching: %v", err)
	}
	s.detached += len(s.pods)
	s.waitFor(ctx, "every attachment gone, no ElasticIP Attached or advertised", func() (bool, string) {
		atts, _ := s.atts.ElasticIPAttachments(s.ns).List(labels.Everything())
		ads, _ := s.ads.List(labels.Everything())
		eips, _ := s.eips.ElasticIPs(s.ns).List(labels.Everything())
		attached := 0
		for _, e := range eips {
			if e.Status.Phase == v1alpha1.ElasticIPAttached {
				attached++
			}
		}
		return len(atts) == 0 && len(ads) == 0 && attached == 0,
			fmt.Sprintf("%d attachments, %d advertisements, %d Attached", len(atts), len(ads), attached)
	})
}

// deleteOldest deletes the n oldest ElasticIPs and waits until they are gone.
func (s *soak) deleteOldest(ctx context.Context, n int) {
	gone := s.live[:n]
	err := s.parallel(ctx, n, func(ctx context.Context, i int) error {
		err := s.cp.Juneau.JuneauV1alpha1().ElasticIPs(s.ns).Delete(ctx, eipName(gone[i]), metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		s.r.Fatalf("deleting ElasticIPs: %v", err)
	}
	s.live = append([]int(nil), s.live[n:]...)
	s.deleted += n
	s.waitFor(ctx, fmt.Sprintf("%d ElasticIPs gone", n), func() (bool, string) {
		left := 0
		for _, i := range gone {
			if _, err := s.eips.ElasticIPs(s.ns).Get(eipName(i)); err == nil {
				left++
			}
		}
		return left == 0, fmt.Sprintf("%d left", left)
	})
}

// deletePods deletes the Pods (gone at once: no kubelet) and waits for their
// interfaces to go.
func (s *soak) deletePods(ctx context.Context) {
	err := s.parallel(ctx, len(s.pods), func(ctx context.Context, i int) error {
		err := s.cp.Kube.CoreV1().Pods(s.ns).Delete(ctx, s.pods[i], metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		s.r.Fatalf("deleting Pods: %v", err)
	}
	s.waitFor(ctx, "every NetworkInterface gone", func() (bool, string) {
		nics, _ := s.nics.NetworkInterfaces(s.ns).List(labels.Everything())
		return len(nics) == 0, fmt.Sprintf("%d left", len(nics))
	})
}

// transient tells the errors a client retries: the API server or the webhook timing
// out or failing internally on a loaded machine, throttling. Anything else (a refusal)
// is an error of the soak.
func transient(err error) bool {
	return apierrors.IsInternalError(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) || errors.Is(err, context.DeadlineExceeded) ||
		strings.Contains(err.Error(), "context deadline exceeded")
}

// parallel runs fn for 0..n-1 on the configured number of workers and returns the first
// error. Transient errors are retried with a back-off, and counted.
func (s *soak) parallel(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	work := make(chan int, n)
	for i := range n {
		work <- i
	}
	close(work)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range s.cfg.workers {
		wg.Go(func() {
			for i := range work {
				backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 6, Cap: 10 * time.Second}
				err := retry.OnError(backoff, func(err error) bool {
					if transient(err) && ctx.Err() == nil {
						s.retried.Add(1)
						return true
					}
					return false
				}, func() error { return fn(ctx, i) })
				if err != nil {
					mu.Lock()
					first = errors.Join(first, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// waitFor polls cond (which reads the local caches, or the Nodes) until it holds, for
// at most settleTimeout.
func (s *soak) waitFor(ctx context.Context, what string, cond func() (bool, string)) {
	var state string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, settleTimeout, true, func(context.Context) (bool, error) {
		var ok bool
		ok, state = cond()
		return ok, nil
	})
	if err != nil {
		s.r.Fatalf("waiting for %s: %v (%s)", what, err, state)
	}
}
