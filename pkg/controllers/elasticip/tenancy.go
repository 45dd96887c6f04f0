package elasticip

import (
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/loutres/juneau/pkg/apis/juneau/tenancy"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/status"
)

// Tenancy (docs/reference.md#tenancy). The webhook refuses an ElasticIP in a namespace
// its network does not admit; what it cannot see — a namespace relabelled, a selector
// changed, an ElasticIP written while the webhook was away — is decided here, with the
// same function (tenancy.Refusal):
//   - an ElasticIP without an address gets none: Pending, Allocated False
//     (NamespaceNotAdmitted), until the namespace is admitted again;
//   - an ElasticIP that holds an address keeps it, and its user keeps the traffic: a
//     live address is never taken away behind a user's back. Allocated stays True
//     (reason Allocated: the address is reserved, and the traffic flows) and its message
//     says the namespace is no longer admitted; a Warning Event NamespaceNotAdmitted
//     says so once (announceKept). Deleting the ElasticIP releases the address, and
//     the namespace gets no new one from the network while it is not admitted.

// notAdmitted says why the ElasticIP's network does not admit its namespace, or returns
// "" when it does (or when there is no network to ask: resolve reports that). A network
// that admits every namespace needs no namespace read. A namespace the cache does not
// show yet is an error: the sync is retried, and the namespace's arrival wakes its
// ElasticIPs anyway (namespaceHandler).
func (c *Controller) notAdmitted(eip *v1alpha1.ElasticIP, network *v1alpha1.ExternalNetwork) (string, error) {
	if network == nil || tenancy.Open(network) {
		return "", nil
	}
	ns, err := c.namespaces.Get(eip.Namespace)
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("namespace %q of ElasticIP %q is not in the cache yet", eip.Namespace, eip.Name)
	}
	if err != nil {
		return "", err
	}
	return tenancy.Refusal(network, eip.Namespace, ns.Labels), nil
}

// notAdmittedError is the reason no address is reserved for an ElasticIP whose namespace
// its network does not admit.
func notAdmittedError(refusal string) *conditionError {
	return &conditionError{v1alpha1.ReasonNamespaceNotAdmitted,
		refusal + ": no address is reserved for this ElasticIP until the network admits the namespace"}
}

// keptDespite is what the Allocated message of an ElasticIP that holds an address adds
// when its network no longer admits its namespace.
func keptDespite(refusal string) string {
	return refusal + ": the address stays with this ElasticIP and whoever uses it while the ElasticIP exists " +
		"(an address in use is never taken away); once it is deleted, no ElasticIP of this namespace gets one from the network while it does not admit the namespace"
}

// announceKept records a Warning Event when an ElasticIP that holds an address is first
// found in a namespace its network does not admit (the Allocated message says so from
// then on).
func (c *Controller) announceKept(eip *v1alpha1.ElasticIP, claim *v1alpha1.AllocationClaim, refusal string) {
	if refusal == "" || claim == nil {
		return
	}
	if cond := meta.FindStatusCondition(eip.Status.Conditions, v1alpha1.ConditionAllocated); cond != nil && strings.Contains(cond.Message, refusal) {
		return
	}
	status.Eventf(c.recorder, eip, v1alpha1.ReasonNamespaceNotAdmitted, "Address %q is kept: %s", claim.Spec.Address, keptDespite(refusal))
}

// namespaceHandler wakes the ElasticIPs of a namespace that appears or whose labels
// change: the networks' namespaceSelectors may say otherwise about them now.
func (c *Controller) namespaceHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueNamespace,
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*corev1.Namespace)
			cur, ok2 := newObj.(*corev1.Namespace)
			if ok1 && ok2 && !maps.Equal(old.Labels, cur.Labels) {
				c.enqueueNamespace(cur)
			}
		},
	}
}

func (c *Controller) enqueueNamespace(obj any) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return
	}
	eips, err := c.eips.ElasticIPs(ns.Name).List(labels.Everything())
	if err != nil {
		return
	}
	for _, eip := range eips {
		c.eipLoop.AddObject(eip)
	}
}
