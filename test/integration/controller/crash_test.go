package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/framework"
)

const crashCount = 200

// createMany creates n ElasticIPs from 16 goroutines. It may run beside the test
// goroutine, so it reports errors instead of failing the test itself.
func createMany(cp *framework.ControlPlane, ns, network string, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	names := make(chan string, n)
	for i := range n {
		names <- fmt.Sprintf("eip-%03d", i)
	}
	close(names)
	for range 16 {
		wg.Go(func() {
			for name := range names {
				_, err := cp.Juneau.JuneauV1alpha1().ElasticIPs(ns).Create(context.Background(), &v1alpha1.ElasticIP{
					ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec:       v1alpha1.ElasticIPSpec{ExternalNetwork: network},
				}, metav1.CreateOptions{})
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs // nil when none
}

// waitClaims polls until the namespace's claims number at least n.
func waitClaims(t *testing.T, cp *framework.ControlPlane, ns string, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return len(claimsOf(t, cp, ns)) >= n, nil
	})
	if err != nil {
		t.Fatalf("waiting for %d claims: %v (have %d)", n, err, len(claimsOf(t, cp, ns)))
	}
}

// checkOneClaimEach waits until every ElasticIP is Available and then asserts distinct
// addresses and exactly one claim per ElasticIP, named after its address.
func checkOneClaimEach(t *testing.T, cp *framework.ControlPlane, ns string, n int) {
	t.Helper()
	var list *v1alpha1.ElasticIPList
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		list, err = cp.Juneau.JuneauV1alpha1().ElasticIPs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		available := 0
		for _, e := range list.Items {
			if e.Status.Phase == v1alpha1.ElasticIPAvailable {
				available++
			}
		}
		// Claims settle too: duplicates left by a crash are removed by the adopter.
		return available == n && len(claimsOf(t, cp, ns)) == n, nil
	})
	if err != nil {
		t.Fatalf("not every ElasticIP became Available with one claim: %v (claims %d)", err, len(claimsOf(t, cp, ns)))
	}
	claims := claimsOf(t, cp, ns)
	seen := map[string]string{}
	for _, e := range list.Items {
		if other, dup := seen[e.Status.Address]; dup {
			t.Errorf("address %s given to both %s and %s", e.Status.Address, other, e.Name)
		}
		seen[e.Status.Address] = e.Name
		claim, ok := claims[e.Status.Address]
		if !ok || claim.Spec.Consumer.UID != string(e.UID) || claim.Spec.Consumer.Name != e.Name {
			t.Errorf("ElasticIP %s (%s): claim %+v does not match", e.Name, e.Status.Address, claim.Spec)
		}
	}
	perUID := map[string]int{}
	for _, c := range claims {
		perUID[c.Spec.Consumer.UID]++
	}
	for uid, count := range perUID {
		if count != 1 {
			t.Errorf("consumer %s holds %d claims", uid, count)
		}
	}
}

func deleteAll(t *testing.T, cp *framework.ControlPlane, ns string) {
	t.Helper()
	if err := cp.Juneau.JuneauV1alpha1().ElasticIPs(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitReleased waits until no ElasticIP and no claim of the namespace is left.
func waitReleased(t *testing.T, cp *framework.ControlPlane, ns string) {
	t.Helper()
	ctx := context.Background()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := cp.Juneau.JuneauV1alpha1().ElasticIPs(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0 && len(claimsOf(t, cp, ns)) == 0, nil
	})
	if err != nil {
		t.Fatalf("after deleting every ElasticIP: %v; %d claims left", err, len(claimsOf(t, cp, ns)))
	}
}

// TestCrashSafety: 200 ElasticIPs created at once while the controller is killed with
// SIGKILL and restarted several times; afterwards every ElasticIP has a distinct address
// and exactly one claim, and deleting them all leaves no claim.
func TestCrashSafety(t *testing.T) {
	cp := framework.Shared(t)
	ns := cp.NewNamespace(t, "crash")
	network(t, cp, "crash-net", v1alpha1.AdvertiseARP, "10.225.80.0/24")

	ctrl := startController(t, cp, "controller-0")
	done := make(chan error, 1)
	go func() { done <- createMany(cp, ns, "crash-net", crashCount) }()
	for i := 1; i <= 4; i++ {
		waitClaims(t, cp, ns, i*crashCount/6)
		ctrl.Kill()
		ctrl = startController(t, cp, fmt.Sprintf("controller-%d", i), "--leader-elect=false")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkOneClaimEach(t, cp, ns, crashCount)
	ctrl.Kill()
	ctrl = startController(t, cp, "controller-delete", "--leader-elect=false")
	deleteAll(t, cp, ns)
	// Kill once more in the middle of the releases.
	waitFewerClaims(t, cp, ns, crashCount/2)
	ctrl.Kill()
	startController(t, cp, "controller-after", "--leader-elect=false")
	waitReleased(t, cp, ns)
}

func waitFewerClaims(t *testing.T, cp *framework.ControlPlane, ns string, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return len(claimsOf(t, cp, ns)) <= n, nil
	})
	if err != nil {
		t.Fatalf("releases did not progress: %v", err)
	}
}

// TestTwoReplicas: two controller processes with leader election; the leader is killed
// half-way; never a duplicate address.
func TestTwoReplicas(t *testing.T) {
	cp := framework.Shared(t)
	ns := cp.NewNamespace(t, "replicas")
	network(t, cp, "replicas-net", v1alpha1.AdvertiseARP, "10.225.81.0/24")

	a := startController(t, cp, "replica-a")
	b := startController(t, cp, "replica-b")
	done := make(chan error, 1)
	go func() { done <- createMany(cp, ns, "replicas-net", crashCount) }()
	waitClaims(t, cp, ns, crashCount/3)
	holder := leaseHolder(t, cp)
	// The identity starts with the host name; both run here, so tell them apart by log.
	if logMentions(a, holder) {
		a.Kill()
	} else {
		b.Kill()
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkOneClaimEach(t, cp, ns, crashCount)
	deleteAll(t, cp, ns)
	waitReleased(t, cp, ns)
}

func leaseHolder(t *testing.T, cp *framework.ControlPlane) string {
	t.Helper()
	lease, err := cp.Kube.CoordinationV1().Leases(leaseNamespace).Get(context.Background(), "juneau-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity == nil {
		t.Fatal("no leader")
	}
	return *lease.Spec.HolderIdentity
}

func logMentions(c *framework.Component, s string) bool {
	return len(s) > 0 && strings.Contains(c.Log(), s)
}
