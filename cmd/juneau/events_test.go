package main

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
)

// sinkAnswering answers every Create with err.
type sinkAnswering struct{ err error }

func (s sinkAnswering) Create(e *corev1.Event) (*corev1.Event, error) { return nil, s.err }
func (s sinkAnswering) Update(e *corev1.Event) (*corev1.Event, error) { return nil, s.err }
func (s sinkAnswering) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) {
	return nil, s.err
}

// An Event whose namespace is gone is dropped without an error; any other refusal, even
// a NotFound of something else, is passed on.
func TestEventSinkDropsEventsOfGoneNamespaces(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	event := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "spec-9c8435", Name: "nat-eip.1"}, Reason: "Released"}
	gone := apierrors.NewNotFound(corev1.Resource("namespaces"), "spec-9c8435")
	for _, tc := range []struct {
		name    string
		err     error
		dropped bool
	}{
		{"namespace gone", gone, true},
		{"wrapped", fmt.Errorf("creating: %w", gone), true},
		{"another namespace gone", apierrors.NewNotFound(corev1.Resource("namespaces"), "other"), false},
		{"event not found", apierrors.NewNotFound(corev1.Resource("events"), "nat-eip.1"), false},
		{"forbidden", apierrors.NewForbidden(corev1.Resource("events"), "nat-eip.1", errors.New("no")), false},
		{"transport", errors.New("connection refused"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := eventSink{EventSink: sinkAnswering{err: tc.err}, logger: logger}
			got, err := s.Create(event)
			if tc.dropped && (err != nil || got != event) {
				t.Errorf("Create = %v, %v; want the Event back and no error", got, err)
			}
			if !tc.dropped && err != tc.err {
				t.Errorf("Create error %v, want %v passed on", err, tc.err)
			}
		})
	}
}
