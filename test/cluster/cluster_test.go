package cluster_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/loutres/juneau/test/cluster"
	"github.com/loutres/juneau/test/framework"
	"github.com/loutres/juneau/test/require"
)

func TestMain(m *testing.M) {
	code := m.Run()
	framework.RemoveBuiltBinary()
	os.Exit(code)
}

func start(t *testing.T) *cluster.Cluster {
	t.Helper()
	require.Root(t)
	if err := cluster.Check(); err != nil {
		require.Unmet(t, "%v", err)
	}
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Kind: "test", RepoRoot: root,
		JuneauBinary: framework.JuneauBinary(t), BoxBinary: framework.BoxBinary(t),
		Progress: func(format string, args ...any) { t.Logf(format, args...) }})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestStartAndTeardown(t *testing.T) {
	root, _ := framework.RepoRoot()
	if _, problems := cluster.SweepAbandoned(root); len(problems) > 0 {
		t.Fatal(problems)
	}
	before := hostState(t)
	c := start(t)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			if err := c.Stop(); err != nil {
				t.Error(err)
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := c.KubectlRun(ctx, "", "get", "nodes", "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out)
	for _, n := range c.Nodes {
		pod := `apiVersion: v1
kind: Pod
metadata: {name: sh-` + n.Name + `}
spec:
  nodeName: ` + n.Name + `
  containers: [{name: sh, image: busybox, command: [sh, -c, "ip -4 addr show eth0; sleep 3600"]}]
`
		if _, err := c.KubectlRun(ctx, pod, "apply", "-f", "-"); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range c.Nodes {
		if _, err := c.KubectlRun(ctx, "", "wait", "--for=condition=Ready", "pod/sh-"+n.Name, "--timeout=2m"); err != nil {
			d, _ := c.KubectlRun(ctx, "", "describe", "pod", "sh-"+n.Name)
			t.Fatalf("%v\n%s", err, d)
		}
		logs, err := c.KubectlRun(ctx, "", "logs", "sh-"+n.Name)
		t.Logf("sh-%s: %s", n.Name, logs)
		if err != nil || !strings.Contains(logs, strings.TrimSuffix(n.PodCIDR, "0/24")) {
			t.Errorf("Pod on %s: logs %q (%v), want an address in %s", n.Name, logs, err, n.PodCIDR)
		}
	}
	stopped = true
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if after := hostState(t); after != before {
		t.Errorf("the host changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// hostState is what a cluster must leave as it found it on the host: the root
// namespace's links, addresses and routes, the top-level cgroups, the mounts, the
// kernel settings the kubelet cares about.
func hostState(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, argv := range [][]string{{"ip", "-br", "link"}, {"ip", "-br", "addr"}, {"ip", "route"},
		{"sh", "-c", "ls /sys/fs/cgroup/*/ | grep -v ^/ | sort -u | grep juneau || true"},
		{"sh", "-c", "grep -c . /proc/self/mounts"},
		{"sysctl", "vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops"}} {
		out, err := runHost(argv...)
		if err != nil {
			t.Fatalf("%v: %v", argv, err)
		}
		b.WriteString(out)
	}
	return b.String()
}

func runHost(argv ...string) (string, error) {
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	return string(out), err
}
