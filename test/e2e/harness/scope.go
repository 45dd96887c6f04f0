package harness

import (
	"context"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	"github.com/loutres/juneau/test/framework"
)

// nodeScopePolicy names the ValidatingAdmissionPolicy of manifests/10-rbac-node-scope.yaml.
const nodeScopePolicy = "juneau-node-scope"

// waitForNodeScope waits until the API server enforces the node-scope policy (it loads
// policies asynchronously), so that every write of every agent in the test is judged
// by it: the agent of node, with a token bound to it, may not create (dry run) a
// BGPNodeStatus named after no Node.
func (c *Cluster) waitForNodeScope(node string) {
	c.t.Helper()
	jn := versioned.NewForConfigOrDie(c.CP.NodeBoundConfig(c.t, framework.NodeNamespace, framework.NodeServiceAccount, node))
	var last error
	c.waitFor("the API server to enforce "+nodeScopePolicy, func(ctx context.Context) bool {
		_, last = jn.JuneauV1alpha1().BGPNodeStatuses().Create(ctx, &v1alpha1.BGPNodeStatus{ObjectMeta: metav1.ObjectMeta{Name: "juneau-scope-probe"}},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: v1alpha1.FieldManagerNode})
		return apierrors.IsForbidden(last) && strings.Contains(last.Error(), nodeScopePolicy)
	}, func() string { return "last answer: " + errString(last) })
}

func errString(err error) string {
	if err == nil {
		return "accepted"
	}
	return err.Error()
}
