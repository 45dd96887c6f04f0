package status

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func TestPolicy(t *testing.T) {
	cond := func(s metav1.ConditionStatus, reason string) *metav1.Condition {
		return &metav1.Condition{Type: v1alpha1.ConditionReady, Status: s, Reason: reason, Message: "m"}
	}
	var (
		readyT    = cond(metav1.ConditionTrue, v1alpha1.ReasonReady)
		waitingF  = cond(metav1.ConditionFalse, v1alpha1.ReasonWaitingForPodIP)
		conflictF = cond(metav1.ConditionFalse, v1alpha1.ReasonConflict)
	)
	quietFalse := Policy{Quiet: metav1.ConditionFalse, WarnOnLoss: true}
	quietTrue := Policy{Quiet: metav1.ConditionTrue}
	tests := []struct {
		name     string
		p        Policy
		old, cur *metav1.Condition
		want     string // event type, "" for none
	}{
		{"no condition", Policy{}, readyT, nil, ""},
		{"unchanged", Policy{}, readyT, readyT, ""},
		{"a new message alone is no change", Policy{}, readyT, &metav1.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReady, Message: "other"}, ""},
		{"every first status is announced without Quiet", Policy{}, nil, waitingF, "Normal"},
		{"the quiet first status is not announced", quietFalse, nil, waitingF, ""},
		{"a first status other than the quiet one is", quietFalse, nil, readyT, "Normal"},
		{"a Warning first status is announced even when quiet", quietFalse, nil, conflictF, "Warning"},
		{"quiet True: a ready start is not announced", quietTrue, nil, readyT, ""},
		{"quiet True: a failed start is", quietTrue, nil, conflictF, "Warning"},
		{"the type is the reason's severity", Policy{}, readyT, conflictF, "Warning"},
		{"losing True keeps the reason's severity without WarnOnLoss", Policy{}, readyT, waitingF, "Normal"},
		{"losing True is a Warning with WarnOnLoss", quietFalse, readyT, waitingF, "Warning"},
		{"a new reason while False follows the reason", quietFalse, conflictF, waitingF, "Normal"},
		{"recovering is Normal", quietFalse, waitingF, readyT, "Normal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, ok := tt.p.Event(tt.old, tt.cur)
			if got := map[bool]string{true: ev.Type}[ok]; got != tt.want {
				t.Errorf("event type %q, want %q", got, tt.want)
			}
			if ok && (ev.Reason != tt.cur.Reason || ev.Message != tt.cur.Message) {
				t.Errorf("event %+v does not carry the condition's reason and message", ev)
			}
		})
	}
}

func TestAnnounceAndEventf(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	obj := &v1alpha1.ElasticIP{}
	Announce(rec, obj, Policy{}, nil, &metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonConflict, Message: "two users"})
	Eventf(rec, obj, v1alpha1.EventAdvertisementMoved, "to %s", "node-b")
	Eventf(nil, obj, v1alpha1.EventAdvertisementMoved, "nobody records this")
	Announce(nil, obj, Policy{}, nil, &metav1.Condition{Reason: v1alpha1.ReasonConflict})
	for _, want := range []string{"Warning Conflict two users", "Normal AdvertisementMoved to node-b"} {
		if got := <-rec.Events; got != want {
			t.Errorf("event %q, want %q", got, want)
		}
	}
	if len(rec.Events) != 0 {
		t.Errorf("%d more events", len(rec.Events))
	}
}
