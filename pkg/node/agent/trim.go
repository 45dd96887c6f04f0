package agent

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// TrimAttachment is the transform of the agent's ElasticIPAttachment informer. Every
// agent caches every attachment of the cluster (in-cluster clients on its Node reach
// ElasticIPs attached anywhere), so it keeps of each only what Compute and the readiness
// gate read: name, namespace, UID, resourceVersion, generation, deletion time, spec and
// status. Managed fields, annotations (kubectl's last-applied configuration), labels,
// owners and finalizers, often most of an object's size, are dropped. Other objects pass
// unchanged; trimming twice is trimming once.
func TrimAttachment(obj any) (any, error) {
	a, ok := obj.(*v1alpha1.ElasticIPAttachment)
	if !ok {
		return obj, nil
	}
	a.ObjectMeta = metav1.ObjectMeta{
		Name: a.Name, Namespace: a.Namespace, UID: a.UID, ResourceVersion: a.ResourceVersion,
		Generation: a.Generation, DeletionTimestamp: a.DeletionTimestamp,
	}
	return a, nil
}
