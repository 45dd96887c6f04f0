package elasticip

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func TestCountStates(t *testing.T) {
	attached := []metav1.Condition{{Type: v1alpha1.ConditionAttached, Status: metav1.ConditionTrue}}
	notYet := []metav1.Condition{{Type: v1alpha1.ConditionAttached, Status: metav1.ConditionFalse}}
	user := &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindElasticIPAttachment, Name: "a"}
	eips := []*v1alpha1.ElasticIP{
		{Status: v1alpha1.ElasticIPStatus{Phase: v1alpha1.ElasticIPAttached, Attachment: user, Conditions: attached}},
		{Status: v1alpha1.ElasticIPStatus{Phase: v1alpha1.ElasticIPAvailable}},
		{Status: v1alpha1.ElasticIPStatus{Phase: v1alpha1.ElasticIPAvailable, Attachment: user, Conditions: notYet}},
		{Status: v1alpha1.ElasticIPStatus{Phase: v1alpha1.ElasticIPError, Attachment: user}},
		{},
	}
	got := CountStates(eips)
	want := map[v1alpha1.ElasticIPPhase]int{"": 1, v1alpha1.ElasticIPPending: 0, v1alpha1.ElasticIPAvailable: 2,
		v1alpha1.ElasticIPAttached: 1, v1alpha1.ElasticIPError: 1}
	if len(got.Phases) != len(want) {
		t.Errorf("phases %v, want %v", got.Phases, want)
	}
	for p, n := range want {
		if got.Phases[p] != n {
			t.Errorf("phase %q: %d, want %d", p, got.Phases[p], n)
		}
	}
	if got.WaitingForAttach != 2 {
		t.Errorf("waiting for attach: %d, want 2 (a user without Attached True, with or without the condition)", got.WaitingForAttach)
	}
}
