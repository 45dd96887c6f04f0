package status

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMerge(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	now := metav1.NewTime(then.Add(time.Hour))
	recorded := []metav1.Condition{
		{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Old", LastTransitionTime: then},
		{Type: "Answering", Status: metav1.ConditionTrue, Reason: "Other", LastTransitionTime: then},
		{Type: "Flips", Status: metav1.ConditionTrue, Reason: "Up", LastTransitionTime: then},
	}
	got := Merge(recorded, []metav1.Condition{
		{Type: "Ready", Status: metav1.ConditionTrue, Reason: "New"},
		{Type: "Flips", Status: metav1.ConditionFalse, Reason: "Down"},
	}, now)
	want := map[string]struct {
		reason string
		at     metav1.Time
	}{"Ready": {"New", then}, "Answering": {"Other", then}, "Flips": {"Down", now}}
	if len(got) != len(want) {
		t.Fatalf("got %d conditions, want %d: %+v", len(got), len(want), got)
	}
	for _, c := range got {
		w := want[c.Type]
		if c.Reason != w.reason || !c.LastTransitionTime.Equal(&w.at) {
			t.Errorf("%s: reason %s at %v, want %s at %v", c.Type, c.Reason, c.LastTransitionTime, w.reason, w.at)
		}
	}
	if recorded[0].Reason != "Old" {
		t.Error("Merge changed the recorded conditions")
	}
}
