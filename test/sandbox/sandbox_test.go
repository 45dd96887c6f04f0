package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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

// TestSandboxUserPod follows make sandbox as a user: `sandbox up` in the background,
// `sandbox wait` prints the usage; a second sandbox is refused; the Pod of the usage,
// applied with kubectl, becomes Ready and answers at its ElasticIP from the client
// namespace (with the command the usage prints); a demo runs meanwhile without
// disturbing the sandbox; `sandbox down` leaves nothing.
func TestSandboxUserPod(t *testing.T) {
	require.Root(t)
	if err := cluster.Check(cluster.CNIPtp); err != nil {
		require.Unmet(t, "%v", err)
	}
	// Runs of its own, apart from a sandbox the developer may have up.
	runs, err := os.MkdirTemp("/tmp", "jsb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(runs) })
	bin := filepath.Join(t.TempDir(), "sandbox")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("building the sandbox: %v\n%s", err, out)
	}
	env := append(os.Environ(), "JUNEAU_CLUSTER_ROOT="+runs,
		"JUNEAU_BINARY="+framework.JuneauBinary(t), "JUNEAU_BOX_BINARY="+framework.BoxBinary(t))
	run := func(ctx context.Context, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	log := filepath.Join(t.TempDir(), "sandbox.log")
	logFile, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	up := exec.Command(bin, "up")
	up.Env, up.Stdout, up.Stderr = env, logFile, logFile
	up.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- up.Wait() }()
	t.Cleanup(func() {
		if out, err := run(context.Background(), "down"); err != nil {
			t.Errorf("sandbox down: %v\n%s", err, out)
		}
	})
	usage, err := run(ctx, "wait", "-pid", strconv.Itoa(up.Process.Pid), "-log", log)
	if err != nil {
		t.Fatalf("sandbox wait: %v\n%s", err, usage)
	}
	kubeconfig := valueAfter(t, usage, "export KUBECONFIG=")
	// The usage says where the logs are: the cluster's components', and the sandbox's own.
	logs := valueAfter(t, usage, "Logs of every cluster component (etcd, kube-apiserver, kubelets, containerd, ...): ")
	if _, err := os.Stat(filepath.Join(logs, "kube-apiserver.log")); err != nil {
		t.Errorf("the usage points at %s for the logs: %v", logs, err)
	}
	if own := valueAfter(t, usage, "The sandbox's own output: "); own != log {
		t.Errorf("the usage gives %s as the sandbox's output, not %s", own, log)
	}
	client := valueAfter(t, usage, "nsenter --net=")
	client, _, _ = strings.Cut(client, " ")

	if out, err := run(ctx, "up"); err == nil || !strings.Contains(out, "already running") {
		t.Errorf("a second sandbox: %v %s, want a refusal saying one is already running", err, out)
	}

	bins, err := framework.FindBinaries()
	if err != nil {
		t.Fatal(err)
	}
	kubectl := func(stdin string, args ...string) string {
		t.Helper()
		r := framework.RunKubectl(ctx, bins.Kubectl(), kubeconfig, stdin, args...)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		return r.Stdout
	}
	if agent := kubectl("", "-n", cluster.NodeNamespace, "logs", "daemonset/juneau-node", "-c", "agent"); !strings.Contains(agent, "Starting node agent") {
		t.Errorf("kubectl logs of a node agent, as the usage says:\n%s", agent)
	}
	kubectl(examplePod, "apply", "-f", "-")
	kubectl("", "wait", "--for=condition=Ready", "pod/my-pod", "--timeout=3m")
	addr := kubectl("", "get", "pod", "my-pod", "-o", `jsonpath={.metadata.annotations.juneau\.loutres\.me/allocated-eip-address}`)
	// The examples' IPv6 ElasticIP by NAT, in the usage's IPv6 form.
	addr6 := kubectl("", "get", "elasticip", "nginx-eip6", "-o", "jsonpath={.status.address}")
	reach := func(when string) {
		t.Helper()
		for _, r := range []struct{ url, want string }{
			{"http://" + addr + "/", "hello from my-pod: you are " + cluster.ClientIP},
			{"http://[" + addr6 + "]/", "hello from nginx: you are " + cluster.ClientIP6},
		} {
			wget := exec.CommandContext(ctx, "nsenter", "--net="+client, "busybox", "wget", "-qO-", r.url)
			out, err := wget.CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != r.want {
				t.Fatalf("%s, %s from the client namespace as the usage says: %q (%v), want %q", when, r.url, out, err, r.want)
			}
		}
	}
	reach("once Ready")

	// A demo runs beside the sandbox, in a run of its own, and leaves it alone.
	if out, err := run(ctx, "demo"); err != nil {
		t.Fatalf("a demo while the sandbox is up: %v\n%s", err, out)
	}
	kubectl("", "get", "pod", "my-pod")
	reach("after a demo ran beside the sandbox")

	out2, err := run(ctx, "down")
	if err != nil || !strings.Contains(out2, "stopped; nothing of it is left") {
		t.Fatalf("sandbox down: %v\n%s", err, out2)
	}
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatal("sandbox up did not exit after sandbox down")
	}
	if left, _ := filepath.Glob(filepath.Join(runs, "*")); len(left) > 0 {
		t.Errorf("left in the run root: %v", left)
	}
}

// valueAfter returns the rest of the first line of text holding prefix.
func valueAfter(t *testing.T, text, prefix string) string {
	t.Helper()
	s := bufio.NewScanner(strings.NewReader(text))
	for s.Scan() {
		if _, v, ok := strings.Cut(s.Text(), prefix); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no %q in:\n%s", prefix, text)
	return ""
}
