package admission

import (
	"fmt"
	"strings"

	"github.com/loutres/juneau/pkg/apis/juneau/annotations"
)

// PodMatchExpression is the CEL expression of the Pod webhook's matchCondition: only
// Pods carrying a juneau annotation or one of its compatibility keys are sent to the
// webhook, so a webhook outage never blocks other Pods. manifests/webhook uses it
// verbatim (a test keeps the two equal).
func PodMatchExpression() string {
	keys := annotations.CompatibilityKeys()
	quoted := make([]string, len(keys))
	for i, k := range keys {
		quoted[i] = "'" + k + "'"
	}
	return fmt.Sprintf("has(object.metadata.annotations) && object.metadata.annotations.exists(k, k.startsWith('%s') || k in [%s])",
		annotations.Prefix, strings.Join(quoted, ", "))
}
