package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// Every cluster lives in its own run directory, /tmp/juneau-cluster-<kind>-<random>
// (or under $JUNEAU_CLUSTER_ROOT): namespaces as files, configuration, data and the log
// of every component. Two runs never share anything, so a demo can run while a sandbox is
// up. The directory also records everything the run created outside it (processes,
// cgroups, namespaces), so Teardown can remove a run from the directory alone: from
// another process (make sandbox-down), or after the process that started it died.
const runPrefix = "juneau-cluster-"

// maxRunDir leaves room for the Node's sockets below a run directory (node names up to
// 10 bytes).
const maxRunDir = 107 - len("/nodes/") - 10 - len("/containerd/containerd.sock.ttrpc")

// forbiddenRoots are directories each Node's mount namespace replaces (tmpfs on /run,
// overlays on the others): a run directory below one of them would be invisible, or
// would overlap the overlay's own upper directory, inside the Nodes.
var forbiddenRoots = []string{"/run", "/var/run", "/opt", "/var/lib", "/var/log", "/etc"}

// RunInfo describes a run, as recorded in its run.json.
type RunInfo struct {
	Dir  string `json:"-"`
	Kind string `json:"kind"` // demo, sandbox, test
	// Repo is the clone that started the run: make sandbox-down stops the sandboxes of
	// its own clone, and leftovers are swept only for the same clone.
	Repo    string    `json:"repo"`
	Owner   Owner     `json:"owner"`
	Started time.Time `json:"started"`
	// Logs is where the teardown keeps the logs of every component; empty: nowhere.
	Logs string `json:"logs,omitempty"`
}

// Owner identifies the process that runs a cluster, robustly against PID reuse.
type Owner struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"` // start time in clock ticks since boot, /proc/PID/stat field 22
}

// Alive reports whether the owner still runs (a zombie does not).
func (o Owner) Alive() bool {
	st, err := readProcStat(o.PID)
	return err == nil && st.start == o.Start && st.state != 'Z' && st.state != 'X'
}

func self() (Owner, error) {
	st, err := readProcStat(os.Getpid())
	if err != nil {
		return Owner{}, err
	}
	return Owner{PID: os.Getpid(), Start: st.start}, nil
}

// runRoot is where run directories are made.
func runRoot() (string, error) {
	root := os.Getenv("JUNEAU_CLUSTER_ROOT")
	if root == "" {
		root = "/tmp"
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", err
	}
	if resolved, err := filepath.EvalSymlinks(abs); err == nil {
		abs = resolved
	}
	for _, f := range forbiddenRoots {
		if abs == f || strings.HasPrefix(abs, f+"/") {
			return "", fmt.Errorf("run directories cannot live under %s (each Node replaces it in its mount namespace); set JUNEAU_CLUSTER_ROOT elsewhere", f)
		}
	}
	return abs, nil
}

// run is the directory of one cluster and the record of what it created.
type run struct {
	dir    string
	info   RunInfo
	mu     sync.Mutex
	closed bool // tearing down: nothing new may be created
}

// errClosed refuses to create anything once the teardown has begun.
var errClosed = errors.New("the cluster is being torn down")

// close makes every later record, and so every later creation, fail.
func (r *run) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
}

func newRun(kind, repo, logs string) (*run, error) {
	root, err := runRoot()
	if err != nil {
		return nil, err
	}
	owner, err := self()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(root, runPrefix+kind+"-")
	if err != nil {
		return nil, err
	}
	// containerd's sockets live in the run directory, and a unix socket path has at most
	// 107 bytes: <dir>/nodes/<node>/containerd/containerd.sock.ttrpc.
	if len(dir) > maxRunDir {
		os.Remove(dir)
		return nil, fmt.Errorf("run directory %s is too long for the unix sockets in it (at most %d bytes); set JUNEAU_CLUSTER_ROOT to a shorter directory", dir, maxRunDir)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	r := &run{dir: dir, info: RunInfo{Dir: dir, Kind: kind, Repo: repo, Owner: owner, Started: time.Now(), Logs: logs}}
	data, err := json.MarshalIndent(r.info, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "run.json"), data, 0o644); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *run) path(elem ...string) string { return filepath.Join(append([]string{r.dir}, elem...)...) }

// Records of what a run created outside its directory, one per line of the file
// "created", appended before (namespaces, cgroups) or right after (processes) the
// thing exists, so a crash never leaves something unrecorded.
const (
	recNetns  = "netns"  // path of a namespace file
	recCgroup = "cgroup" // name of a top-level cgroup, in every hierarchy
	recMntns  = "mntns"  // node, inode of its mount namespace, holder PID and start
	recProc   = "proc"   // name, PID and start of a component
)

func (r *run) record(kind string, fields ...any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errClosed
	}
	f, err := os.OpenFile(r.path("created"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	parts := []string{kind}
	for _, x := range fields {
		parts = append(parts, fmt.Sprint(x))
	}
	_, err = fmt.Fprintln(f, strings.Join(parts, " "))
	return errors.Join(err, f.Close())
}

// records reads the records of a run directory, by kind.
func records(dir string) (map[string][][]string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "created"))
	if errors.Is(err, os.ErrNotExist) {
		return map[string][][]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string][][]string{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		out[f[0]] = append(out[f[0]], f[1:])
	}
	return out, nil
}

// Runs lists the run directories of clusters started from the clone repo (every clone
// when repo is empty), oldest first.
func Runs(repo string) ([]RunInfo, error) {
	root, err := runRoot()
	if err != nil {
		return nil, err
	}
	dirs, err := filepath.Glob(filepath.Join(root, runPrefix+"*"))
	if err != nil {
		return nil, err
	}
	var out []RunInfo
	for _, d := range dirs {
		info, err := ReadRun(d)
		if err != nil || (repo != "" && info.Repo != repo) {
			continue
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	return out, nil
}

// ReadRun reads the run.json of a run directory.
func ReadRun(dir string) (RunInfo, error) {
	data, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		return RunInfo{}, err
	}
	var info RunInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return RunInfo{}, fmt.Errorf("%s/run.json: %w", dir, err)
	}
	info.Dir = dir
	return info, nil
}

// SweepAbandoned tears down the runs of clone repo whose owner process is gone (killed
// before it could tear down) and returns what it did, and what it could not remove.
func SweepAbandoned(repo string) (swept []string, problems []error) {
	runs, err := Runs(repo)
	if err != nil {
		return nil, []error{err}
	}
	for _, info := range runs {
		if info.Owner.Alive() {
			continue
		}
		swept = append(swept, info.Dir)
		if err := Teardown(info.Dir); err != nil {
			problems = append(problems, err)
		}
	}
	return swept, problems
}
