package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"
)

// procStat is what the cluster reads of /proc/PID/stat.
type procStat struct {
	state byte   // R, S, D, Z, ...
	start uint64 // start time in clock ticks since boot
}

func readProcStat(pid int) (procStat, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// The command name (field 2) is in parentheses and may hold spaces and
	// parentheses itself: the fields after it start after the last ')'.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	start, err := strconv.ParseUint(f[19], 10, 64) // field 22 overall
	if err != nil {
		return procStat{}, err
	}
	return procStat{state: f[0][0], start: start}, nil
}

// nsInode is the inode of a namespace: of a namespace file (a bind mount of nsfs) or of
// /proc/PID/ns/<kind>.
func nsInode(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

func procNS(pid int, kind string) (uint64, error) {
	return nsInode(fmt.Sprintf("/proc/%d/ns/%s", pid, kind))
}

// hostMountNS returns the mount namespaces no sweep may ever touch: ours, and PID 1's
// when we may look at it (a protected init hides its namespaces even from root).
func hostMountNS() (map[uint64]bool, error) {
	mine, err := procNS(os.Getpid(), "mnt")
	if err != nil {
		return nil, err
	}
	host := map[uint64]bool{mine: true}
	if init, err := procNS(1, "mnt"); err == nil {
		host[init] = true
	}
	return host, nil
}

// proc is a component the cluster started.
type proc struct {
	name  string
	cmd   *exec.Cmd
	pid   int
	start uint64
	log   string
	done  chan struct{}
	err   error
}

// startProc runs argv (usually nsenter wrapping the component), with env added to our
// own environment, with its output in logs/<name>.log, in its own process group so a
// Ctrl-C in the terminal reaches only the owner, which then tears everything down in
// order. The process is recorded in the run before anything uses it.
func (r *run) startProc(name string, env []string, argv ...string) (*proc, error) {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	logPath := r.path("logs", name+".log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, pid: cmd.Process.Pid, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	st, err := readProcStat(p.pid)
	if err == nil {
		p.start = st.start
		err = r.record(recProc, name, p.pid, p.start)
	}
	if err != nil {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
		return nil, fmt.Errorf("recording %s: %w", name, err)
	}
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) failure() error {
	return fmt.Errorf("%s exited (%v); its log: %s\n%s", p.name, p.err, p.log, tail(p.log, 15))
}

// execd waits until the process has executed exe (nsenter and unshare exec the command
// they run: until then /proc/PID/ns shows the namespaces it is leaving).
func (p *proc) execd(ctx context.Context, exe string) error {
	want, err := filepath.EvalSymlinks(exe)
	if err != nil {
		return err
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		if p.exited() {
			return false, p.failure()
		}
		last, _ = os.Readlink(fmt.Sprintf("/proc/%d/exe", p.pid))
		return last == want, nil
	})
	if err != nil {
		return fmt.Errorf("%s (pid %d) runs %q, not %s: %w", p.name, p.pid, last, want, err)
	}
	return nil
}

// inNamespaces verifies, before the process is used, that it runs in the network
// namespace netNS and (unless 0) the mount namespace mntNS, and never in the host's
// mount namespace: a component that silently ran in the host's namespaces would act on
// the machine itself.
func (p *proc) inNamespaces(netNS, mntNS uint64) error {
	gotNet, err := procNS(p.pid, "net")
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	if gotNet != netNS {
		return fmt.Errorf("%s (pid %d) is in network namespace %d, not %d", p.name, p.pid, gotNet, netNS)
	}
	gotMnt, err := procNS(p.pid, "mnt")
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	if mntNS != 0 {
		host, err := hostMountNS()
		if err != nil {
			return err
		}
		if gotMnt != mntNS || host[gotMnt] {
			return fmt.Errorf("%s (pid %d) is in mount namespace %d, not the Node's %d", p.name, p.pid, gotMnt, mntNS)
		}
	}
	return nil
}

// stop ends the process: SIGTERM, then SIGKILL after grace.
func (p *proc) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = syscall.Kill(p.pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
		<-p.done
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// errProcGone means a recorded process no longer exists (or is another one now).
var errProcGone = errors.New("process gone")

// signalRecorded signals a recorded process only if it is still the one recorded.
func signalRecorded(pid int, start uint64, sig syscall.Signal) error {
	st, err := readProcStat(pid)
	if err != nil || st.start != start || st.state == 'Z' {
		return errProcGone
	}
	return syscall.Kill(pid, sig)
}
