package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/test/require"
)

// commandTimeout bounds every foreground command so a hung tool cannot hang
// the test binary.
const commandTimeout = 2 * time.Minute

// command builds `nsenter --net=<ns> name args...`.
func (n *NS) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	n.t.Helper()
	cmd := exec.CommandContext(ctx, require.Binary(n.t, "nsenter"), n.Wrap(require.Binary(n.t, name), args...)...)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// Wrap returns the arguments of nsenter(1) that run bin with args inside the
// namespace (and only its network namespace: mounts stay the caller's).
func (n *NS) Wrap(bin string, args ...string) []string {
	return append([]string{"--net=" + n.path, "--", bin}, args...)
}

// Output runs a command inside the namespace and returns its combined output.
func (n *NS) Output(name string, args ...string) (string, error) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	out, err := n.command(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s in %s: %w", name, strings.Join(args, " "), n.Name, err)
	}
	return string(out), nil
}

// MustRun runs a command inside the namespace, fails the test if it fails and
// returns its combined output.
func (n *NS) MustRun(name string, args ...string) string {
	n.t.Helper()
	out, err := n.Output(name, args...)
	if err != nil {
		n.t.Fatalf("%v\n%s", err, out)
	}
	return out
}

// Process is a command running in the background inside a namespace.
type Process struct {
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
	err  error
}

// Start starts a command inside the namespace. It is killed when the test
// ends, before the namespace is deleted.
func (n *NS) Start(name string, args ...string) *Process {
	n.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := n.command(ctx, name, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGKILL) }
	p := &Process{cmd: cmd, out: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout = p.out
	cmd.Stderr = p.out
	if err := cmd.Start(); err != nil {
		cancel()
		n.t.Fatalf("start %s in %s: %v", name, n.Name, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	n.t.Cleanup(func() {
		cancel()
		<-p.done
	})
	return p
}

// PID is the process's id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Output returns what the process wrote so far (stdout and stderr).
func (p *Process) Output() string { return p.out.String() }

// Signal sends sig to the process (for example SIGINT to make a capture tool
// flush and exit).
func (p *Process) Signal(sig syscall.Signal) error {
	return p.cmd.Process.Signal(sig)
}

// Wait waits up to timeout for the process to exit and returns its exit error.
func (p *Process) Wait(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		return errors.New("process still running after " + timeout.String())
	}
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// WaitForOutput polls until the process output contains substr.
func (p *Process) WaitForOutput(substr string, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, timeout, true,
		func(context.Context) (bool, error) {
			if strings.Contains(p.Output(), substr) {
				return true, nil
			}
			if p.Exited() {
				return false, errors.New("process exited")
			}
			return false, nil
		})
	if err != nil {
		return fmt.Errorf("output does not contain %q (%v):\n%s", substr, err, p.Output())
	}
	return nil
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Serve runs run inside n (on a thread switched into it, so anything run opens or
// reopens lives there) until the test ends, then cancels its context and fails the
// test if run returned an error or did not return within ten seconds.
func (n *NS) Serve(run func(ctx context.Context) error) {
	n.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Do(func() error { return run(ctx) }) }()
	n.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				n.t.Errorf("in %s: %v", n.Name, err)
			}
		case <-time.After(10 * time.Second):
			n.t.Errorf("in %s: did not stop", n.Name)
		}
	})
}
