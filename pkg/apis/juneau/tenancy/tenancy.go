// Package tenancy decides which namespaces may take addresses from an ExternalNetwork:
// those its spec.namespaceSelector matches (docs/reference.md#tenancy). The webhook and
// the ElasticIP controller both ask it, with the network and the namespace's labels, so
// the two never disagree.
package tenancy

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/loutres/juneau/pkg/apis/juneau/messages"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// Open reports whether the network admits every namespace: it has no namespaceSelector
// (the field is absent, as on every network made before it existed) or an empty one
// ({}). The namespace's labels need not be read then.
func Open(net *v1alpha1.ExternalNetwork) bool {
	sel := net.Spec.NamespaceSelector
	return sel == nil || len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0
}

// Refusal says why the network does not admit the namespace, whose labels are given, or
// returns "" when it does. The message names the network, the namespace and the
// selector, and nothing else: it is shown to whoever wrote in the namespace. A selector
// that cannot be parsed (written while the webhook was away) admits no namespace: a
// mistake in the fence must not open it.
func Refusal(net *v1alpha1.ExternalNetwork, namespace string, nsLabels map[string]string) string {
	if Open(net) {
		return ""
	}
	prefix := fmt.Sprintf("ExternalNetwork %q does not admit namespace %q", net.Name, namespace)
	sel, err := metav1.LabelSelectorAsSelector(net.Spec.NamespaceSelector)
	if err != nil {
		return fmt.Sprintf("%s (its spec.namespaceSelector is invalid, so it admits no namespace: %s)",
			prefix, messages.Cut(err.Error(), messages.MaxDetail))
	}
	if sel.Matches(labels.Set(nsLabels)) {
		return ""
	}
	return fmt.Sprintf("%s (its spec.namespaceSelector %q does not match the namespace's labels)",
		prefix, messages.Cut(metav1.FormatLabelSelector(net.Spec.NamespaceSelector), messages.MaxValue))
}

// TrimNamespace is the transform of every informer that caches Namespaces for this
// decision (the webhook's, the controller's): it keeps a Namespace's identity and labels,
// all that Refusal reads. Other objects pass unchanged.
func TrimNamespace(obj any) (any, error) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return obj, nil
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:              ns.Name,
		UID:               ns.UID,
		ResourceVersion:   ns.ResourceVersion,
		DeletionTimestamp: ns.DeletionTimestamp,
		Labels:            ns.Labels,
	}}, nil
}
