package status

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// Object is an API object whose status a Writer writes.
type Object interface {
	metav1.Object
	runtime.Object
}

// Applier is the typed client of one kind, bound to a namespace for a namespaced kind,
// as the generated clientset gives it.
type Applier[AC, O any] interface {
	ApplyStatus(ctx context.Context, ac AC, opts metav1.ApplyOptions) (O, error)
}

// UIDApply is a kind's apply configuration: it can carry the UID of the object it was
// computed from.
type UIDApply[AC any] interface {
	WithUID(types.UID) AC
}

// Announced is one condition type whose changes are announced, and the Policy that
// says which changes deserve an Event.
type Announced struct {
	Type   string
	Policy Policy
}

// Writer is the one way a juneau component writes the status fields it owns: server-side
// apply under its field manager, stamped with the UID of the object the status was
// computed from, a log line, and the Events its Policies grant. Every controller and
// the node agent write through one (docs/design.md#status-and-events).
type Writer[AC UIDApply[AC], O any] struct {
	// Kind names the kind in log lines and errors ("AddressPool").
	Kind string
	// FieldManager owns the fields written (v1alpha1.FieldManagerController, …Node).
	FieldManager string
	// Client gives the kind's typed client for a namespace ("" for a cluster-scoped kind).
	Client func(namespace string) Applier[AC, O]
	// Recorder records the Events; nil records none.
	Recorder record.EventRecorder
	// Events are the conditions whose changes are announced, in this order.
	Events []Announced
	// Wrote, when set, is told the object the API server returned for each write, so
	// that the writer can recognise the watch event of its own write (the node agent's
	// echoes); may be nil.
	Wrote func(written metav1.Object)
}

// Write applies ac, the owner's fields of obj's status, with obj's UID, so a status
// computed from an object never lands on a newer object of the same name. old and cur
// are the conditions before and after; a condition of w.Events that changed gets the
// Event its Policy grants. keysAndValues are added to the log line.
//
// It returns false and no error when obj is gone or was replaced under its name: the
// watch events of the newer state bring it back.
func (w Writer[AC, O]) Write(ctx context.Context, obj Object, ac AC, old, cur []metav1.Condition, keysAndValues ...any) (bool, error) {
	logger := klog.FromContext(ctx)
	out, err := w.Client(obj.GetNamespace()).ApplyStatus(ctx, ac.WithUID(obj.GetUID()),
		metav1.ApplyOptions{FieldManager: w.FieldManager, Force: true})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		logger.V(2).Info("Object gone or replaced before its status was written", "kind", w.Kind, "object", klog.KObj(obj))
		return false, nil
	case err != nil:
		return false, fmt.Errorf("writing status of %s %q: %w", w.Kind, klog.KObj(obj).String(), err)
	}
	if m, ok := any(out).(metav1.Object); ok && w.Wrote != nil {
		w.Wrote(m)
	}
	if l := logger.V(2); l.Enabled() {
		l.Info("Wrote "+w.Kind+" status", append([]any{"kind", w.Kind, "object", klog.KObj(obj)}, keysAndValues...)...)
	}
	for _, a := range w.Events {
		Announce(w.Recorder, obj, a.Policy, meta.FindStatusCondition(old, a.Type), meta.FindStatusCondition(cur, a.Type))
	}
	return true, nil
}

// One lays the condition want over recorded (Merge) and returns it as it is to be
// written, and whether it differs from the recorded condition of its type. Writers that
// own a single condition of an object (the node agent's Answering and Announced, the
// heartbeat's Unknown) compare with it.
//
// It copies nothing and reflects on nothing (an agent compares every one of its
// Node's advertisements at each sync): cur is the recorded condition with want's
// status, reason, message and observed generation, its lastTransitionTime moved to now
// only when the status flips, as Merge would make it (TestOneAgreesWithMerge).
func One(recorded []metav1.Condition, want metav1.Condition, now metav1.Time) (metav1.Condition, bool) {
	have := meta.FindStatusCondition(recorded, want.Type)
	if have == nil {
		want.LastTransitionTime = now
		return want, true
	}
	cur := *have
	changed := false
	if cur.Status != want.Status {
		cur.Status, cur.LastTransitionTime, changed = want.Status, now, true
	}
	if cur.Reason != want.Reason || cur.Message != want.Message || cur.ObservedGeneration != want.ObservedGeneration {
		cur.Reason, cur.Message, cur.ObservedGeneration, changed = want.Reason, want.Message, want.ObservedGeneration, true
	}
	return cur, changed
}

// AnotherObject reports a patch whose metadata.uid no longer matches: the object of that
// name was deleted and made again (a StatefulSet's Pod, a Pod re-created on another
// Node). The API server answers such a patch as an invalid change of the immutable
// metadata.uid; the writer's caches bring the newer object soon.
func AnotherObject(err error) bool {
	if !apierrors.IsInvalid(err) {
		return false
	}
	var s apierrors.APIStatus
	if !errors.As(err, &s) || s.Status().Details == nil {
		return false
	}
	for _, c := range s.Status().Details.Causes {
		if c.Field == "metadata.uid" {
			return true
		}
	}
	return false
}
