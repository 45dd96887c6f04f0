package framework

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var juneauBinary struct {
	once  sync.Once
	path  string
	built string // temp dir of a binary built here, removed by Main
	err   error
	out   []byte
}

// RemoveBuiltBinary removes the juneau binary JuneauBinary built, if any; Main calls it.
func RemoveBuiltBinary() {
	if juneauBinary.built != "" {
		_ = os.RemoveAll(juneauBinary.built)
	}
}

// JuneauBinary returns the juneau binary under test: $JUNEAU_BINARY (make test sets it
// to bin/juneau), or one built once per test package.
func JuneauBinary(t testing.TB) string {
	t.Helper()
	juneauBinary.once.Do(func() {
		if p := os.Getenv("JUNEAU_BINARY"); p != "" {
			juneauBinary.path = p
			return
		}
		root, err := RepoRoot()
		if err != nil {
			juneauBinary.err = err
			return
		}
		dir, err := os.MkdirTemp("", "juneau-bin-")
		if err != nil {
			juneauBinary.err = err
			return
		}
		juneauBinary.built = dir
		juneauBinary.path = filepath.Join(dir, "juneau")
		cmd := exec.Command("go", "build", "-o", juneauBinary.path, "./cmd/juneau")
		cmd.Dir = root
		juneauBinary.out, juneauBinary.err = cmd.CombinedOutput()
	})
	if juneauBinary.err != nil {
		t.Fatalf("building juneau: %v\n%s", juneauBinary.err, juneauBinary.out)
	}
	return juneauBinary.path
}

// Component is a juneau process (controller, webhook, node agent) started by a test.
type Component struct {
	Name    string
	LogPath string
	proc    *process
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
func (c *Component) Stop() { c.proc.stop(10 * time.Second) }

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
