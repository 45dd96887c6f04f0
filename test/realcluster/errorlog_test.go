package realcluster

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loutres/juneau/test/cluster"
)

// componentLogs follows, in the background, the log files of every container of
// juneau's Pods (controller, webhook, node agents) on every Node, and keeps their
// error-level lines. It reads the kubelet's files (/var/log/pods of each Node) rather
// than asking kubectl at the end: a Pod's log goes with the Pod, and rollouts, scaling
// and the pages' own steps replace Pods during the run.
type componentLogs struct {
	nodes []*cluster.Node
	stop  chan struct{}
	done  chan struct{}

	mu      sync.Mutex
	offsets map[string]int64
	errors  []errorLine
	// lines counts the lines read per component (controller, webhook, node).
	lines map[string]int
}

// errorLine is a klog line of severity error (or fatal) of one of juneau's containers.
type errorLine struct {
	Pod, Container string
	At             time.Time // as the kubelet stamped it
	Text           string
}

func (e errorLine) String() string {
	return fmt.Sprintf("[pod/%s/%s] %s", e.Pod, e.Container, e.Text)
}

// klogError is the header of a klog line of severity E or F: "E1201 16:07:37.302230 ...".
var klogError = regexp.MustCompile(`^[EF]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} `)

// followComponentLogs starts following; stop it with close.
func followComponentLogs(c *cluster.Cluster) *componentLogs {
	l := &componentLogs{nodes: c.Nodes, stop: make(chan struct{}), done: make(chan struct{}), offsets: map[string]int64{}, lines: map[string]int{}}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			l.read()
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return l
}

func (l *componentLogs) close() {
	close(l.stop)
	<-l.done
}

// read reads what juneau's containers wrote since the last read. A file is
// <Node>/var/log/pods/<namespace>_<pod>_<uid>/<container>/<restarts>.log, each line
// "<time> <stream> <P|F> <text>" (the CRI log format).
func (l *componentLogs) read() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.nodes {
		var files []string
		for _, ns := range []string{cluster.SystemNamespace, cluster.NodeNamespace} {
			f, _ := filepath.Glob(filepath.Join(n.Dir, "root", "var", "log", "upper", "pods", ns+"_*", "*", "*.log"))
			files = append(files, f...)
		}
		for _, f := range files {
			container := filepath.Base(filepath.Dir(f))
			pod := strings.SplitN(filepath.Base(filepath.Dir(filepath.Dir(f))), "_", 3)[1]
			l.readFile(f, pod, container)
		}
	}
}

func (l *componentLogs) readFile(path, pod, container string) {
	f, err := os.Open(path)
	if err != nil {
		return // gone with its Pod
	}
	defer f.Close()
	if _, err := f.Seek(l.offsets[path], io.SeekStart); err != nil {
		return
	}
	r := bufio.NewReaderSize(f, 1<<16)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return // an unfinished line is read again next time
		}
		l.offsets[path] += int64(len(line))
		l.lines[component(pod)]++
		fields := strings.SplitN(strings.TrimRight(line, "\n"), " ", 4)
		if len(fields) < 4 || !klogError.MatchString(fields[3]) || lostElection(fields[3]) {
			continue
		}
		at, _ := time.Parse(time.RFC3339Nano, fields[0])
		l.errors = append(l.errors, errorLine{Pod: pod, Container: container, At: at, Text: fields[3]})
	}
}

// lostElection: client-go's leader election logs at error level a candidate's write of
// the Lease that another candidate's write beat (a Conflict, or AlreadyExists when both
// created the absent Lease): two controller replicas racing for it, during every rollout. That is how the
// protocol decides, not a fault; any other error of the election still counts.
func lostElection(text string) bool {
	if !strings.Contains(text, "leaderelection.go") {
		return false
	}
	// Both replicas found no Lease and created it at once: the loser's create is refused.
	created := strings.Contains(text, `"Error initially creating lease lock"`) && strings.Contains(text, "already exists")
	// Both renewed or took a released Lease at once: the loser's update is refused.
	updated := strings.Contains(text, `"Failed to update lease"`) && strings.Contains(text, "the object has been modified")
	return created || updated
}

// component is the juneau component a Pod of juneau-system or juneau-node runs: "controller" for
// juneau-controller-..., and so on.
func component(pod string) string {
	for _, c := range []string{"controller", "webhook", "node"} {
		if strings.HasPrefix(pod, "juneau-"+c+"-") {
			return c
		}
	}
	return "other"
}

// errorsBetween returns the error lines stamped between from and to, but those skip
// says are expected.
func (l *componentLogs) errorsBetween(from, to time.Time, skip func(errorLine) bool) []errorLine {
	l.read()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []errorLine
	for _, e := range l.errors {
		if e.At.Before(from) || e.At.After(to) || (skip != nil && skip(e)) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// testNoErrorLines: in a healthy cluster no juneau component (controller, webhook, any
// node agent, any container of their Pods) logs at error level, from the install until
// now, the uninstall excepted (it comes after this test). Every scenario before it keeps
// the cluster healthy: rollouts, scaling the controller down and up, the webhook's
// refusals and the pages' steps are normal operations, so nothing is excluded.
func testNoErrorLines(t *testing.T, c *cluster.Cluster) {
	if shared.logs == nil {
		t.Fatal("the components' logs were not followed (the install did not run)")
	}
	lines := shared.logs.errorsBetween(shared.installed, time.Now(), nil)
	shared.logs.mu.Lock()
	for _, comp := range []string{"controller", "webhook", "node"} {
		if shared.logs.lines[comp] == 0 {
			t.Errorf("no log line of the %s was read: the check reads the wrong files", comp)
		}
	}
	t.Logf("log lines read: %v", shared.logs.lines)
	shared.logs.mu.Unlock()
	for _, e := range lines {
		t.Errorf("error-level log line in a healthy cluster: %s", e)
	}
	if len(lines) > 0 {
		t.Logf("%d error-level lines; every component's log is kept in $JUNEAU_REALCLUSTER_LOGS", len(lines))
	}
}
