package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loutres/juneau/pkg/apis/juneau/messages"
)

// kindFunc judges one AdmissionRequest of a kind: nil allows it, a Status denies it.
type kindFunc func(ctx context.Context, req *admissionv1.AdmissionRequest) *metav1.Status

// object is what every validated kind is: a typed API object (pointer).
type object interface {
	runtime.Object
	metav1.Object
}

// rules are the checks of one kind; a nil function allows that operation.
type rules[T object] struct {
	create func(ctx context.Context, obj T) (field.ErrorList, error)
	update func(ctx context.Context, obj, old T) (field.ErrorList, error)
	// remove returns why the object may not be deleted, or "".
	remove func(ctx context.Context, old T) (string, error)
	// unchanged reports updates that leave everything the rules look at as it was
	// (labels, finalizers, owner references...): they are allowed unchecked, so an
	// object that predates a rule, or whose references went away, can still be
	// relabelled or finalized.
	unchanged func(obj, old T) bool
}

// forKind adapts rules to a kindFunc: it decodes the objects, applies the rules every
// kind shares and turns the result into a Status.
//
// Shared rules: an UPDATE of an object already being deleted is always allowed, so
// finalizer removal and the last writes before deletion are never blocked; so is a
// second DELETE of such an object. Status subresources never reach this function.
func forKind[T any, PT interface {
	*T
	object
}](r rules[PT]) kindFunc {
	return func(ctx context.Context, req *admissionv1.AdmissionRequest) *metav1.Status {
		gk := schema.GroupKind{Group: req.Kind.Group, Kind: req.Kind.Kind}
		gr := schema.GroupResource{Group: req.Resource.Group, Resource: req.Resource.Resource}
		switch req.Operation {
		case admissionv1.Create:
			if r.create == nil {
				return nil
			}
			obj, err := decodeObject[T, PT](req.Object, req)
			if err != nil {
				return badRequest(err)
			}
			errs, err := r.create(ctx, obj)
			return verdict(gk, obj.GetName(), errs, err)
		case admissionv1.Update:
			obj, err := decodeObject[T, PT](req.Object, req)
			if err != nil {
				return badRequest(err)
			}
			old, err := decodeObject[T, PT](req.OldObject, req)
			if err != nil {
				return badRequest(fmt.Errorf("oldObject: %w", err))
			}
			if old.GetDeletionTimestamp() != nil || r.update == nil || (r.unchanged != nil && r.unchanged(obj, old)) {
				return nil
			}
			errs, err := r.update(ctx, obj, old)
			return verdict(gk, obj.GetName(), errs, err)
		case admissionv1.Delete:
			if r.remove == nil {
				return nil
			}
			old, err := oldForDelete[T, PT](req)
			if err != nil {
				return badRequest(err)
			}
			if old.GetDeletionTimestamp() != nil {
				return nil
			}
			reason, err := r.remove(ctx, old)
			switch {
			case err != nil:
				return internalError(gk, old.GetName(), err)
			case reason != "":
				st := apierrors.NewForbidden(gr, old.GetName(), errors.New(reason)).ErrStatus
				return &st
			}
		}
		return nil
	}
}

// decodeObject decodes an object of the review. The namespace comes from the request
// when the object does not carry it, as for a create through a namespaced URL.
func decodeObject[T any, PT interface {
	*T
	object
}](raw runtime.RawExtension, req *admissionv1.AdmissionRequest) (PT, error) {
	if len(raw.Raw) == 0 {
		return nil, fmt.Errorf("the request carries no object")
	}
	obj := PT(new(T))
	if err := json.Unmarshal(raw.Raw, obj); err != nil {
		return nil, fmt.Errorf("decoding the %s: %w", req.Kind.Kind, err)
	}
	if obj.GetNamespace() == "" {
		obj.SetNamespace(req.Namespace)
	}
	if obj.GetName() == "" {
		obj.SetName(req.Name)
	}
	return obj, nil
}

// oldForDelete is the object being deleted: oldObject, which the API server sends with
// every DELETE review, or just the name when a client of the handler left it out.
func oldForDelete[T any, PT interface {
	*T
	object
}](req *admissionv1.AdmissionRequest) (PT, error) {
	if len(req.OldObject.Raw) == 0 {
		obj := PT(new(T))
		obj.SetName(req.Name)
		obj.SetNamespace(req.Namespace)
		return obj, nil
	}
	return decodeObject[T, PT](req.OldObject, req)
}

// verdict turns the result of create or update rules into a Status: 422 Invalid with
// one cause per field error, whose messages carry the field path.
func verdict(gk schema.GroupKind, name string, errs field.ErrorList, err error) *metav1.Status {
	switch {
	case err != nil:
		return internalError(gk, name, err)
	case len(errs) == 0:
		return nil
	}
	// Bounded: a huge invalid annotation must not become a huge answer (or log line).
	st := apierrors.NewInvalid(gk, name, messages.Errors(errs)).ErrStatus
	return &st
}

// internalError denies a request the webhook could not judge (the API server did not
// answer a read, say): failing closed keeps an unchecked write out.
func internalError(gk schema.GroupKind, name string, err error) *metav1.Status {
	st := apierrors.NewInternalError(fmt.Errorf("could not check %s %q: %w", gk.Kind, name, err)).ErrStatus
	return &st
}

func badRequest(err error) *metav1.Status {
	st := apierrors.NewBadRequest(err.Error()).ErrStatus
	return &st
}
