package manager

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/controllers/elasticip"
	"github.com/loutres/juneau/pkg/controllers/webhookreplicas"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned/fake"
	"github.com/loutres/juneau/test/heap"
)

// TestEveryListedControllerRuns builds the manager on fake clients and checks that
// every controller of the list got its queue, that Run reports ready once the caches
// synced, that no cache keeps managedFields (the agents' heartbeat Leases too) and label
// keys are interned, and that the controllers act: a pool's and a network's status get
// written (14 usable addresses in a /28, network and broadcast reserved).
func TestEveryListedControllerRuns(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	pool := &v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: "blue", UID: "p", Labels: map[string]string{strings.Clone("team"): "a"}},
		Spec: v1alpha1.AddressPoolSpec{AdvertiseMode: v1alpha1.AdvertiseARP, Addresses: []string{"10.225.51.0/28"}}}
	network := &v1alpha1.ExternalNetwork{ObjectMeta: metav1.ObjectMeta{Name: "outside", UID: "n"},
		Spec: v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseARP, AddressPools: []string{"blue"}}}
	juneau := fake.NewClientset(pool, network)
	// An agent's heartbeat, with the managedFields the API server adds to every object.
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "juneau-node-a", Namespace: "juneau-node",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: v1alpha1.FieldManagerNode, Operation: metav1.ManagedFieldsOperationUpdate}}}}
	reg := prometheus.NewRegistry()
	m, err := New(Config{Kube: kubefake.NewClientset(lease), Juneau: juneau, Recorder: record.NewFakeRecorder(100),
		Registerer: reg, LeaseNamespace: "juneau-node"})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.runners) != len(controllers) {
		t.Fatalf("built %d controllers, the list has %d", len(m.runners), len(controllers))
	}
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, 1, func() { close(ready) }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-ready:
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("Run never reported ready")
	}

	// No cache keeps managedFields (docs/performance.md, row 6).
	for _, f := range []struct {
		what  string
		store cache.Store
	}{{"Leases", m.leases.Coordination().V1().Leases().Informer().GetStore()},
		{"AddressPools", m.juneau.Juneau().V1alpha1().AddressPools().Informer().GetStore()}} {
		objs := f.store.List()
		if len(objs) == 0 {
			t.Errorf("no %s cached", f.what)
		}
		for _, obj := range objs {
			if o, err := meta.Accessor(obj); err != nil || o.GetManagedFields() != nil {
				t.Errorf("%s cached with managedFields: %v (%v)", f.what, obj, err)
			}
			for k := range obj.(metav1.Object).GetLabels() {
				if !heap.Interned(k) {
					t.Errorf("%s cached with the label key %q not interned (cached.Lean)", f.what, k)
				}
			}
		}
	}

	// Every controller's queue reports under its name.
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var queues []string
	for _, f := range families {
		if f.GetName() == "juneau_workqueue_depth" {
			for _, s := range f.GetMetric() {
				queues = append(queues, s.GetLabel()[0].GetValue())
			}
		}
	}
	for _, c := range controllers {
		// The webhook replicas' prober keeps no queue: each round looks at every replica.
		if c.name == webhookreplicas.ControllerName {
			continue
		}
		if !slices.Contains(queues, c.name) {
			t.Errorf("controller %q has no queue metrics (queues: %v)", c.name, queues)
		}
	}
	if !slices.Contains(queues, elasticip.ControllerName+"-orphan-claims") {
		t.Errorf("the orphan-claim loop has no queue metrics (queues: %v)", queues)
	}

	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, wait.ForeverTestTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := juneau.JuneauV1alpha1().AddressPools().Get(ctx, "blue", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		n, err := juneau.JuneauV1alpha1().ExternalNetworks().Get(ctx, "outside", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.Status.Total == 14 && meta.IsStatusConditionTrue(n.Status.Conditions, v1alpha1.ConditionReady), nil
	})
	if err != nil {
		t.Errorf("pool and network status never written by the running controllers: %v", err)
	}
}

// TestEveryControllerNamedOnce keeps the list free of a controller registered twice,
// which would run two loops under one queue name.
func TestEveryControllerNamedOnce(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range controllers {
		if seen[c.name] {
			t.Errorf("controller %q is listed twice", c.name)
		}
		seen[c.name] = true
	}
}
