package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// pprofDirEnv and pprofCPUEnv must match benchPprofDirEnv and benchPprofCPUEnv in
// pprofhook/hook.go.
const (
	pprofDirEnv = "JUNEAU_BENCH_PPROF_DIR"
	pprofCPUEnv = "JUNEAU_BENCH_PPROF_CPU"
)

// profiler takes CPU profiles of juneau processes built with the hook in pprofhook/.
// The zero value (no -cpuprofile) does nothing.
type profiler struct {
	outDir  string // where profiles go
	addrDir string // where hooked processes write their endpoint addresses
	tmp     string // holds the profiling binary and addrDir; removed by cleanup
}

// cleanup removes the profiling binary and the endpoint files.
func (p *profiler) cleanup() {
	if p != nil && p.tmp != "" {
		_ = os.RemoveAll(p.tmp)
	}
}

// buildProfiledJuneau builds juneau with the profiling hook compiled in through a build
// overlay, so the repository's cmd/juneau stays untouched, and makes every juneau the
// benchmarks start from now on announce its endpoint in a temp directory.
func buildProfiledJuneau(ctx context.Context, root, outDir string) (binary string, p *profiler, err error) {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", nil, err
	}
	tmp, err := os.MkdirTemp("", "juneau-bench-pprof-")
	if err != nil {
		return "", nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {
		filepath.Join(root, "cmd", "juneau", "zz_bench_pprof.go"): filepath.Join(root, "bench", "pprofhook", "hook.go"),
	}})
	if err != nil {
		return "", nil, err
	}
	overlayFile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
		return "", nil, err
	}
	binary = filepath.Join(tmp, "juneau")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "juneau_bench_pprof", "-overlay", overlayFile, "-o", binary, "./cmd/juneau")
	cmd.Dir = root
	if out, berr := cmd.CombinedOutput(); berr != nil {
		return "", nil, fmt.Errorf("building the profiling juneau: %w\n%s", berr, out)
	}
	addrDir := filepath.Join(tmp, "endpoints")
	if err := os.MkdirAll(addrDir, 0o755); err != nil {
		return "", nil, err
	}
	if err := os.Setenv(pprofDirEnv, addrDir); err != nil {
		return "", nil, err
	}
	return binary, &profiler{outDir: outDir, addrDir: addrDir, tmp: tmp}, nil
}

// cpuProfile is a running CPU profile of one process.
type cpuProfile struct {
	addr, file string
}

// start begins a CPU profile of pid, written to <outDir>/<name>.pprof when stopped.
// Without profiling it returns nil, and stopping nil does nothing.
func (p *profiler) start(pid int, name string) (*cpuProfile, error) {
	if p == nil || p.outDir == "" {
		return nil, nil
	}
	prof, err := p.endpoint(pid, name)
	if err != nil {
		return nil, err
	}
	return prof, prof.post("/cpu/start?file=" + url.QueryEscape(prof.file))
}

// heap writes a heap profile of the process to DIR/name.pprof.
func (p *profiler) heap(pid int, name string) (string, error) {
	if p == nil || p.outDir == "" {
		return "", nil
	}
	prof, err := p.endpoint(pid, name)
	if err != nil {
		return "", err
	}
	return prof.file, prof.post("/heap?file=" + url.QueryEscape(prof.file))
}

// endpoint finds the profiling endpoint of pid and names the profile's file.
func (p *profiler) endpoint(pid int, name string) (*cpuProfile, error) {
	var addr string
	// The process writes its address right after it starts.
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) {
			b, err := os.ReadFile(filepath.Join(p.addrDir, strconv.Itoa(pid)))
			addr = strings.TrimSpace(string(b))
			return err == nil && addr != "", nil
		})
	if err != nil {
		return nil, fmt.Errorf("profiling endpoint of pid %d: %w", pid, err)
	}
	file, err := p.fileOf(name)
	if err != nil {
		return nil, err
	}
	return &cpuProfile{addr: addr, file: file}, nil
}

// fileOf is the file of the profile named name.
func (p *profiler) fileOf(name string) (string, error) {
	return filepath.Abs(filepath.Join(p.outDir, name+".pprof"))
}

// stop ends the profile and returns the file it was written to.
func (c *cpuProfile) stop() (string, error) {
	if c == nil {
		return "", nil
	}
	return c.file, c.post("/cpu/stop")
}

func (c *cpuProfile) post(path string) error {
	client := http.Client{Timeout: 30 * time.Second}
	resp, err := client.Post("http://"+c.addr+path, "text/plain", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s", path, resp.Status)
	}
	return nil
}

// profiledFromStart runs start, which starts one juneau process, with that process's CPU
// profiled from its start (named name, stopped with stopProfile on what it returns)
// when profiling is on. The variable that asks for it is set in this process's
// environment while start runs, so start must start no other juneau process.
func (e *env) profiledFromStart(name string, start func() int) *cpuProfile {
	p := e.prof
	if p == nil || p.outDir == "" {
		start()
		return nil
	}
	file, err := p.fileOf(name)
	if err != nil {
		e.Logf("no CPU profile %s: %v", name, err)
		start()
		return nil
	}
	_ = os.Setenv(pprofCPUEnv, file)
	pid := start()
	_ = os.Unsetenv(pprofCPUEnv)
	prof, err := p.endpoint(pid, name)
	if err != nil {
		e.Logf("no CPU profile %s: %v", name, err)
		return nil
	}
	return prof
}

// startProfile starts a CPU profile of pid named name when profiling is on; a failure
// only loses the profile.
func (e *env) startProfile(pid int, name string) *cpuProfile {
	prof, err := e.prof.start(pid, name)
	if err != nil {
		e.Logf("no CPU profile %s: %v", name, err)
		return nil
	}
	return prof
}

// heapProfile writes a heap profile of the process pid (with -cpuprofile).
func (e *env) heapProfile(pid int, name string) {
	file, err := e.prof.heap(pid, name)
	switch {
	case err != nil:
		e.Logf("no heap profile %s: %v", name, err)
	case file != "":
		e.Logf("heap profile written to %s", file)
	}
}

// stopProfile ends a profile startProfile began (nil: nothing to do).
func (e *env) stopProfile(prof *cpuProfile) {
	file, err := prof.stop()
	switch {
	case err != nil:
		e.Logf("CPU profile: %v", err)
	case file != "":
		e.Logf("CPU profile written to %s", file)
	}
}

// profileSelf profiles this process (the benchmark driver, where in-process work such
// as the nftables Programmer runs) until the returned function is called.
func (e *env) profileSelf(name string) func() {
	if e.prof == nil {
		return func() {}
	}
	file := filepath.Join(e.prof.outDir, name+".pprof")
	f, err := os.Create(file)
	if err != nil {
		e.Logf("no CPU profile %s: %v", name, err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		e.Logf("no CPU profile %s: %v", name, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err == nil {
			e.Logf("CPU profile written to %s", file)
		}
	}
}

// perfRecord samples every CPU with kernel stacks while fn runs, into
// <outDir>/<name>.perf.data, when profiling is on and perf is installed. The datapath
// runs in the kernel, in the softirq of the sending thread, so this is its profile.
func (e *env) perfRecord(name string, fn func()) {
	e.perf(name, []string{"-a", "-F", "1999"}, fn)
}

// perfOffCPU records where this process sleeps (every context switch, with kernel and
// user stacks) while fn runs: the time a CPU profile cannot see.
func (e *env) perfOffCPU(name string, fn func()) {
	e.perf(name, []string{"-e", "sched:sched_switch", "-p", strconv.Itoa(os.Getpid())}, fn)
}

func (e *env) perf(name string, args []string, fn func()) {
	perf, err := exec.LookPath("perf")
	if e.prof == nil || err != nil {
		fn()
		return
	}
	file := filepath.Join(e.prof.outDir, name+".perf.data")
	cmd := exec.Command(perf, append([]string{"record", "-g", "-o", file}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		e.Logf("perf: %v", err)
		fn()
		return
	}
	// perf needs a moment before it samples; its first line on stderr comes later, so
	// wait for the output file instead.
	_ = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 5*time.Second, true,
		func(context.Context) (bool, error) { _, err := os.Stat(file); return err == nil, nil })
	fn()
	_ = cmd.Process.Signal(syscall.SIGINT)
	_ = cmd.Wait() // perf ends with the signal's status even when it wrote the file
	if !strings.Contains(out.String(), "Captured and wrote") {
		e.Logf("perf record failed:\n%s", out)
		return
	}
	e.Logf("perf profile written to %s", file)
}
