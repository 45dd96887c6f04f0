package agent

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/cached"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// TrimAttachment is the transform of the agent's ElasticIPAttachment informer. Every
// agent caches every attachment of the cluster (in-cluster clients on its Node reach
// ElasticIPs attached anywhere), so it keeps of each only what Compute and the readiness
// gate read: the metadata of keptMeta, spec and status, the conditions' repeated strings
// interned (cached.Lean). Other objects pass unchanged; trimming twice is trimming once.
func TrimAttachment(obj any) (any, error) {
	a, ok := obj.(*v1alpha1.ElasticIPAttachment)
	if !ok {
		return obj, nil
	}
	a.ObjectMeta = keptMeta(a.ObjectMeta)
	return cached.Lean(a)
}

// TrimElasticIP is the transform of the agent's ElasticIP informer. Every agent caches
// every ElasticIP of the cluster (a Pod here may carry any ElasticIP of its namespace,
// an advertisement here may name any), so it keeps of each only what the agent reads:
// the metadata of keptMeta, the spec, and of the status the phase, the address and the
// user (the attachment or NetworkInterface holding it). The conditions go too: the
// agent reads none of an ElasticIP's, and an update that changes only them (Attached
// turning True once the user's traffic arrives, a message) then leaves the cached
// object as it was, so it starts no sync of the agent (sameButVersion) on any Node.
// Other objects pass unchanged; trimming twice is trimming once.
func TrimElasticIP(obj any) (any, error) {
	e, ok := obj.(*v1alpha1.ElasticIP)
	if !ok {
		return obj, nil
	}
	e.ObjectMeta = keptMeta(e.ObjectMeta)
	e.Status.Conditions = nil
	return e, nil
}

// keptMeta is what the agent's trimmed caches keep of an object's metadata: name,
// namespace, UID, resourceVersion, generation and deletion time. Managed fields,
// annotations (kubectl's last-applied configuration), labels, owners and finalizers,
// often most of an object's size, are dropped.
func keptMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, DeletionTimestamp: m.DeletionTimestamp,
	}
}
