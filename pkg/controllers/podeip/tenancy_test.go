package podeip

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// A Pod whose ElasticIP gets no address because the network does not admit the Pod's
// namespace (docs/automatic.md#tenancy) is told so by its condition and a Warning Event,
// as for exhausted pools, not left with a routine "being created".
func TestConditionNamespaceNotAdmitted(t *testing.T) {
	pod := newPod("web", withEIP("ext-net"))
	refusal := `ExternalNetwork "ext-net" does not admit namespace "` + testNS + `" (its spec.namespaceSelector "tenant=a" does not match the namespace's labels): ` +
		`no address is reserved for this ElasticIP until the network admits the namespace`
	refused := ownEIP(pod, "Follow", func(e *v1alpha1.ElasticIP) {
		e.Status = v1alpha1.ElasticIPStatus{Phase: v1alpha1.ElasticIPPending, Conditions: []metav1.Condition{{
			Type: v1alpha1.ConditionAllocated, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonNamespaceNotAdmitted, Message: refusal}}}
	})
	w := world{pod: pod, eips: []*v1alpha1.ElasticIP{refused}, nics: []*v1alpha1.NetworkInterface{nicOf(pod)},
		networks: []*v1alpha1.ExternalNetwork{network("ext-net", false)}}
	p := planPod(w.inputs(t0))
	c := p.Condition
	if c == nil || c.Status != corev1.ConditionFalse || c.Reason != v1alpha1.ReasonNamespaceNotAdmitted ||
		c.Message != `ElasticIP "web" gets no address: `+refusal {
		t.Fatalf("condition %+v, want False NamespaceNotAdmitted quoting the ElasticIP's", c)
	}
	if routine(c) {
		t.Error("the refusal counts as a routine step: a Pod without the condition would never be told")
	}
	if !slices.ContainsFunc(p.Problems, func(pr problem) bool {
		return pr.Object == pod && pr.Reason == v1alpha1.ReasonNamespaceNotAdmitted && strings.Contains(pr.Message, refusal)
	}) {
		t.Errorf("problems %+v, want a Warning about the Pod", p.Problems)
	}
	if v1alpha1.EventType(v1alpha1.ReasonNamespaceNotAdmitted) != corev1.EventTypeWarning {
		t.Error("NamespaceNotAdmitted is not a Warning")
	}
}
