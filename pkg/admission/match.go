package admission

import (
	"fmt"
	"strings"

	"github.com/loutres/juneau/pkg/apis/juneau/annotations"
)

// PodMatchExpression is the CEL expression of the Pod webhook's matchCondition: only
// Pods carrying a juneau annotation or one of its compatibility keys are sent to the
// webhook, so a webhook outage never blocks other Pods. An update is sent when the old
// Pod carried one too, so that removing a direct-use annotation is seen (and refused).
// manifests/webhook uses it verbatim (a test keeps the two equal).
func PodMatchExpression() string {
	keys := annotations.CompatibilityKeys()
	quoted := make([]string, len(keys))
	for i, k := range keys {
		quoted[i] = "'" + k + "'"
	}
	carries := func(obj string) string {
		return fmt.Sprintf("has(%s.metadata.annotations) && %s.metadata.annotations.exists(k, k.startsWith('%s') || k in [%s])",
			obj, obj, annotations.Prefix, strings.Join(quoted, ", "))
	}
	return fmt.Sprintf("(%s) || (oldObject != null && %s)", carries("object"), carries("oldObject"))
}
