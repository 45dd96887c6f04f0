package realcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/test/cluster"
	"github.com/loutres/juneau/test/doctest"
)

// pageOrder is the order the pages' guide steps run in: each builds on the state the
// ones before left (guide-nat.md makes the network and the examples' ElasticIPs that
// docs/README.md, README.md and resources.md show; guide-direct.md hands web-eip on and
// deletes it; operations.md reads the logs the others caused). Pages not listed run
// after these, in name order.
var pageOrder = []string{
	"docs/guide-nat.md", "docs/README.md", "README.md", "docs/resources.md", "docs/guide-direct.md",
	"docs/automatic.md", "docs/arp.md", "docs/troubleshooting.md", "docs/operations.md", "docs/bgp.md",
	"manifests/README.md",
}

// ownScenario are the pages whose guide steps need hosts only their own scenario adds
// (docs/guide-bgp.md: a BGP router and a client behind it, testBGPGuide).
var ownScenario = []string{"docs/guide-bgp.md"}

// docRunner runs the steps of the pages on the cluster, as a user runs them: in a shell
// with the built kubectl on PATH and the admin's kubeconfig, in a home directory that
// holds the clone (as juneau/) and the files the pages write; steps marked in=client on
// the external client, in=<Node> on that Node, in=<host> on a host a scenario added
// (shared.hosts: the router and the far client of docs/guide-bgp.md).
func docRunner(t *testing.T, c *cluster.Cluster, root, home string) (*doctest.Runner, []string) {
	t.Helper()
	all, err := doctest.Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	pages := slices.Clone(pageOrder)
	for _, p := range pageOrder {
		if !slices.Contains(all, p) {
			t.Fatalf("pageOrder names %s, which is not a page", p)
		}
	}
	for _, p := range all {
		if !slices.Contains(pages, p) && !slices.Contains(ownScenario, p) {
			pages = append(pages, p)
		}
	}
	path := filepath.Dir(c.Kubectl) + string(os.PathListSeparator) + os.Getenv("PATH")
	r := &doctest.Runner{Root: root, Home: home, Exec: func(ctx context.Context, in, dir, script string) (string, error) {
		var cmd *exec.Cmd
		cmdPath := path
		switch h, host := shared.hosts[in]; {
		case in == "":
			cmd = exec.CommandContext(ctx, "sh", "-e", "-c", script)
		case in == "client":
			cmd = exec.CommandContext(ctx, "nsenter", "--net="+c.ClientNS, "sh", "-e", "-c", script)
		case host:
			cmd = exec.CommandContext(ctx, "nsenter", "--net="+h.ns, "sh", "-e", "-c", script)
			cmdPath = h.bin + string(os.PathListSeparator) + path
		default:
			n := c.Node(in)
			if n == nil {
				return "", fmt.Errorf("no Node %q", in)
			}
			return n.Output(ctx, "sh", "-e", "-c", script)
		}
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "PATH="+cmdPath)
		cmd.WaitDelay = 5 * time.Second
		out, err := cmd.CombinedOutput()
		return string(out), err
	}}
	return r, pages
}

// flannelPages are the pages whose guide steps run with flannel: the NAT guide, both
// families. The other pages build on Pods carrying ElasticIPs on eth0, which a bridged
// primary CNI cannot give them (docs/guide-direct.md#flannel).
var flannelPages = []string{"docs/guide-nat.md"}

// testDocs: every guide step of the pages, on the installed cluster; with flannel, those
// of flannelPages, and the Pod web those steps create (an ElasticIP on eth0) refused by
// the CNI plugin with the message the page quotes.
func testDocs(t *testing.T, c *cluster.Cluster) {
	start := time.Now()
	pages := shared.pages
	if c.CNI() == cluster.CNIFlannel {
		pages = flannelPages
	}
	shared.docs.RunStage(t, doctest.StageGuide, pages)
	t.Logf("the pages' guide steps took %s", time.Since(start).Round(time.Second))
	if c.CNI() == cluster.CNIFlannel && !t.Failed() {
		refusedOnBridge(t, c, "default", "web")
	}
}

// refusedOnBridge checks that the Pod, which asks for an ElasticIP on eth0, gets the CNI
// plugin's refusal of a bridged eth0 in its Events (docs/guide-direct.md#flannel), and
// deletes it.
func refusedOnBridge(t *testing.T, c *cluster.Cluster, ns, pod string) {
	t.Helper()
	const want = "(bridged primary CNI): a direct ElasticIP on eth0 needs a routed-veth primary CNI"
	var events string
	err := wait.PollUntilContextTimeout(testContext(t, 2*time.Minute), time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		events, _ = c.KubectlRun(ctx, "", "-n", ns, "get", "events", "--field-selector", "involvedObject.name="+pod+",reason=FailedCreatePodSandBox",
			"-o", "jsonpath={.items[*].message}")
		return strings.Contains(events, want), nil
	})
	if err != nil {
		t.Errorf("Pod %s/%s (an ElasticIP on eth0, with flannel): Events %q, want the CNI plugin's refusal saying %q", ns, pod, events, want)
	}
	kubectl(t, c, "", "-n", ns, "delete", "pod", pod, "--wait=true")
}
