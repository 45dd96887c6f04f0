package podeip

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// eipPatch is the JSON merge patch from the cached ElasticIP to the wanted one, over the
// fields this controller owns: its label, the strategy and gone-since annotations, the
// Pod's ownerReference and spec.bandwidthMbps. A patch leaves the ElasticIP controller's
// concurrent status and finalizer writes alone, where an update of the whole object
// would conflict with them. The UID makes it fail on a newer ElasticIP of the same name.
func eipPatch(old, want *v1alpha1.ElasticIP) ([]byte, error) {
	meta := map[string]any{"uid": old.UID}
	if v := want.Labels[v1alpha1.LabelPod]; old.Labels[v1alpha1.LabelPod] != v {
		meta["labels"] = map[string]any{v1alpha1.LabelPod: v}
	}
	ann := map[string]any{}
	for _, k := range []string{v1alpha1.AnnotationReleaseStrategy, v1alpha1.AnnotationPodGoneSince} {
		v, ok := want.Annotations[k]
		was, had := old.Annotations[k]
		switch {
		case ok && (!had || was != v):
			ann[k] = v
		case !ok && had:
			ann[k] = nil
		}
	}
	if len(ann) > 0 {
		meta["annotations"] = ann
	}
	if !equality.Semantic.DeepEqual(old.OwnerReferences, want.OwnerReferences) {
		// The list is replaced as a whole: guard it against a concurrent change.
		meta["ownerReferences"] = want.OwnerReferences
		meta["resourceVersion"] = old.ResourceVersion
	}
	patch := map[string]any{"metadata": meta}
	if !equality.Semantic.DeepEqual(old.Spec.BandwidthMbps, want.Spec.BandwidthMbps) {
		patch["spec"] = map[string]any{"bandwidthMbps": want.Spec.BandwidthMbps}
	}
	return json.Marshal(patch)
}
