package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/framework"
)

const (
	// failoverCount ElasticIPs are created; every other one is deleted again.
	failoverCount = 1000
	// failoverTenure is how long a leader works before it is killed.
	failoverTenure = 2 * time.Second
	// failoverLeast is the fewest failovers the test insists on, failoverMost the most
	// it makes.
	failoverLeast = 5
	failoverMost  = 40
)

// TestLeaderFailoverChurn: two controller replicas under leader election, the leader
// killed every few seconds (by SIGKILL, so its Lease must expire, or by SIGTERM, so
// it releases it) and replaced by a new replica, while 1,000 ElasticIPs are created
// and every other one deleted (half at once, before the controller may have seen it,
// half after every create). At the end: no address given twice, exactly one claim
// per remaining ElasticIP, no claim of a deleted one, every remaining ElasticIP
// Available. Then they are all deleted and no claim is left.
func TestLeaderFailoverChurn(t *testing.T) {
	cp := framework.Shared(t)
	ns := cp.NewNamespace(t, "failover")
	network(t, cp, "failover-net", v1alpha1.AdvertiseARP, "10.225.88.0/22")
	lease := "juneau-controller-failover"
	replica := 0
	start := func() *framework.Component {
		replica++
		return startController(t, cp, fmt.Sprintf("failover-%d", replica), "--leader-elect-name="+lease)
	}
	replicas := []*framework.Component{start(), start()}

	var done atomic.Bool
	churn := make(chan error, 1)
	began := time.Now()
	go func() {
		churn <- createAndDelete(cp, ns, "failover-net", failoverCount)
		done.Store(true)
	}()

	// Leaders fall until the churn is over, at least failoverLeast times, and on until
	// the controller has caught up with it (at most failoverMost times).
	kills := 0
	for kills < failoverMost && (!done.Load() || kills < failoverLeast || !settled(cp, ns, failoverCount/2)) {
		leader := waitLeader(t, replicas)
		tenure := time.Now()
		// Let it work for its tenure, unless it loses the Lease on its own.
		_ = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, failoverTenure, false, func(context.Context) (bool, error) {
			exited, _ := leader.Exited()
			return exited, nil
		})
		if kills%2 == 0 {
			leader.Kill()
		} else {
			leader.Stop()
		}
		kills++
		t.Logf("failover %d: killed %s after %s as leader, %d claims", kills, leader.Name, time.Since(tenure).Round(100*time.Millisecond), len(claimsOf(t, cp, ns)))
		// Keep two replicas: replace the killed one and any that exited by itself.
		var alive []*framework.Component
		for _, r := range replicas {
			if exited, _ := r.Exited(); !exited {
				alive = append(alive, r)
			}
		}
		for len(alive) < 2 {
			alive = append(alive, start())
		}
		replicas = alive
	}
	if err := <-churn; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d ElasticIPs created and %d deleted, and the controller caught up, in %s, with %d failovers", failoverCount, failoverCount/2, time.Since(began).Round(time.Second), kills)
	var list *v1alpha1.ElasticIPList
	framework.EventuallyWithin(t, 2*time.Minute, "the deleted ElasticIPs gone", func(ctx context.Context) (bool, string) {
		var err error
		if list, err = cp.Juneau.JuneauV1alpha1().ElasticIPs(ns).List(ctx, metav1.ListOptions{}); err != nil {
			return false, err.Error()
		}
		return len(list.Items) == failoverCount/2, fmt.Sprintf("%d left", len(list.Items))
	})
	checkOneClaimEach(t, cp, ns, failoverCount/2)
	for _, e := range list.Items {
		var i int
		if _, err := fmt.Sscanf(e.Name, "eip-%d", &i); err != nil || i%2 == 1 {
			t.Errorf("ElasticIP %s should have been deleted", e.Name)
		}
	}
	// The last replicas release everything, leaving the shared control plane as found.
	deleteAll(t, cp, ns)
	waitReleased(t, cp, ns)
}

// settled reports whether the namespace holds exactly n ElasticIPs, each Available,
// and n claims.
func settled(cp *framework.ControlPlane, ns string, n int) bool {
	list, err := cp.Juneau.JuneauV1alpha1().ElasticIPs(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != n {
		return false
	}
	for _, e := range list.Items {
		if e.Status.Phase != v1alpha1.ElasticIPAvailable {
			return false
		}
	}
	claims, err := cp.Juneau.JuneauV1alpha1().AllocationClaims().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return false
	}
	held := 0
	for _, c := range claims.Items {
		if c.Spec.Consumer.Namespace == ns {
			held++
		}
	}
	return held == n
}

// waitLeader waits until one of the replicas has become leader and is running; the
// Lease passes only after a killed leader's expired, so this can take a lease
// duration and more.
func waitLeader(t *testing.T, replicas []*framework.Component) *framework.Component {
	t.Helper()
	var leader *framework.Component
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		for _, r := range replicas {
			if exited, _ := r.Exited(); !exited && strings.Contains(r.Log(), "Became leader") {
				leader = r
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		var tails []string
		for _, r := range replicas {
			tails = append(tails, r.Name+":\n"+r.LogTail(10))
		}
		t.Fatalf("no replica became leader: %v\n%s", err, strings.Join(tails, "\n"))
	}
	return leader
}

// createAndDelete creates ElasticIPs eip-0000 to eip-<n-1> from 16 goroutines and
// deletes every odd-numbered one: those numbered 4k+1 right after their create, the
// others once every create is done. It runs beside the test goroutine, so it reports
// errors instead of failing the test.
func createAndDelete(cp *framework.ControlPlane, ns, network string, n int) error {
	eips := cp.Juneau.JuneauV1alpha1().ElasticIPs(ns)
	ctx := context.Background()
	del := func(name string) error {
		err := eips.Delete(ctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	work := make(chan int, n)
	for i := range n {
		work <- i
	}
	close(work)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				name := fmt.Sprintf("eip-%04d", i)
				if _, err := eips.Create(ctx, &v1alpha1.ElasticIP{
					ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec:       v1alpha1.ElasticIPSpec{ExternalNetwork: network},
				}, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("creating %s: %w", name, err)
					continue
				}
				if i%4 == 1 {
					if err := del(name); err != nil {
						errs <- fmt.Errorf("deleting %s: %w", name, err)
					}
				}
			}
		})
	}
	wg.Wait()
	for i := 3; i < n; i += 4 {
		if err := del(fmt.Sprintf("eip-%04d", i)); err != nil {
			errs <- fmt.Errorf("deleting eip-%04d: %w", i, err)
		}
	}
	close(errs)
	return <-errs // nil when none
}
