package bgp

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/test/netns"
	"github.com/loutres/juneau/test/require"
)

// The datapath tests run the speaker as a process of its own inside the node's network
// namespace, as the node agent runs on a Node: a goroutine of the test process could
// not dial from another namespace. The process is this test binary, started with
// speakerEnv set; it prints its Status as one JSON line whenever it changes and takes
// new desired state as JSON lines on stdin. SIGTERM stops it normally; SIGKILL is a
// crash.
const speakerEnv = "JUNEAU_TEST_BGP_SPEAKER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(speakerEnv); spec != "" {
		os.Exit(speakerMain(spec))
	}
	os.Exit(m.Run())
}

// speakerSpec is what the speaker process runs.
type speakerSpec struct {
	Config   Config
	Peers    []Peer
	Prefixes []netip.Prefix
}

// speakerInput is one line on the process's stdin.
type speakerInput struct {
	Peers    *[]Peer
	Prefixes *[]netip.Prefix
}

func speakerMain(spec string) int {
	var s speakerSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("v", "4")
	sp := New(s.Config)
	// SIGTERM and SIGINT stop the speaker; SIGUSR1 stops it for good, deciding at the
	// stop as the node agent does (SetWithdrawOnStop).
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1)
	go func() {
		if <-sigs == syscall.SIGUSR1 {
			sp.SetWithdrawOnStop(true)
		}
		stop()
	}()
	sp.SetPeers(s.Peers)
	if err := sp.SetAnnouncements(s.Prefixes, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	go func() {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			var input speakerInput
			if err := json.Unmarshal(in.Bytes(), &input); err != nil {
				fmt.Fprintln(os.Stderr, "bad input:", err)
				continue
			}
			if input.Peers != nil {
				sp.SetPeers(*input.Peers)
			}
			if input.Prefixes != nil {
				_ = sp.SetAnnouncements(*input.Prefixes, nil)
			}
		}
	}()
	go func() {
		out := json.NewEncoder(os.Stdout)
		for {
			_ = out.Encode(sp.Status())
			select {
			case <-sp.Changed():
			case <-ctx.Done():
				return
			}
		}
	}()
	if err := sp.Run(klog.NewContext(ctx, klog.Background())); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// speakerProcess is a speaker running in a namespace.
type speakerProcess struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  *json.Encoder
	mu     sync.Mutex
	status Status
	stderr strings.Builder
	done   chan struct{}
}

// startSpeaker starts the speaker in ns; it is killed when the test ends.
func startSpeaker(t *testing.T, ns *netns.NS, spec speakerSpec) *speakerProcess {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	p := &speakerProcess{t: t, done: make(chan struct{})}
	p.cmd = exec.Command(require.Binary(t, "nsenter"), ns.Wrap(exe)...)
	p.cmd.Env = append(os.Environ(), speakerEnv+"="+string(b))
	p.cmd.Stderr = &lockedWriter{mu: &p.mu, w: &p.stderr}
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.stdin = json.NewEncoder(stdin)
	go func() {
		defer close(p.done)
		lines := bufio.NewScanner(stdout)
		lines.Buffer(nil, 1<<20)
		for lines.Scan() {
			var st Status
			if json.Unmarshal(lines.Bytes(), &st) == nil {
				p.mu.Lock()
				p.status = st
				p.mu.Unlock()
			}
		}
		_ = p.cmd.Wait()
	}()
	t.Cleanup(func() {
		p.signal(syscall.SIGKILL)
		<-p.done
		if strings.Contains(p.log(), "WARNING: DATA RACE") {
			t.Error("the race detector found a data race in the speaker process")
		}
		if t.Failed() {
			t.Logf("speaker log:\n%s", p.log())
		}
	})
	return p
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (p *speakerProcess) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

func (p *speakerProcess) signal(sig syscall.Signal) {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(sig)
	}
}

// stop sends sig and waits until the process is gone.
func (p *speakerProcess) stop(sig syscall.Signal) {
	p.t.Helper()
	p.signal(sig)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.t.Fatalf("the speaker did not exit after %v", sig)
	}
}

func (p *speakerProcess) setPrefixes(prefixes ...netip.Prefix) {
	p.t.Helper()
	if prefixes == nil {
		prefixes = []netip.Prefix{} // null would mean "no change"
	}
	if err := p.stdin.Encode(speakerInput{Prefixes: &prefixes}); err != nil {
		p.t.Fatal(err)
	}
}

func (p *speakerProcess) setPeers(peers ...Peer) {
	p.t.Helper()
	if peers == nil {
		peers = []Peer{}
	}
	if err := p.stdin.Encode(speakerInput{Peers: &peers}); err != nil {
		p.t.Fatal(err)
	}
}

func (p *speakerProcess) current() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status
}

// waitPeer polls the process's status until the named peer satisfies ok.
func (p *speakerProcess) waitPeer(name string, timeout time.Duration, ok func(PeerStatus) bool) PeerStatus {
	p.t.Helper()
	var last PeerStatus
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		for _, peer := range p.current().Peers {
			if peer.Name == name {
				last = peer
				return ok(peer), nil
			}
		}
		return false, nil
	})
	if err != nil {
		p.t.Fatalf("peer %s: %+v (%v)", name, last, err)
	}
	return last
}
