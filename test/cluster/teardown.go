package cluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/loutres/juneau/test/netns"
)

// components are the executables a run starts; the sweep by command line only ever
// signals these (a user's editor open on a log of the run is left alone).
var components = map[string]bool{
	"etcd": true, "kube-apiserver": true, "kube-controller-manager": true, "kube-scheduler": true,
	"kubelet": true, "kube-proxy": true, "flanneld": true, "containerd": true, "containerd-shim-runc-v2": true,
	"box": true, "nsenter": true, "unshare": true,
}

// Teardown removes everything the run in dir created, using only what the directory
// records, so it works from any process and after a crash: the Nodes' containers (every
// process in their cgroups), everything in their mount namespaces, the components, the
// namespace files, the cgroups, and the directory itself, after copying the logs to the
// directory recorded in run.json, if any. It verifies the result and reports what it
// could not remove. Calling it again is harmless.
func Teardown(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	recs, err := records(dir)
	if err != nil {
		return err
	}
	var problems []error
	// The kubelets first, so none restarts a container being killed.
	for _, rec := range recs[recProc] {
		if strings.HasSuffix(rec[0], "-kubelet") || strings.HasSuffix(rec[0], "-kube-proxy") || strings.HasSuffix(rec[0], "-flanneld") {
			killRecorded(rec)
		}
	}
	for attempt := 0; attempt < 3; attempt++ {
		pids := killCgroups(recs[recCgroup])
		pids = append(pids, killNodeNamespaces(dir, recs[recMntns])...)
		pids = append(pids, killByCommandLine(dir)...)
		for _, rec := range recs[recProc] {
			if pid := killRecorded(rec); pid > 0 {
				pids = append(pids, pid)
			}
		}
		if len(pids) == 0 {
			break
		}
		waitGone(pids, 10*time.Second)
	}
	if info, err := ReadRun(dir); err == nil && info.Logs != "" {
		if err := keepLogs(dir, info.Logs); err != nil {
			problems = append(problems, fmt.Errorf("keeping the logs: %w", err))
		}
	}
	problems = append(problems, unmountUnder(dir)...)
	for _, rec := range recs[recNetns] {
		if err := netns.Delete(rec[0]); err != nil {
			problems = append(problems, fmt.Errorf("namespace %s: %w", rec[0], err))
		}
	}
	problems = append(problems, removeCgroups(recs[recCgroup])...)
	if err := os.RemoveAll(dir); err != nil {
		problems = append(problems, err)
	}
	problems = append(problems, leftovers(dir, recs)...)
	if len(problems) > 0 {
		return fmt.Errorf("tearing down %s left things behind:\n%w", dir, errors.Join(problems...))
	}
	return nil
}

// killRecorded SIGKILLs a recorded component if it is still the process recorded.
func killRecorded(rec []string) int {
	if len(rec) < 3 {
		return 0
	}
	pid, err1 := strconv.Atoi(rec[1])
	start, err2 := strconv.ParseUint(rec[2], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	if signalRecorded(pid, start, syscall.SIGKILL) != nil {
		return 0
	}
	return pid
}

// cgroupDirs lists the directories of the run's top-level cgroups, deepest first.
func cgroupDirs(names [][]string) []string {
	hs, _ := cgroupHierarchies()
	var dirs []string
	for _, rec := range names {
		// A recorded name is a single path element of our own making; never the root.
		if len(rec) == 0 || rec[0] == "" || strings.ContainsAny(rec[0], "/.") {
			continue
		}
		for _, h := range hs {
			_ = filepath.WalkDir(filepath.Join(h, rec[0]), func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
		}
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	return dirs
}

// killCgroups SIGKILLs every process in the run's cgroups: the Pods' containers.
func killCgroups(names [][]string) []int {
	var pids []int
	for _, d := range cgroupDirs(names) {
		data, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					pids = append(pids, pid)
				}
			}
		}
	}
	return pids
}

// allPIDs lists the processes of the machine.
func allPIDs() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

func cmdline(pid int) string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return string(bytes.ReplaceAll(data, []byte{0}, []byte{' '}))
}

// killNodeNamespaces SIGKILLs every process in a Node's mount namespace (containerd,
// its shims, the holder). Never the host's mount namespace, and only a namespace proven
// to be the run's: its holder still lives in it, or a process in it names the run
// directory (a namespace's inode number may be reused once it is gone).
func killNodeNamespaces(dir string, recs [][]string) []int {
	host, err := hostMountNS()
	if err != nil {
		return nil
	}
	var killed []int
	for _, rec := range recs {
		if len(rec) < 4 {
			continue
		}
		inode, err := strconv.ParseUint(rec[1], 10, 64)
		if err != nil || host[inode] {
			continue
		}
		holder, _ := strconv.Atoi(rec[2])
		holderStart, _ := strconv.ParseUint(rec[3], 10, 64)
		var in []int
		proven := false
		for _, pid := range allPIDs() {
			if pid == os.Getpid() {
				continue
			}
			if ino, err := procNS(pid, "mnt"); err == nil && ino == inode {
				in = append(in, pid)
				if strings.Contains(cmdline(pid), dir+"/") {
					proven = true
				}
			}
		}
		if st, err := readProcStat(holder); err == nil && st.start == holderStart {
			if ino, err := procNS(holder, "mnt"); err == nil && ino == inode {
				proven = true
			}
		}
		if !proven {
			continue
		}
		for _, pid := range in {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed = append(killed, pid)
			}
		}
	}
	return killed
}

// killByCommandLine SIGKILLs the run's components still running, recognised by their
// executable and the run directory in their command line.
func killByCommandLine(dir string) []int {
	var killed []int
	for _, pid := range ownProcesses(dir) {
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed = append(killed, pid)
		}
	}
	return killed
}

func ownProcesses(dir string) []int {
	var out []int
	for _, pid := range allPIDs() {
		if pid == os.Getpid() || !strings.Contains(cmdline(pid), dir+"/") {
			continue
		}
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil || !components[filepath.Base(exe)] {
			continue
		}
		if st, err := readProcStat(pid); err == nil && st.state != 'Z' {
			out = append(out, pid)
		}
	}
	return out
}

// waitGone polls until none of pids exists (zombies count as gone: their parent, or
// init, reaps them).
func waitGone(pids []int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		alive := false
		for _, pid := range pids {
			if st, err := readProcStat(pid); err == nil && st.state != 'Z' && st.state != 'X' {
				alive = true
				break
			}
		}
		if !alive {
			return
		}
		time.Sleep(50 * time.Millisecond) // polling other processes' exit
	}
}

// mountsUnder lists the mount points of the root mount namespace under dir, deepest
// first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 4 && strings.HasPrefix(unescapeMount(fields[4]), dir+"/") {
			out = append(out, unescapeMount(fields[4]))
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// unescapeMount decodes the octal escapes of mountinfo (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func unmountUnder(dir string) []error {
	var problems []error
	for _, m := range mountsUnder(dir) {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			problems = append(problems, fmt.Errorf("unmount %s: %w", m, err))
		}
	}
	return problems
}

// removeCgroups removes the run's cgroups, deepest first; a cgroup whose last task is
// still exiting is busy for a moment, so it retries.
func removeCgroups(names [][]string) []error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var problems []error
		for _, d := range cgroupDirs(names) {
			if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
				problems = append(problems, fmt.Errorf("cgroup %s: %w", d, err))
			}
		}
		if len(problems) == 0 || time.Now().After(deadline) {
			return problems
		}
		time.Sleep(100 * time.Millisecond) // polling the kernel's release of the cgroups
	}
}

// leftovers verifies that nothing of the run remains.
func leftovers(dir string, recs map[string][][]string) []error {
	var out []error
	for _, pid := range ownProcesses(dir) {
		out = append(out, fmt.Errorf("process %d still runs: %s", pid, cmdline(pid)))
	}
	for _, d := range cgroupDirs(recs[recCgroup]) {
		out = append(out, fmt.Errorf("cgroup %s remains", d))
	}
	for _, m := range mountsUnder(dir) {
		out = append(out, fmt.Errorf("mount %s remains", m))
	}
	if _, err := os.Stat(dir); err == nil {
		out = append(out, fmt.Errorf("%s remains", dir))
	}
	return out
}

// keepLogs copies the run's logs (components, and each Node's Pod logs) to logs,
// replacing what a previous run left there.
func keepLogs(dir, logs string) error {
	if err := os.RemoveAll(logs); err != nil {
		return err
	}
	if err := copyTree(filepath.Join(dir, "logs"), logs); err != nil {
		return err
	}
	nodes, _ := filepath.Glob(filepath.Join(dir, "nodes", "*", "root", "var", "log", "upper", "pods"))
	for _, p := range nodes {
		node := filepath.Base(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(p))))))
		if err := copyTree(p, filepath.Join(logs, "pods", node)); err != nil {
			return err
		}
	}
	return nil
}

// copyTree copies the regular files under src (following no links) to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}
