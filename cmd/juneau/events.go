package main

import (
	"errors"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// eventSink is the sink of the controller's Event recorder. An Event of an object whose
// namespace is gone is dropped quietly: deleting a namespace deletes the ElasticIPs in
// it, the controller records their release, and by then the API server may refuse the
// Event because its namespace no longer exists. client-go drops the Event of a namespace
// being deleted quietly already; one whose namespace is gone it would report as an
// error, which in a healthy cluster it is not.
type eventSink struct {
	record.EventSink
	logger klog.Logger
}

func (s eventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	out, err := s.EventSink.Create(e)
	if namespaceGone(err, e.Namespace) {
		s.logger.V(5).Info("Event dropped: its namespace is gone", "event", klog.KObj(e), "reason", e.Reason)
		return e, nil
	}
	return out, err
}

// namespaceGone reports whether err is the API server's refusal of an object of
// namespace because that namespace does not exist.
func namespaceGone(err error, namespace string) bool {
	var st apierrors.APIStatus
	if namespace == "" || !apierrors.IsNotFound(err) || !errors.As(err, &st) {
		return false
	}
	d := st.Status().Details
	return d != nil && d.Kind == "namespaces" && d.Name == namespace
}
