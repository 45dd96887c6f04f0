// Package realcluster runs juneau on a real two-Node Kubernetes cluster (test/cluster):
// installed with the install steps of the documentation (kubectl apply -k of an overlay),
// then every guide step of the pages (test/doctest), then exercised through what only a
// real cluster does (the scheduler placing Pods, the kubelet evaluating readiness gates,
// the StatefulSet controller re-creating Pods, the garbage collector, DaemonSet rollouts,
// Services, the Pod-bound tokens the node-scope policy reads), and uninstalled with the
// uninstall steps of docs/operations.md. The tests run in order on one cluster; the
// uninstall comes last.
//
// The cluster is dual-stack. Its primary CNI is $JUNEAU_REALCLUSTER_CNI: ptp (the
// default) runs every scenario; flannel runs those marked for it (what changes with a
// bridged, VXLAN primary CNI: the install, the NAT guide, both families by NAT and
// directly on an extra interface, the Neighbor Discovery answer following a Pod,
// automatic dual-stack Pods, and the uninstall; not the Helm chart, Prometheus and
// kubectl-juneau scenario, which does not change with the primary CNI).
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
	// hosts are the hosts a scenario added for the pages' in= steps, by name.
	hosts map[string]docHost
}

// docHost is a host of the pages' in= steps: a network namespace, and a directory of
// commands put first on PATH there (birdc for the router's control socket).
type docHost struct{ ns, bin string }

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

// tierCNI is the primary CNI of the tier's cluster.
func tierCNI() string {
	if cni := os.Getenv("JUNEAU_REALCLUSTER_CNI"); cni != "" {
		return cni
	}
	return cluster.CNIPtp
}

// TestRealCluster installs juneau and runs every scenario the cluster's primary CNI
// runs, then uninstalls it.
func TestRealCluster(t *testing.T) {
	c := start(t)
	t.Logf("primary CNI: %s", c.CNI())
	t.Run("install", func(t *testing.T) { testInstall(t, c) })
	if t.Failed() {
		t.FailNow()
	}
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, *cluster.Cluster)
		// flannel: the scenario runs on flannel too.
		flannel bool
	}{
		{"docs", testDocs, true},
		{"bgp-guide", testBGPGuide, false},
		{"nat-and-direct", testNATAndDirect, false},
		{"dual-stack", testDualStack, true},
		{"neighbor-discovery-follows-the-pod", testNDPFollowsPod, true},
		{"automatic-dual-stack", testAutomaticDualStack, true},
		{"deployment-with-eip", testDeployment, false},
		{"one-elasticip-one-pod", testOneElasticIPOnePod, false},
		{"pool-deleted-under-traffic", testPoolDeletedUnderTraffic, false},
		{"statefulset-keeps-its-address", testStatefulSet, false},
		{"readiness-gate", testReadinessGate, false},
		{"node-scoped-authority", testNodeScope, false},
		{"webhook-under-load", testWebhookUnderLoad, false},
		{"stolen-tokens-and-quota", testStolenTokens, false},
		{"tenancy", testTenancy, false},
		{"networkinterface-garbage-collected", testGarbageCollection, false},
		{"webhook-through-its-service", testWebhook, false},
		{"node-rollout-under-traffic", testRollout, false},
		{"nft-lists-the-rules", testNftListable, true},
		{"time-to-reachable", testTimeToReachable, false},
		// The whole healthy run: the Node failure below makes juneau log what it must.
		{"no-error-lines", testNoErrorLines, true},
		{"node-failure", testNodeFailure, false},
	} {
		if c.CNI() == cluster.CNIFlannel && !tc.flannel {
			continue
		}
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, c) })
	}
	t.Run("uninstall", func(t *testing.T) { testUninstall(t, c) })
	if t.Failed() {
		t.FailNow()
	}
	// The chart, Prometheus and kubectl-juneau do not change with the primary CNI.
	if c.CNI() != cluster.CNIFlannel {
		t.Run("helm", func(t *testing.T) { testHelm(t, c) })
	}
}

// start starts the cluster once and records the Nodes' state before the install.
func start(t *testing.T) *cluster.Cluster {
	t.Helper()
	require.Root(t)
	if err := cluster.Check(tierCNI()); err != nil {
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
		shared.c, shared.err = cluster.Start(ctx, cluster.Options{Kind: "test", RepoRoot: root, CNI: tierCNI(), Spares: []string{spareNode},
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
