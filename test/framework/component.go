package framework

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// builtBinary is a binary of the repository built once per process.
type builtBinary struct {
	once sync.Once
	path string
	dir  string // temp dir of a binary built here, removed by RemoveBuiltBinary
	err  error
	out  []byte
}

var juneauBinary, boxBinary, pluginBinary builtBinary

// RemoveBuiltBinary removes the binaries JuneauBinary and BoxBinary built, if any; Main
// calls it.
func RemoveBuiltBinary() {
	for _, b := range []*builtBinary{&juneauBinary, &boxBinary, &pluginBinary} {
		if b.dir != "" {
			_ = os.RemoveAll(b.dir)
		}
	}
}

// get returns $env, or pkg built statically (it also goes into images) once per process.
func (b *builtBinary) get(t testing.TB, env, pkg string) string {
	t.Helper()
	b.once.Do(func() {
		if p := os.Getenv(env); p != "" {
			b.path = p
			return
		}
		b.path, b.dir, b.out, b.err = BuildStatic(pkg)
	})
	if b.err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, b.err, b.out)
	}
	return b.path
}

// BuildStatic builds the repository's package pkg (./cmd/juneau) without cgo into a new
// temp dir and returns the binary's path, the dir and the compiler's output.
func BuildStatic(pkg string) (path, dir string, out []byte, err error) {
	root, err := RepoRoot()
	if err != nil {
		return "", "", nil, err
	}
	dir, err = os.MkdirTemp("", "juneau-bin-")
	if err != nil {
		return "", "", nil, err
	}
	path = filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-ldflags=-s -w", "-o", path, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err = cmd.CombinedOutput()
	return path, dir, out, err
}

// JuneauBinary returns the juneau binary under test: $JUNEAU_BINARY (make test sets it
// to bin/juneau), or one built once per test package.
func JuneauBinary(t testing.TB) string {
	t.Helper()
	return juneauBinary.get(t, "JUNEAU_BINARY", "./cmd/juneau")
}

// BoxBinary returns the workload binary of the real cluster's images (test/images/box):
// $JUNEAU_BOX_BINARY, or one built once per test package.
func BoxBinary(t testing.TB) string {
	t.Helper()
	return boxBinary.get(t, "JUNEAU_BOX_BINARY", "./test/images/box")
}

// PluginBinary returns the kubectl plugin (cmd/kubectl-juneau): $JUNEAU_KUBECTL_PLUGIN,
// or one built once per test package.
func PluginBinary(t testing.TB) string {
	t.Helper()
	return pluginBinary.get(t, "JUNEAU_KUBECTL_PLUGIN", "./cmd/kubectl-juneau")
}

// Component is a juneau process (controller, webhook, node agent) started by a test.
type Component struct {
	Name    string
	LogPath string
	proc    *process
	// stopping is when Stop was first called; zero while the process is meant to run.
	stopping atomic.Pointer[time.Time]
}

// StoppingSince is when the test asked the process to stop gracefully, zero before.
func (c *Component) StoppingSince() time.Time {
	if at := c.stopping.Load(); at != nil {
		return *at
	}
	return time.Time{}
}

// StartComponent runs the juneau binary with args; it is stopped when the test ends and
// the tail of its log is printed if the test failed.
func StartComponent(t testing.TB, name string, args ...string) *Component {
	t.Helper()
	return StartCommand(t, name, JuneauBinary(t), args...)
}

// StartCommand runs bin with args as a component (e.g. juneau wrapped in nsenter).
func StartCommand(t testing.TB, name, bin string, args ...string) *Component {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	proc, err := startProcess(name, logPath, bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	c := &Component{Name: name, LogPath: logPath, proc: proc}
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", name, c.LogTail(40))
		}
	})
	return c
}

// Kill ends the process with SIGKILL, as a crash would, and waits for it.
func (c *Component) Kill() {
	if done, _ := c.proc.exited(); done {
		return
	}
	_ = syscall.Kill(-c.proc.cmd.Process.Pid, syscall.SIGKILL)
	<-c.proc.done
}

// Stop ends the process gracefully (SIGTERM, then SIGKILL after 10s).
func (c *Component) Stop() {
	now := time.Now()
	c.stopping.CompareAndSwap(nil, &now)
	c.proc.stop(10 * time.Second)
}

// Exited reports whether the process ended, and how.
func (c *Component) Exited() (bool, error) { return c.proc.exited() }

// LogTail returns the last n lines of the component's log.
func (c *Component) LogTail(n int) string {
	data, err := os.ReadFile(c.LogPath)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// Log returns the whole log of the component.
func (c *Component) Log() string {
	data, _ := os.ReadFile(c.LogPath)
	return strings.TrimSpace(string(data))
}

// PID is the process id of the component (of juneau itself when it was started
// through nsenter, which execs it).
func (c *Component) PID() int { return c.proc.cmd.Process.Pid }
