package realcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

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

// docRunner runs the steps of the pages on the cluster, as a user runs them: in a shell
// with the built kubectl on PATH and the admin's kubeconfig, in a home directory that
// holds the clone (as juneau/) and the files the pages write; steps marked in=client on
// the external client, in=<Node> on that Node.
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
		if !slices.Contains(pages, p) {
			pages = append(pages, p)
		}
	}
	path := filepath.Dir(c.Kubectl) + string(os.PathListSeparator) + os.Getenv("PATH")
	r := &doctest.Runner{Root: root, Home: home, Exec: func(ctx context.Context, in, dir, script string) (string, error) {
		var cmd *exec.Cmd
		switch in {
		case "":
			cmd = exec.CommandContext(ctx, "sh", "-e", "-c", script)
		case "client":
			cmd = exec.CommandContext(ctx, "nsenter", "--net="+c.ClientNS, "sh", "-e", "-c", script)
		default:
			n := c.Node(in)
			if n == nil {
				return "", fmt.Errorf("no Node %q", in)
			}
			return n.Output(ctx, "sh", "-e", "-c", script)
		}
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "PATH="+path)
		cmd.WaitDelay = 5 * time.Second
		out, err := cmd.CombinedOutput()
		return string(out), err
	}}
	return r, pages
}

// testDocs: every guide step of the pages, on the installed cluster.
func testDocs(t *testing.T, c *cluster.Cluster) {
	start := time.Now()
	shared.docs.RunStage(t, doctest.StageGuide, shared.pages)
	t.Logf("the pages' guide steps took %s", time.Since(start).Round(time.Second))
}
