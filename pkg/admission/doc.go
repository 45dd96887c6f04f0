// Package admission is the ValidatingAdmissionWebhook of juneau (docs/reference.md#admission): a TLS
// server whose certificate files are re-read when they change, an AdmissionReview v1
// handler, and one set of rules per kind.
//
// Rules reuse the pure spec checks of pkg/apis/juneau/validation and the annotation
// grammar of pkg/apis/juneau/annotations, and add the checks between objects, read
// from informer caches and confirmed against the API server where a stale cache could
// admit a conflict (see reader). Denials carry the field path and name the object in
// the way: 422 Invalid for creates and updates, 403 Forbidden for deletions.
//
// Some writes are never blocked, so that objects can always be cleaned up: updates of
// an object already being deleted (finalizer removal), updates that leave the checked
// fields as they were (labels, finalizers), and status subresources.
package admission
