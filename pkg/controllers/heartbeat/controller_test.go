package heartbeat

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned/fake"
	juneauinformers "github.com/loutres/juneau/pkg/generated/informers/externalversions"
	"github.com/loutres/juneau/pkg/workloop"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func heartbeat(node string, renewed time.Time, seconds int32) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "juneau-node", Name: v1alpha1.NodeLeasePrefix + node},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node), LeaseDurationSeconds: ptr.To(seconds), RenewTime: &metav1.MicroTime{Time: renewed}}}
}

func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lease *coordinationv1.Lease
		alive bool
		why   string
	}{
		{"renewed", heartbeat("node-a", t0.Add(-10*time.Second), 40), true, ""},
		{"expired", heartbeat("node-a", t0.Add(-41*time.Second), 40), false,
			`the node agent of Node "node-a" has not renewed its heartbeat Lease "juneau-node/juneau-node-node-a" since 2026-01-01T11:59:19Z`},
		{"missing", nil, false, `the node agent of Node "node-a" has no heartbeat Lease "juneau-node/juneau-node-node-a"`},
		{"never renewed", &coordinationv1.Lease{}, false, "never renewed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hb := Judge(tc.lease, "juneau-node", "node-a", t0)
			if hb.Alive != tc.alive || !strings.Contains(hb.Why, tc.why) {
				t.Fatalf("got %+v, want alive=%v saying %q", hb, tc.alive, tc.why)
			}
			if hb.Alive && !hb.Expires.Equal(t0.Add(30*time.Second)) {
				t.Errorf("expires %v, want 30s from now", hb.Expires)
			}
		})
	}
}

func advert(name, node string, answering metav1.ConditionStatus) *v1alpha1.ARPAdvertisement {
	ad := &v1alpha1.ARPAdvertisement{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
		Spec: v1alpha1.ARPAdvertisementSpec{ExternalNetwork: "ext-net", Address: "10.225.51.5", NodeName: node}}
	if answering != "" {
		ad.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionAnswering, Status: answering, Reason: "X", ObservedGeneration: 1,
			LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))}}
	}
	return ad
}

func TestUnknownOnlyReplacesTrue(t *testing.T) {
	dead := Judge(nil, "juneau-node", "node-a", t0)
	if c, _ := Unknown(advert("a", "node-a", metav1.ConditionTrue), dead, t0); c == nil || c.Status != metav1.ConditionUnknown || c.Reason != v1alpha1.ReasonAgentNotReporting {
		t.Errorf("True under a dead agent: %+v, want Unknown/AgentNotReporting", c)
	}
	for _, s := range []metav1.ConditionStatus{"", metav1.ConditionFalse, metav1.ConditionUnknown} {
		if c, _ := Unknown(advert("a", "node-a", s), dead, t0); c != nil {
			t.Errorf("Answering %q under a dead agent: %+v, want nothing written", s, c)
		}
	}
	if c, _ := Unknown(advert("a", "node-a", metav1.ConditionTrue), Heartbeat{Alive: true}, t0); c != nil {
		t.Errorf("live agent: %+v, want nothing written", c)
	}
	// A True written 10s ago by an agent without a Lease stands for the rest of the grace.
	fresh := advert("a", "node-a", metav1.ConditionTrue)
	fresh.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(-10 * time.Second))
	if c, wait := Unknown(fresh, dead, t0); c != nil || wait != DefaultGrace-10*time.Second {
		t.Errorf("fresh True under a dead agent: %+v, wait %v; want nothing written for %v", c, wait, DefaultGrace-10*time.Second)
	}
}

// TestSync: the advertisements of a Node whose Lease expired turn Unknown; those of a
// Node whose agent renews stay as they are.
func TestSync(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ads := []*v1alpha1.ARPAdvertisement{advert("on-a", "node-a", metav1.ConditionTrue), advert("on-b", "node-b", metav1.ConditionTrue)}
	client := fake.NewClientset(ads[0], ads[1])
	kube := kubefake.NewClientset(heartbeat("node-a", t0.Add(-time.Minute), 40), heartbeat("node-b", t0.Add(-time.Second), 40))
	jinf := juneauinformers.NewSharedInformerFactory(client, 0)
	kinf := kubeinformers.NewSharedInformerFactoryWithOptions(kube, 0, kubeinformers.WithNamespace("juneau-node"))
	clk := clocktesting.NewFakeClock(t0)
	recorder := record.NewFakeRecorder(10)
	reg := prometheus.NewPedanticRegistry()
	c, err := NewController(client, Informers{Advertisements: jinf.Juneau().V1alpha1().ARPAdvertisements(), Leases: kinf.Coordination().V1().Leases()},
		recorder, Options{Namespace: "juneau-node", Options: workloop.Options{Clock: clk}, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jinf.Start(ctx.Done())
	kinf.Start(ctx.Done())
	jinf.WaitForCacheSync(ctx.Done())
	kinf.WaitForCacheSync(ctx.Done())

	for _, node := range []string{"node-a", "node-b"} {
		if err := c.sync(ctx, node); err != nil {
			t.Fatalf("sync %s: %v", node, err)
		}
	}
	got := func(name string) *metav1.Condition {
		ad, err := client.JuneauV1alpha1().ARPAdvertisements().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(ad.Status.Conditions, v1alpha1.ConditionAnswering)
	}
	if a := got("on-a"); a == nil || a.Status != metav1.ConditionUnknown || a.Reason != v1alpha1.ReasonAgentNotReporting ||
		!strings.Contains(a.Message, `"juneau-node/juneau-node-node-a" since 2026-01-01T11:59:00Z`) || !a.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("on-a: %+v, want Unknown/AgentNotReporting naming the Lease and when it was last renewed", a)
	}
	if b := got("on-b"); b == nil || b.Status != metav1.ConditionTrue {
		t.Errorf("on-b: %+v, want True untouched (its agent renews)", b)
	}
	select {
	case e := <-recorder.Events:
		if !strings.Contains(e, "Warning "+v1alpha1.ReasonAgentNotReporting) {
			t.Errorf("event %q, want a Warning AgentNotReporting", e)
		}
	default:
		t.Error("no Event for the advertisement that turned Unknown")
	}
	want := `
# HELP juneau_node_agent_not_reporting 1 for each Node that has ARPAdvertisements while its node agent's heartbeat Lease is expired or missing (no agent answers for them).
# TYPE juneau_node_agent_not_reporting gauge
juneau_node_agent_not_reporting{node="node-a"} 1
`
	if err := promtestutil.GatherAndCompare(reg, strings.NewReader(want), "juneau_node_agent_not_reporting"); err != nil {
		t.Errorf("node-a's agent not reporting, node-b's renewing: %v", err)
	}
}

// TestExtends: only the renewal of a live Lease that moves its expiry no earlier skips
// the sync; a Lease renewed after it expired, or one whose expiry comes sooner, is judged.
func TestExtends(t *testing.T) {
	live := heartbeat("node-a", t0.Add(-10*time.Second), 40)
	for _, tc := range []struct {
		name     string
		old, cur *coordinationv1.Lease
		want     bool
	}{
		{"renewed while alive", live, heartbeat("node-a", t0, 40), true},
		{"unchanged", live, live, true},
		{"renewed after expiring", heartbeat("node-a", t0.Add(-41*time.Second), 40), heartbeat("node-a", t0, 40), false},
		{"duration shortened", live, heartbeat("node-a", t0.Add(-5*time.Second), 10), false},
		{"renew time cleared", live, &coordinationv1.Lease{}, false},
	} {
		if got := Extends(tc.old, tc.cur, t0); got != tc.want {
			t.Errorf("%s: Extends = %v, want %v", tc.name, got, tc.want)
		}
	}
}
