// Package realcluster runs juneau on a real two-Node Kubernetes cluster (test/cluster):
// installed with the install steps of the documentation (kubectl apply -k of an overlay),
// then every guide step of the pages (test/doctest), then exercised through what only a
// real cluster does (the scheduler placing Pods, the kubelet evaluating readiness gates,
// the StatefulSet controller re-creating Pods, the garbage collector, DaemonSet rollouts,
// Services, the Pod-bound tokens the node-scope policy reads), and uninstalled with the
// uninstall steps of docs/operations.md. The tests run in order on one cluster; the
// uninstall comes last.
package realcluster

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/loutres/juneau/test/cluster"
	"github.com/loutres/juneau/test/doctest"
	"github.com/loutres/juneau/test/framework"
	"github.com/loutres/juneau/test/require"
)

var shared struct {
	once sync.Once
	c    *cluster.Cluster
	err  error
	// before is every Node's state before juneau was installed.
	before map[string]nodeState
	// home is the user's directory of the pages' steps; docs runs them, pages in order.
	home  string
	docs  *doctest.Runner
	pages []string
	// logs follows the logs of juneau's containers from installed on.
	logs      *componentLogs
	installed time.Time
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.logs != nil {
		shared.logs.close()
	}
	if shared.home != "" {
		os.RemoveAll(shared.home)
	}
	if shared.c != nil {
		if err := shared.c.Stop(); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			code = 1
		}
	}
	framework.RemoveBuiltBinary()
	os.Exit(code)
}

// TestRealCluster installs juneau and runs every scenario, then uninstalls it.
func TestRealCluster(t *testing.T) {
	c := start(t)
	t.Run("install", func(t *testing.T) { testInstall(t, c) })
	if t.Failed() {
		t.FailNow()
	}
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, *cluster.Cluster)
	}{
		{"docs", testDocs},
		{"nat-and-direct", testNATAndDirect},
		{"deployment-with-eip", testDeployment},
		{"one-elasticip-one-pod", testOneElasticIPOnePod},
		{"pool-deleted-under-traffic", testPoolDeletedUnderTraffic},
		{"statefulset-keeps-its-address", testStatefulSet},
		{"readiness-gate", testReadinessGate},
		{"node-scoped-authority", testNodeScope},
		{"networkinterface-garbage-collected", testGarbageCollection},
		{"webhook-through-its-service", testWebhook},
		{"node-rollout-under-traffic", testRollout},
		{"nft-lists-the-rules", testNftListable},
		// Last before the uninstall: the whole healthy run.
		{"no-error-lines", testNoErrorLines},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, c) })
	}
	t.Run("uninstall", func(t *testing.T) { testUninstall(t, c) })
	if t.Failed() {
		t.FailNow()
	}
	t.Run("helm", func(t *testing.T) { testHelm(t, c) })
}

// start starts the cluster once and records the Nodes' state before the install.
func start(t *testing.T) *cluster.Cluster {
	t.Helper()
	require.Root(t)
	if err := cluster.Check(); err != nil {
		require.Unmet(t, "%v", err)
	}
	shared.once.Do(func() {
		root, err := framework.RepoRoot()
		if err != nil {
			shared.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		shared.c, shared.err = cluster.Start(ctx, cluster.Options{Kind: "test", RepoRoot: root,
			JuneauBinary: framework.JuneauBinary(t), BoxBinary: framework.BoxBinary(t),
			Logs:     os.Getenv("JUNEAU_REALCLUSTER_LOGS"),
			Progress: func(format string, args ...any) { t.Logf(format, args...) }})
		if shared.err == nil {
			shared.err = warmUp(ctx, shared.c)
		}
		if shared.err == nil {
			shared.before, shared.err = settledNodeStates(ctx, shared.c)
		}
		if shared.err == nil {
			shared.home, shared.err = os.MkdirTemp("", "juneau-doc-home-")
		}
		if shared.err == nil {
			shared.err = doctest.NewHome(root, shared.home)
		}
	})
	if shared.err != nil {
		t.Fatalf("starting the cluster: %v", shared.err)
	}
	if shared.docs == nil {
		root, err := framework.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		shared.docs, shared.pages = docRunner(t, shared.c, root, shared.home)
	}
	return shared.c
}
