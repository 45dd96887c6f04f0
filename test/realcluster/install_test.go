package realcluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/test/cluster"
	"github.com/loutres/juneau/test/doctest"
	"github.com/loutres/juneau/test/framework"
)

// testInstall: the install steps of the pages (an overlay naming the image, kubectl
// apply -k, the rollouts) install everything: the controller's two replicas with one
// leader, the webhook answering through its Service, the node DaemonSet on every Node
// with the CNI plugin installed and chained, and juneau's nftables table beside
// kube-proxy's. Then the network every scenario uses.
func testInstall(t *testing.T, c *cluster.Cluster) {
	ctx := testContext(t, 10*time.Minute)
	start := time.Now()
	shared.installed, shared.logs = start, followComponentLogs(c)
	shared.docs.RunStage(t, doctest.StageInstall, shared.pages)
	if t.Failed() {
		t.FailNow()
	}
	if err := c.WaitWebhook(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("installed in %s", time.Since(start).Round(100*time.Millisecond))

	deploy, err := c.Kube.AppsV1().Deployments(cluster.SystemNamespace).Get(ctx, "juneau-controller", metav1.GetOptions{})
	if err != nil || deploy.Status.ReadyReplicas != 2 {
		t.Errorf("controller Deployment: %d ready replicas (%v), want 2", deploy.Status.ReadyReplicas, err)
	}
	var holder string
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		lease, err := c.Kube.CoordinationV1().Leases(cluster.SystemNamespace).Get(ctx, "juneau-controller", metav1.GetOptions{})
		if err == nil && lease.Spec.HolderIdentity != nil {
			holder = *lease.Spec.HolderIdentity
		}
		return holder != "", nil
	}); err != nil {
		t.Errorf("no controller replica holds the Lease: %v", err)
	}
	t.Logf("the Lease is held by %s", holder)

	slices, err := c.Kube.DiscoveryV1().EndpointSlices(cluster.SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=juneau-webhook"})
	ready := 0
	if err == nil {
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					ready++
				}
			}
		}
	}
	if ready != 2 {
		t.Errorf("the webhook Service has %d ready endpoints (%v), want 2", ready, err)
	}

	for _, n := range c.Nodes {
		conf, err := os.ReadFile(n.ConfFile())
		if err != nil || !strings.Contains(string(conf), `{"type": "juneau"}`) {
			t.Errorf("%s: juneau is not chained into the primary configuration (%v):\n%s", n.Name, err, conf)
		}
		if _, err := os.Stat(filepath.Join(n.Dir, "cni", "bin", "juneau")); err != nil {
			t.Errorf("%s: /opt/cni/bin/juneau not installed: %v", n.Name, err)
		}
		// Both families: juneau's tables beside the dual-stack kube-proxy's.
		tables, err := n.Output(ctx, "nft", "list", "tables")
		for _, want := range []string{"table ip juneau", "table ip6 juneau", "table ip kube-proxy", "table ip6 kube-proxy"} {
			if err != nil || !strings.Contains(tables, want) {
				t.Errorf("%s: nftables tables %q (%v), want %s", n.Name, tables, err, want)
			}
		}
		// IPv6 forwarding on and router advertisements refused on the external
		// interface, as the cluster set them and juneau's set-sysctls leaves them on a
		// Node with a global IPv6 address there (it raises accept_ra only from 1:
		// docs/datapath.md#ipv6): no Node learns a default route.
		for key, want := range map[string]string{"all/forwarding": "1", "eth0/proxy_ndp": "0", "eth0/accept_ra": "0"} {
			if got, err := n.Output(ctx, "cat", "/proc/sys/net/ipv6/conf/"+key); err != nil || strings.TrimSpace(got) != want {
				t.Errorf("%s: %s = %q (%v), want %s", n.Name, key, got, err, want)
			}
		}
	}

	// The network of the scenarios: manifests/examples' pools (one per family) and
	// default network.
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"00-addresspool.yaml", "01-externalnetwork.yaml"} {
		kubectl(t, c, "", "apply", "-f", filepath.Join(root, "manifests", "examples", f))
	}
}
