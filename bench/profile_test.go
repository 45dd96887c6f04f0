package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/loutres/juneau/test/framework"
)

// TestProfiledJuneau builds juneau with the profiling hook through the overlay, starts a
// controller that can never reach its API server (so it stays up doing nothing), and
// takes a CPU profile of it through the hook's endpoint.
func TestProfiledJuneau(t *testing.T) {
	if testing.Short() {
		t.Skip("builds juneau")
	}
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(pprofDirEnv, "") // restored after the test; the build sets it
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, prof, err := buildProfiledJuneau(ctx, root, out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prof.cleanup)

	// Port 1 on loopback: connections are refused at once, nothing leaves the machine.
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "controller", "--kubeconfig="+kubeconfig, "--leader-elect=false", "--metrics-bind-address=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	p, err := prof.start(cmd.Process.Pid, "controller")
	if err != nil {
		t.Fatal(err)
	}
	file, err := p.stop()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		t.Errorf("%s is not a gzipped pprof profile (%d bytes)", file, len(data))
	}
	if _, err := p.stop(); err == nil {
		t.Error("stopping twice succeeded")
	}
	heap, err := prof.heap(cmd.Process.Pid, "controller-heap")
	if err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(heap); err != nil || !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		t.Errorf("heap profile %s: %d bytes, %v; want a gzipped pprof profile", heap, len(data), err)
	}
	if text, err := os.ReadFile(heap + ".txt"); err != nil || !bytes.Contains(text, []byte("# runtime.MemStats")) {
		t.Errorf("heap profile as text %s: %v; want it to end with the runtime's memory statistics", heap+".txt", err)
	}

	// A process started with pprofCPUEnv profiles from its start until stopped.
	fromStart := filepath.Join(out, "from-start.pprof")
	second := exec.Command(bin, "controller", "--kubeconfig="+kubeconfig, "--leader-elect=false", "--metrics-bind-address=")
	second.Env = append(os.Environ(), pprofCPUEnv+"="+fromStart)
	second.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Process.Kill(); _ = second.Wait() })
	running, err := prof.endpoint(second.Process.Pid, "from-start")
	if err != nil {
		t.Fatal(err)
	}
	if file, err := running.stop(); err != nil || file != fromStart {
		t.Fatalf("stopping the profile running since the start: %q, %v", file, err)
	}
	if data, err := os.ReadFile(fromStart); err != nil || !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		t.Errorf("profile from the start %s: %d bytes, %v; want a gzipped pprof profile", fromStart, len(data), err)
	}
}

// TestNoProfiler: without -cpuprofile every profiling call does nothing.
func TestNoProfiler(t *testing.T) {
	var p *profiler
	prof, err := p.start(os.Getpid(), "x")
	if prof != nil || err != nil {
		t.Fatalf("start = %v, %v", prof, err)
	}
	if file, err := prof.stop(); file != "" || err != nil {
		t.Errorf("stop = %q, %v", file, err)
	}
	p.cleanup()
}
