package webhook

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/status"
	"github.com/loutres/juneau/test/framework"
)

// fencedNetY is netY admitting only the namespaces labelled tenant=<tenant>.
func fencedNetY(name, typ, tenant string, pools ...string) string {
	return netY(name, typ, pools...) + fmt.Sprintf("  namespaceSelector:\n    matchLabels:\n      tenant: %s\n", tenant)
}

// autoPod asks for an automatic ElasticIP from network.
func autoPod(name, network string) string {
	return podY(name, []string{`juneau.loutres.me/pod-with-eip: "true"`, "juneau.loutres.me/eip-external-network: " + network}, nil)
}

// TestTenancy: an ExternalNetwork's namespaceSelector, end to end with the webhook (as its
// ServiceAccount, with the manifest's RBAC) and the controller. In a namespace the
// network does not select, an ElasticIP and a Pod asking for an automatic one are
// refused, naming the field, the network, the namespace and the selector; in one it
// selects, both are admitted and served. Relabelled out of the selection, the namespace
// keeps the address it holds (Allocated True, saying why, and a Warning Event), an
// ElasticIP still waiting for an address gets none (Allocated False
// NamespaceNotAdmitted), and the Pod waiting for its automatic one is told so.
func TestTenancy(t *testing.T) {
	cp := framework.Shared(t)
	runningWebhook(t, cp)
	ctrl := framework.StartComponent(t, "controller", "controller", "--kubeconfig="+cp.Kubeconfig,
		"--leader-elect=false", "--metrics-bind-address=127.0.0.1:0", "--metrics-secure=false", "-v=2")
	e := newEnv(t, cp)
	e.forceDeletePodsAtEnd()
	j := cp.Juneau.JuneauV1alpha1()
	// One address: the first ElasticIP takes it, the others wait.
	e.mustApply(poolY("$P-pool", "arp", "10.225.$O.10") + fencedNetY("$P-net", "arp", "$P", "$P-pool"))

	refusal := []string{`ExternalNetwork "$P-net" does not admit namespace "$NS"`,
		`(its spec.namespaceSelector "tenant=$P" does not match the namespace's labels)`}
	r := e.kubectl(eipY("e", "$P-net", ""), "apply", "-f", "-")
	wantRefused(t, e, r, "an ElasticIP in a namespace the network does not select", append([]string{"spec.externalNetwork"}, refusal...))
	r = e.kubectl(autoPod("web", "$P-net"), "apply", "-f", "-")
	wantRefused(t, e, r, "a Pod asking for an automatic ElasticIP there",
		append([]string{"metadata.annotations[juneau.loutres.me/eip-external-network]"}, refusal...))

	// Selected: both are admitted, and the ElasticIP gets the address.
	if r := e.kubectl("", "label", "namespace", "$NS", "tenant=$P"); r.Err != nil {
		t.Fatal(r.Err)
	}
	e.mustApply(eipY("e", "$P-net", ""))
	address := e.expand("10.225.$O.10")
	framework.Eventually(t, "ElasticIP e gets the address", func(ctx context.Context) (bool, string) {
		eip, err := j.ElasticIPs(e.ns).Get(ctx, "e", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return eip.Status.Address == address, eipState(eip)
	}, ctrl)
	e.mustApply(eipY("w", "$P-net", "") + autoPod("web", "$P-net"))
	for _, name := range []string{"w", "web"} { // web: the Pod's automatic ElasticIP
		waitAllocated(t, cp, e.ns, name, metav1.ConditionFalse, v1alpha1.ReasonNoAddressAvailable, "", ctrl)
	}

	// Relabelled out of the selection.
	if r := e.kubectl("", "label", "--overwrite", "namespace", "$NS", "tenant=someone-else"); r.Err != nil {
		t.Fatal(r.Err)
	}
	notAdmitted := e.expand(refusal[0])
	waitAllocated(t, cp, e.ns, "w", metav1.ConditionFalse, v1alpha1.ReasonNamespaceNotAdmitted, notAdmitted, ctrl)
	waitAllocated(t, cp, e.ns, "e", metav1.ConditionTrue, v1alpha1.ReasonAllocated, notAdmitted, ctrl)
	if eip, err := j.ElasticIPs(e.ns).Get(context.Background(), "e", metav1.GetOptions{}); err != nil || eip.Status.Address != address {
		t.Errorf("ElasticIP e lost its address: %v %s", err, eipState(eip))
	}
	if msg := waitEvent(t, cp, e.ns, "ElasticIP", "e", v1alpha1.ReasonNamespaceNotAdmitted, ctrl); !strings.Contains(msg, notAdmitted) {
		t.Errorf("Event %q does not say why", msg)
	}
	waitEvent(t, cp, e.ns, "ElasticIP", "w", v1alpha1.ReasonNamespaceNotAdmitted, ctrl)
	framework.Eventually(t, "Pod web told its ElasticIP gets no address", func(ctx context.Context) (bool, string) {
		p, err := cp.Kube.CoreV1().Pods(e.ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := status.PodCondition(p, v1alpha1.PodConditionElasticIPAssigned)
		if c == nil {
			return false, "no condition"
		}
		return c.Status == corev1.ConditionFalse && c.Reason == v1alpha1.ReasonNamespaceNotAdmitted && strings.Contains(c.Message, notAdmitted),
			fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
	}, ctrl)

	// And new ones are refused again.
	r = e.kubectl(eipY("e2", "$P-net", ""), "apply", "-f", "-")
	wantRefused(t, e, r, "a new ElasticIP after the relabelling", append([]string{"spec.externalNetwork"}, refusal...))
}

func wantRefused(t *testing.T, e *env, r framework.KubectlResult, what string, want []string) {
	t.Helper()
	if r.Err == nil {
		t.Errorf("%s: accepted, want refused with %q", what, want)
		return
	}
	for _, w := range want {
		if w = e.expand(w); !strings.Contains(r.Stderr, w) {
			t.Errorf("%s: the refusal lacks %q:\n%s", what, w, r.Stderr)
		}
	}
}

// waitAllocated waits until the ElasticIP's Allocated condition has that status and
// reason, and a message containing msg.
func waitAllocated(t *testing.T, cp *framework.ControlPlane, ns, name string, st metav1.ConditionStatus, reason, msg string, ctrl *framework.Component) {
	t.Helper()
	framework.Eventually(t, fmt.Sprintf("ElasticIP %s Allocated %s %s", name, st, reason), func(ctx context.Context) (bool, string) {
		eip, err := cp.Juneau.JuneauV1alpha1().ElasticIPs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(eip.Status.Conditions, v1alpha1.ConditionAllocated)
		return c != nil && c.Status == st && c.Reason == reason && strings.Contains(c.Message, msg), eipState(eip)
	}, ctrl)
}

// waitEvent waits for an Event of that reason on the named object and returns its message.
func waitEvent(t *testing.T, cp *framework.ControlPlane, ns, kind, name, reason string, ctrl *framework.Component) string {
	t.Helper()
	var msg string
	framework.Eventually(t, "Event "+reason+" on "+kind+" "+name, func(ctx context.Context) (bool, string) {
		list, err := cp.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, ev := range list.Items {
			if ev.InvolvedObject.Kind == kind && ev.InvolvedObject.Name == name {
				seen = append(seen, ev.Type+" "+ev.Reason)
				if ev.Reason == reason && ev.Type == corev1.EventTypeWarning {
					msg = ev.Message
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("Events seen: %v", seen)
	}, ctrl)
	return msg
}

func eipState(eip *v1alpha1.ElasticIP) string {
	if eip == nil {
		return "<none>"
	}
	s := fmt.Sprintf("phase=%s address=%q", eip.Status.Phase, eip.Status.Address)
	for _, c := range eip.Status.Conditions {
		s += fmt.Sprintf(" [%s=%s %s: %s]", c.Type, c.Status, c.Reason, c.Message)
	}
	return s
}
