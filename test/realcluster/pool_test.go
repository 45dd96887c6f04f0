package realcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/status"
	"github.com/loutres/juneau/test/cluster"
)

// The scenario's own pool and network, so that deleting the pool leaves the
// scenarios' ext-net alone. Its addresses are on the segment, outside ext-pool.
const sparePoolYAML = `apiVersion: juneau.loutres.me/v1alpha1
kind: AddressPool
metadata: {name: spare-pool}
spec:
  advertiseMode: arp
  addresses: ["10.225.51.150-10.225.51.151"]
---
apiVersion: juneau.loutres.me/v1alpha1
kind: ExternalNetwork
metadata: {name: spare-net}
spec: {type: arp, addressPools: [spare-pool]}
`

// testPoolDeletedUnderTraffic: deleting a pool is refused while an ElasticIP holds one
// of its addresses, naming it; when the pool goes anyway (the webhook bypassed, as a
// race or a forced deletion would), the ElasticIP keeps its address and traffic, and its
// status says exactly that — Attached, Allocated True with the reason Allocated and the
// pool's fate in the message — while the client still gets replies; a new ElasticIP
// of the network gets no address and says why.
func testPoolDeletedUnderTraffic(t *testing.T, c *cluster.Cluster) {
	ns := namespace(t, c, "pool")
	kubectl(t, c, sparePoolYAML, "apply", "-f", "-")
	t.Cleanup(func() {
		_, _ = c.KubectlRun(context.Background(), "", "-n", ns, "delete", "elasticipattachments,elasticips", "--all", "--wait=true")
		_, _ = c.KubectlRun(context.Background(), "", "delete", "externalnetwork/spare-net", "addresspool/spare-pool", "--ignore-not-found", "--wait=true")
	})
	kubectl(t, c, gatedBoxPod("keep", "")+"---\n"+strings.Replace(natYAML("keep"), "externalNetwork: ext-net", "externalNetwork: spare-net", 1),
		"-n", ns, "apply", "-f", "-")
	waitPods(t, c, ns, "keep")
	addr := eipWorks(t, c, ns, "keep-eip", "keep")
	exhausted(t, c, ns)

	out, err := c.KubectlRun(testContext(t, time.Minute), "", "delete", "addresspool", "spare-pool")
	want := fmt.Sprintf(`addresses are still reserved from it: %s (ElasticIP "%s/keep-eip")`, addr, ns)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("deleting the pool in use: %v %s; want a refusal saying %s", err, out, want)
	}

	withoutPoolDeletionRule(t, c, func() {
		kubectl(t, c, "", "delete", "addresspool", "spare-pool", "--wait=true")
	})
	var eip *v1alpha1.ElasticIP
	err = wait.PollUntilContextTimeout(testContext(t, time.Minute), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		eip, err = c.Juneau.JuneauV1alpha1().ElasticIPs(ns).Get(ctx, "keep-eip", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		al := meta.FindStatusCondition(eip.Status.Conditions, v1alpha1.ConditionAllocated)
		return al != nil && strings.Contains(al.Message, "which no longer holds it"), nil
	})
	if err != nil {
		t.Fatalf("the ElasticIP does not say its pool is gone: %v\n%+v", err, eip.Status)
	}
	al := meta.FindStatusCondition(eip.Status.Conditions, v1alpha1.ConditionAllocated)
	at := meta.FindStatusCondition(eip.Status.Conditions, v1alpha1.ConditionAttached)
	if eip.Status.Phase != v1alpha1.ElasticIPAttached || eip.Status.Address != addr ||
		al.Status != metav1.ConditionTrue || al.Reason != v1alpha1.ReasonAllocated ||
		at == nil || at.Status != metav1.ConditionTrue || at.Reason != v1alpha1.ReasonAttached {
		t.Errorf("with its pool gone the ElasticIP shows %s %s, Allocated %s/%s, Attached %+v; want Attached %s, both True (the traffic flows)",
			eip.Status.Phase, eip.Status.Address, al.Status, al.Reason, at, addr)
	}
	reach(t, c, addr, "keep")
	if events := kubectl(t, c, "", "-n", ns, "get", "events", "--field-selector", "involvedObject.name=keep-eip,reason="+v1alpha1.ReasonAddressOutsidePools, "-o", "name"); strings.TrimSpace(events) == "" {
		t.Errorf("no %s Event on the ElasticIP", v1alpha1.ReasonAddressOutsidePools)
	}

	kubectl(t, c, strings.Replace(eipYAML("late"), "ext-net", "spare-net", 1), "-n", ns, "apply", "-f", "-")
	err = wait.PollUntilContextTimeout(testContext(t, time.Minute), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		late, err := c.Juneau.JuneauV1alpha1().ElasticIPs(ns).Get(ctx, "late", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		al := meta.FindStatusCondition(late.Status.Conditions, v1alpha1.ConditionAllocated)
		return late.Status.Address == "" && al != nil && al.Status == metav1.ConditionFalse && al.Reason == v1alpha1.ReasonMissingDependency, nil
	})
	if err != nil {
		t.Errorf("a new ElasticIP of the network without its pool: %v, want no address and Allocated False MissingDependency", err)
	}
}

// exhausted: two Pods asking for automatic ElasticIPs of spare-net, which has one
// address left: one gets it and works, the other waits and says why — its condition
// and its readiness gate name the exhausted pool and what a rolling update needs, and
// an Event on it says so too. Both are deleted at the end, releasing the address.
func exhausted(t *testing.T, c *cluster.Cluster, ns string) {
	t.Helper()
	ann := `{juneau.loutres.me/pod-with-eip: "true", juneau.loutres.me/eip-external-network: spare-net, juneau.loutres.me/pod-eip-release-strategy: Follow}`
	kubectl(t, c, gatedBoxPod("one", ann)+"---\n"+gatedBoxPod("two", ann), "-n", ns, "apply", "-f", "-")
	var waiting string
	var last []corev1.PodCondition
	err := wait.PollUntilContextTimeout(testContext(t, 2*time.Minute), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range []string{"one", "two"} {
			p, err := c.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			cond, gate := status.PodCondition(p, v1alpha1.PodConditionElasticIPAssigned), status.PodCondition(p, v1alpha1.PodConditionElasticIP)
			last = p.Status.Conditions
			if cond != nil && cond.Reason == v1alpha1.ReasonNoAddressAvailable && strings.Contains(cond.Message, `is exhausted: "spare-pool"`) &&
				strings.Contains(cond.Message, "maxSurge") && gate != nil && gate.Status == corev1.ConditionFalse &&
				strings.Contains(gate.Message, `is exhausted: "spare-pool"`) && !strings.Contains(gate.Message, `""`) {
				waiting = name
			}
		}
		return waiting != "", nil
	})
	if err != nil {
		t.Fatalf("no Pod says the pool is exhausted: %v\n%+v", err, last)
	}
	served := map[string]string{"one": "two", "two": "one"}[waiting]
	eipWorks(t, c, ns, served, served)
	if events := kubectl(t, c, "", "-n", ns, "get", "events", "--field-selector", "involvedObject.name="+waiting+",reason="+v1alpha1.ReasonNoAddressAvailable, "-o", "name"); strings.TrimSpace(events) == "" {
		t.Errorf("no %s Event on the waiting Pod %s", v1alpha1.ReasonNoAddressAvailable, waiting)
	}
	kubectl(t, c, "", "-n", ns, "delete", "pod", "one", "two", "--wait=true")
	for _, name := range []string{"one", "two"} {
		gone(t, "ElasticIP "+name, 2*time.Minute, func(ctx context.Context) error {
			_, err := c.Juneau.JuneauV1alpha1().ElasticIPs(ns).Get(ctx, name, metav1.GetOptions{})
			return err
		})
	}
}

// withoutPoolDeletionRule runs f with the webhook configuration's DELETE rule not
// covering addresspools, as when the webhook is bypassed, and puts the rule back.
func withoutPoolDeletionRule(t *testing.T, c *cluster.Cluster, f func()) {
	t.Helper()
	cfgs := c.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	set := func(drop bool) {
		t.Helper()
		cfg, err := cfgs.Get(context.Background(), "juneau-webhook", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i, wh := range cfg.Webhooks {
			for j, r := range wh.Rules {
				if !slices.Contains(r.Operations, admissionregistrationv1.Delete) {
					continue
				}
				res := slices.DeleteFunc(slices.Clone(r.Resources), func(s string) bool { return s == "addresspools" })
				if !drop {
					res = append(res, "addresspools")
				}
				patch, _ := json.Marshal([]map[string]any{{"op": "replace",
					"path": fmt.Sprintf("/webhooks/%d/rules/%d/resources", i, j), "value": res}})
				if _, err := cfgs.Patch(context.Background(), cfg.Name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	set(true)
	defer set(false)
	f()
}
