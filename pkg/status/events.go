package status

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// Policy says which changes of one condition are announced by an Event. A change is a
// new status or a new reason; the Event carries the new reason and message, and its type
// is the severity declared for the reason (v1alpha1.EventType). The owner of a condition
// declares one Policy for it; there is no other rule.
type Policy struct {
	// Quiet is the status a new object's condition usually starts with: a first status
	// equal to it is not announced unless its reason is a Warning (a Pending NIC, a
	// Ready pool). Empty: every first status is announced.
	Quiet metav1.ConditionStatus
	// WarnOnLoss makes a condition that was True and no longer is a Warning, whatever
	// the new reason: losing readiness is worth a user's attention.
	WarnOnLoss bool
}

// Event is one Event to record.
type Event struct {
	Type, Reason, Message string
}

// Event says which Event the change from old to cur deserves, if any. old is nil for
// an object's first status.
func (p Policy) Event(old, cur *metav1.Condition) (Event, bool) {
	if cur == nil || old != nil && old.Status == cur.Status && old.Reason == cur.Reason {
		return Event{}, false
	}
	ev := Event{Type: v1alpha1.EventType(cur.Reason), Reason: cur.Reason, Message: cur.Message}
	switch {
	case old == nil && p.Quiet != "" && cur.Status == p.Quiet && ev.Type != corev1.EventTypeWarning:
		return Event{}, false
	case p.WarnOnLoss && old != nil && old.Status == metav1.ConditionTrue && cur.Status != metav1.ConditionTrue:
		ev.Type = corev1.EventTypeWarning
	}
	return ev, true
}

// Announce records the Event the change from old to cur deserves under p, if any. A nil
// recorder records nothing.
func Announce(recorder record.EventRecorder, obj runtime.Object, p Policy, old, cur *metav1.Condition) {
	if ev, ok := p.Event(old, cur); ok && recorder != nil {
		recorder.Event(obj, ev.Type, ev.Reason, ev.Message)
	}
}

// Eventf records an Event of reason, with the severity declared for it. A nil recorder
// records nothing.
func Eventf(recorder record.EventRecorder, obj runtime.Object, reason, format string, args ...any) {
	if recorder != nil {
		recorder.Eventf(obj, v1alpha1.EventType(reason), reason, format, args...)
	}
}
