// Package controller tests `juneau controller`, run as a process from the built binary,
// against a real etcd + kube-apiserver.
package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	applymetav1 "k8s.io/client-go/applyconfigurations/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	applyv1alpha1 "github.com/loutres/juneau/pkg/generated/applyconfiguration/juneau/v1alpha1"
	"github.com/loutres/juneau/test/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

const leaseNamespace = "juneau-system"

// startController runs `juneau controller` with short leader-election timings.
func startController(t *testing.T, cp *framework.ControlPlane, name string, extra ...string) *framework.Component {
	t.Helper()
	ensureNamespace(t, cp, leaseNamespace)
	args := append([]string{"controller",
		"--kubeconfig=" + cp.Kubeconfig,
		"--metrics-bind-address=127.0.0.1:0", "--metrics-secure=false",
		"--leader-elect-namespace=" + leaseNamespace,
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms",
		"--orphan-claim-grace=2s", "--kube-api-qps=300", "--kube-api-burst=600",
		"-v=2",
	}, extra...)
	return framework.StartComponent(t, name, args...)
}

func ensureNamespace(t *testing.T, cp *framework.ControlPlane, name string) {
	t.Helper()
	_, err := cp.Kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// network creates an AddressPool and an ExternalNetwork of one type over it.
func network(t *testing.T, cp *framework.ControlPlane, name string, mode v1alpha1.AdvertiseMode, addresses ...string) {
	t.Helper()
	ctx := context.Background()
	j := cp.Juneau.JuneauV1alpha1()
	if _, err := j.AddressPools().Create(ctx, &v1alpha1.AddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-pool"},
		Spec:       v1alpha1.AddressPoolSpec{AdvertiseMode: mode, Addresses: addresses},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.ExternalNetworks().Create(ctx, &v1alpha1.ExternalNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.ExternalNetworkSpec{Type: mode, AddressPools: []string{name + "-pool"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createEIP(t *testing.T, cp *framework.ControlPlane, ns, name, network, requested string) *v1alpha1.ElasticIP {
	t.Helper()
	eip, err := cp.Juneau.JuneauV1alpha1().ElasticIPs(ns).Create(context.Background(), &v1alpha1.ElasticIP{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.ElasticIPSpec{ExternalNetwork: network, RequestedIP: requested},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return eip
}

// waitEIP polls until cond holds for the ElasticIP, failing with its last status.
func waitEIP(t *testing.T, cp *framework.ControlPlane, ns, name string, what string, cond func(*v1alpha1.ElasticIP) bool) *v1alpha1.ElasticIP {
	t.Helper()
	var last *v1alpha1.ElasticIP
	framework.Eventually(t, fmt.Sprintf("ElasticIP %s/%s becoming %s", ns, name, what), func(ctx context.Context) (bool, string) {
		eip, err := cp.Juneau.JuneauV1alpha1().ElasticIPs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		last = eip
		return cond(eip), statusString(eip)
	})
	return last
}

func statusString(eip *v1alpha1.ElasticIP) string {
	if eip == nil {
		return "<none>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "phase=%s address=%s attachment=%v", eip.Status.Phase, eip.Status.Address, eip.Status.Attachment)
	for _, c := range eip.Status.Conditions {
		fmt.Fprintf(&b, " [%s=%s %s: %s]", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

// phaseReason matches a phase and the reason of one condition.
func phaseReason(phase v1alpha1.ElasticIPPhase, condType, reason string) func(*v1alpha1.ElasticIP) bool {
	return func(eip *v1alpha1.ElasticIP) bool {
		c := meta.FindStatusCondition(eip.Status.Conditions, condType)
		return eip.Status.Phase == phase && c != nil && c.Reason == reason
	}
}

func condition(eip *v1alpha1.ElasticIP, t string) metav1.Condition {
	if c := meta.FindStatusCondition(eip.Status.Conditions, t); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// claimsOf lists the AllocationClaims whose consumer is in namespace ns, by address.
func claimsOf(t *testing.T, cp *framework.ControlPlane, ns string) map[string]v1alpha1.AllocationClaim {
	t.Helper()
	list, err := cp.Juneau.JuneauV1alpha1().AllocationClaims().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]v1alpha1.AllocationClaim{}
	for _, c := range list.Items {
		if c.Spec.Consumer.Namespace == ns {
			out[c.Name] = c
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// answerARP plays the node agents until the test ends: every ARPAdvertisement gets the
// Answering condition of its generation, as the agent of its Node writes it once it
// answers. Without it, no ElasticIP's user carries traffic, so none is Attached=True.
func answerARP(t *testing.T, cp *framework.ControlPlane) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			ads, err := cp.Juneau.JuneauV1alpha1().ARPAdvertisements().List(ctx, metav1.ListOptions{})
			for i := 0; err == nil && i < len(ads.Items); i++ {
				ad := ads.Items[i]
				if c := meta.FindStatusCondition(ad.Status.Conditions, v1alpha1.ConditionAnswering); c != nil && c.ObservedGeneration == ad.Generation {
					continue
				}
				apply := applyv1alpha1.ARPAdvertisement(ad.Name).WithStatus(applyv1alpha1.ARPAdvertisementStatus().WithConditions(
					applymetav1.Condition().WithType(v1alpha1.ConditionAnswering).WithStatus(metav1.ConditionTrue).
						WithReason(v1alpha1.ReasonAnswering).WithMessage("answering ARP on interface eth0 of " + ad.Spec.NodeName).
						WithObservedGeneration(ad.Generation).WithLastTransitionTime(metav1.Now())))
				_, _ = cp.Juneau.JuneauV1alpha1().ARPAdvertisements().ApplyStatus(ctx, apply,
					metav1.ApplyOptions{FieldManager: v1alpha1.FieldManagerNode, Force: true})
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}
