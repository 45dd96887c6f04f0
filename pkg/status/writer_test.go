package status

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	applyv1alpha1 "github.com/loutres/juneau/pkg/generated/applyconfiguration/juneau/v1alpha1"
)

// applier records what a Writer sends and answers with err.
type applier struct {
	namespace string
	got       *applyv1alpha1.ElasticIPAttachmentApplyConfiguration
	opts      metav1.ApplyOptions
	err       error
}

func (a *applier) ApplyStatus(_ context.Context, ac *applyv1alpha1.ElasticIPAttachmentApplyConfiguration, opts metav1.ApplyOptions) (*v1alpha1.ElasticIPAttachment, error) {
	a.got, a.opts = ac, opts
	return &v1alpha1.ElasticIPAttachment{}, a.err
}

func newWriter(a *applier, rec record.EventRecorder) ElasticIPAttachmentWriter {
	return ElasticIPAttachmentWriter{Kind: "ElasticIPAttachment", FieldManager: "m", Recorder: rec,
		Events: []Announced{{Type: v1alpha1.ConditionReady, Policy: Policy{Quiet: metav1.ConditionFalse, WarnOnLoss: true}}},
		Client: func(ns string) Applier[*applyv1alpha1.ElasticIPAttachmentApplyConfiguration, *v1alpha1.ElasticIPAttachment] {
			a.namespace = ns
			return a
		}}
}

func ready(s metav1.ConditionStatus, reason string) []metav1.Condition {
	return []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: s, Reason: reason, Message: "m " + reason}}
}

func TestWriterStampsUIDAndAnnouncesTransitions(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	att := &v1alpha1.ElasticIPAttachment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod", UID: "u-1"}}
	a := &applier{}
	rec := record.NewFakeRecorder(10)
	w := newWriter(a, rec)

	ok, err := w.Write(ctx, att, applyv1alpha1.ElasticIPAttachment("web", "prod"), ready(metav1.ConditionTrue, "Ready"),
		ready(metav1.ConditionFalse, v1alpha1.ReasonWaitingForPodIP), "phase", "Pending")
	if err != nil || !ok {
		t.Fatalf("Write = %v, %v; want written", ok, err)
	}
	if a.namespace != "prod" || a.got.UID == nil || *a.got.UID != "u-1" {
		t.Errorf("applied to namespace %q with UID %v, want prod and u-1", a.namespace, a.got.UID)
	}
	if a.opts.FieldManager != "m" || !a.opts.Force {
		t.Errorf("apply options %+v, want field manager m, forced", a.opts)
	}
	select {
	case ev := <-rec.Events:
		// Losing Ready is a Warning under WarnOnLoss, whatever the reason's own severity.
		if !strings.HasPrefix(ev, corev1.EventTypeWarning+" "+v1alpha1.ReasonWaitingForPodIP) {
			t.Errorf("event %q, want a Warning %s", ev, v1alpha1.ReasonWaitingForPodIP)
		}
	default:
		t.Error("losing Ready recorded no Event")
	}

	// The same condition again is written (the caller compared the whole status) but
	// announces nothing.
	if _, err := w.Write(ctx, att, applyv1alpha1.ElasticIPAttachment("web", "prod"), ready(metav1.ConditionFalse, "x"), ready(metav1.ConditionFalse, "x")); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-rec.Events:
		t.Errorf("an unchanged condition recorded %q", ev)
	default:
	}
}

func TestWriterGoneOrReplacedIsNotAnError(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	att := &v1alpha1.ElasticIPAttachment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod", UID: "u-1"}}
	gr := schema.GroupResource{Group: v1alpha1.GroupName, Resource: "elasticipattachments"}
	for name, err := range map[string]error{
		"deleted":  apierrors.NewNotFound(gr, "web"),
		"replaced": apierrors.NewConflict(gr, "web", errors.New("the UID in the precondition does not match")),
	} {
		rec := record.NewFakeRecorder(10)
		ok, got := newWriter(&applier{err: err}, rec).Write(ctx, att, applyv1alpha1.ElasticIPAttachment("web", "prod"),
			nil, ready(metav1.ConditionTrue, "Ready"))
		if ok || got != nil {
			t.Errorf("%s: Write = %v, %v; want not written, no error", name, ok, got)
		}
		if len(rec.Events) != 0 {
			t.Errorf("%s: a write that did not land recorded an Event", name)
		}
	}
	_, err := newWriter(&applier{err: errors.New("connection refused")}, nil).Write(ctx, att,
		applyv1alpha1.ElasticIPAttachment("web", "prod"), nil, nil)
	if err == nil || !strings.Contains(err.Error(), `ElasticIPAttachment "prod/web"`) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("error %v, want it to name the kind, the object and the cause", err)
	}
}

func TestOneKeepsTransitionTimeAndSaysWhetherItChanged(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	now := metav1.NewTime(then.Add(time.Hour))
	recorded := []metav1.Condition{
		{Type: v1alpha1.ConditionAnswering, Status: metav1.ConditionTrue, Reason: "Answering", Message: "a", LastTransitionTime: then},
		{Type: "Other", Status: metav1.ConditionTrue, Reason: "Mine", LastTransitionTime: then},
	}
	same := metav1.Condition{Type: v1alpha1.ConditionAnswering, Status: metav1.ConditionTrue, Reason: "Answering", Message: "a"}
	if cur, changed := One(recorded, same, now); changed || !cur.LastTransitionTime.Equal(&then) {
		t.Errorf("same condition: changed=%v, transition %v; want unchanged at %v", changed, cur.LastTransitionTime, then)
	}
	msg := same
	msg.Message = "b"
	if cur, changed := One(recorded, msg, now); !changed || !cur.LastTransitionTime.Equal(&then) {
		t.Errorf("new message: changed=%v, transition %v; want changed, transition kept", changed, cur.LastTransitionTime)
	}
	flip := same
	flip.Status, flip.Reason = metav1.ConditionFalse, "Refused"
	if cur, changed := One(recorded, flip, now); !changed || !cur.LastTransitionTime.Equal(&now) {
		t.Errorf("flipped: changed=%v, transition %v; want changed at %v", changed, cur.LastTransitionTime, now)
	}
	if _, changed := One(nil, same, now); !changed {
		t.Error("a first condition is a change")
	}
}

// TestOneAgreesWithMerge: One returns what Merge makes of the one condition, and calls
// it changed exactly when that differs from the recorded one (compared semantically),
// over every combination of a recorded condition's fields against a wanted one's.
func TestOneAgreesWithMerge(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	now := metav1.NewTime(then.Add(time.Hour))
	base := metav1.Condition{Type: "Answering", Status: metav1.ConditionTrue, Reason: "Answering", Message: "a", ObservedGeneration: 1}
	variants := func(c metav1.Condition) []metav1.Condition {
		var out []metav1.Condition
		for _, status := range []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse} {
			for _, reason := range []string{"Answering", "Refused"} {
				for _, msg := range []string{"a", "b"} {
					for _, gen := range []int64{1, 2} {
						v := c
						v.Status, v.Reason, v.Message, v.ObservedGeneration = status, reason, msg, gen
						out = append(out, v)
					}
				}
			}
		}
		return out
	}
	other := metav1.Condition{Type: "Other", Status: metav1.ConditionTrue, Reason: "Mine", LastTransitionTime: then}
	recordedSets := [][]metav1.Condition{nil, {other}}
	for _, r := range variants(base) {
		r.LastTransitionTime = then
		recordedSets = append(recordedSets, []metav1.Condition{other, r}, []metav1.Condition{r})
	}
	for _, recorded := range recordedSets {
		for _, want := range variants(base) {
			merged := Merge(recorded, []metav1.Condition{want}, now)
			wantCur := *meta.FindStatusCondition(merged, want.Type)
			have := meta.FindStatusCondition(recorded, want.Type)
			wantChanged := have == nil || !equality.Semantic.DeepEqual(*have, wantCur)
			cur, changed := One(recorded, want, now)
			if !equality.Semantic.DeepEqual(cur, wantCur) || changed != wantChanged {
				t.Errorf("One(%v, %v) = %v, %v; Merge makes %v, %v", recorded, want, cur, changed, wantCur, wantChanged)
			}
		}
	}
}
