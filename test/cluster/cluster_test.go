package cluster_test

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
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

func start(t *testing.T, cni string) *cluster.Cluster {
	t.Helper()
	require.Root(t)
	if err := cluster.Check(cni); err != nil {
		require.Unmet(t, "%v", err)
	}
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Kind: "test", RepoRoot: root, CNI: cni,
		JuneauBinary: framework.JuneauBinary(t), BoxBinary: framework.BoxBinary(t),
		Progress: func(format string, args ...any) { t.Logf(format, args...) }})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestStartAndTeardown, with each primary CNI: both Nodes Ready, a Pod on each gets an
// address of each family in its Node's Pod CIDRs, no namespace of the run has a default
// route in either family, and the teardown leaves the host as it was and nothing of
// the run.
func TestStartAndTeardown(t *testing.T) {
	for _, cni := range cluster.CNIs {
		t.Run(cni, func(t *testing.T) { testStartAndTeardown(t, cni) })
	}
}

func testStartAndTeardown(t *testing.T, cni string) {
	root, _ := framework.RepoRoot()
	if _, problems := cluster.SweepAbandoned(root); len(problems) > 0 {
		t.Fatal(problems)
	}
	before := hostState(t)
	c := start(t, cni)
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
  containers: [{name: sh, image: busybox, command: [sh, -c, "ip addr show eth0; sleep 3600"]}]
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
		for _, cidr := range []string{n.PodCIDR, n.PodCIDR6} {
			if !addressIn(logs, cidr) {
				t.Errorf("Pod on %s: logs %q (%v), want an address in %s", n.Name, logs, err, cidr)
			}
		}
	}
	namespaces := map[string]string{"segment": c.SegmentNS, "control-plane": c.CPNS, "client": c.ClientNS}
	for _, n := range c.Nodes {
		namespaces[n.Name] = n.NS
	}
	for name, ns := range namespaces {
		for _, family := range []string{"-4", "-6"} {
			out, err := runHost("nsenter", "--net="+ns, "ip", family, "route", "show", "default")
			if err != nil || strings.TrimSpace(out) != "" {
				t.Errorf("namespace %s: ip %s route show default: %q (%v), want none", name, family, out, err)
			}
		}
	}
	stopped = true
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if after := hostState(t); after != before {
		t.Errorf("the host changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	for _, l := range leftovers(t, c.Dir) {
		t.Errorf("the run left %s", l)
	}
}

// addressIn reports whether the output of `ip addr` holds an address in cidr.
func addressIn(ipAddr, cidr string) bool {
	p := netip.MustParsePrefix(cidr)
	for _, f := range strings.Fields(ipAddr) {
		if a, err := netip.ParsePrefix(f); err == nil && p.Contains(a.Addr()) {
			return true
		}
	}
	return false
}

// leftovers lists what of the run in dir remains: its directory, cgroups, mounts and
// processes naming it.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/juneau-" + strings.TrimPrefix(filepath.Base(dir), "juneau-cluster-") + "-*")
	out = append(out, cgroups...)
	if _, err := os.Stat(dir); err == nil {
		out = append(out, dir)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		if strings.Contains(line, dir) {
			out = append(out, "mount "+line)
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmd, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(cmd), dir) && p != fmt.Sprintf("/proc/%d/cmdline", os.Getpid()) {
			out = append(out, "process "+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return out
}

// hostState is what a cluster must leave as it found it on the host, unchanged by other
// runs on the machine: the root namespace's links, addresses and routes, and the kernel
// settings the kubelet wants.
func hostState(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, argv := range [][]string{{"ip", "-br", "link"}, {"ip", "-br", "addr"}, {"ip", "route"}, {"ip", "-6", "route"},
		{"sysctl", "vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops", "kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes"}} {
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

// TestTeardownAfterKill: a cluster whose process was killed (SIGKILL, nothing ran on
// exit) is removed completely from its run directory alone, as make sandbox-down and
// the next run do.
func TestTeardownAfterKill(t *testing.T) {
	if os.Getenv("JUNEAU_CLUSTER_HELPER") != "" {
		c := start(t, cluster.CNIPtp)
		fmt.Println("run:", c.Dir)
		select {} // until killed
	}
	require.Root(t)
	if err := cluster.Check(cluster.CNIPtp); err != nil {
		require.Unmet(t, "%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	helper := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestTeardownAfterKill$", "-test.v")
	helper.Env = append(os.Environ(), "JUNEAU_CLUSTER_HELPER=1", "JUNEAU_BINARY="+framework.JuneauBinary(t), "JUNEAU_BOX_BINARY="+framework.BoxBinary(t))
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	var dir string
	lines := bufio.NewScanner(out)
	for dir == "" && lines.Scan() {
		if d, ok := strings.CutPrefix(lines.Text(), "run: "); ok {
			dir = d
		}
	}
	if dir == "" {
		_ = helper.Process.Kill()
		t.Fatalf("the helper did not start a cluster: %v", helper.Wait())
	}
	_ = helper.Process.Kill()
	_ = helper.Wait()
	if err := cluster.Teardown(dir); err != nil {
		t.Fatal(err)
	}
	for _, l := range leftovers(t, dir) {
		t.Errorf("the killed run left %s", l)
	}
}
