package cniserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"github.com/loutres/juneau/test/require"
)

// peerSocketEnv makes the test binary a CNI client of that socket instead of running the
// tests: TestNonRootPeerIsRefused starts it under another uid.
const peerSocketEnv = "JUNEAU_CNISERVER_TEST_PEER_SOCKET"

func TestMain(m *testing.M) {
	if path := os.Getenv(peerSocketEnv); path != "" {
		os.Exit(runPeer(path))
	}
	os.Exit(m.Run())
}

// runPeer asks the agent once and prints the outcome.
func runPeer(path string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nics, err := NewClient(path).Interfaces(ctx, "ns", "web", "")
	if err != nil {
		fmt.Printf("error: %v (retryable %v)\n", err, IsRetryable(err))
		return 0
	}
	fmt.Printf("answered: %d interfaces\n", len(nics))
	return 0
}

// nobody is the uid and gid the refused peer runs as.
const nobody = 65534

// TestNonRootPeerIsRefused: a process that is not root cannot connect to the socket
// (mode 0600), and when the socket's mode is loosened it connects but is refused by
// its peer credentials, with a message saying why; root is still answered.
func TestNonRootPeerIsRefused(t *testing.T) {
	require.Root(t)
	src := &fakeSource{}
	path, _ := start(t, New(src))
	// Let every user reach the socket's directory, so only the socket itself decides.
	for dir := filepath.Dir(path); dir != os.TempDir(); dir = filepath.Dir(dir) {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := executableForEveryone(t)
	asNobody := func() string {
		t.Helper()
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), peerSocketEnv+"="+path)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, NoSetGroups: true}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the peer running as uid %d: %v\n%s", nobody, err, out)
		}
		return strings.TrimSpace(string(out))
	}

	if out := asNobody(); !strings.Contains(out, "permission denied") {
		t.Errorf("uid %d connecting to the 0600 socket: %q, want permission denied", nobody, out)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	out := asNobody()
	want := fmt.Sprintf("node agent answered 403 Forbidden: the node agent serves only root on this socket; the caller (pid %%d) runs as uid %d (retryable false)", nobody)
	var pid int
	if _, err := fmt.Sscanf(out, "error: "+want, &pid); err != nil || pid <= 0 {
		t.Errorf("uid %d asking through a 0666 socket: %q, want %q", nobody, out, "error: "+want)
	}
	src.mu.Lock()
	for _, c := range src.calls {
		if strings.HasPrefix(c, "ns/web/") {
			t.Errorf("the refused peer's question reached the source: %q", c)
		}
	}
	src.mu.Unlock()

	// Root (this process) is answered on the same socket.
	if _, err := NewClient(path).Interfaces(context.Background(), "ns", "web", ""); err != nil {
		t.Errorf("root asking: %v", err)
	}
}

// executableForEveryone copies the test binary where any user may run it (go test keeps
// it in a directory only its owner may enter).
func executableForEveryone(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "jncnipeer")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	bin := filepath.Join(dir, "peer")
	out, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestUnidentifiedPeerIsRefused: served on a listener that carries no peer credentials
// (not a unix socket), every request is refused rather than answered blindly.
func TestUnidentifiedPeerIsRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	src := &fakeSource{}
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- New(src).Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	resp, err := http.Get("http://" + l.Addr().String() + PathInterfaces + "?namespace=ns&pod=web")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "cannot identify the caller") {
		t.Errorf("answer %d %s, want 403 saying the caller cannot be identified", resp.StatusCode, body)
	}
	if len(src.calls) != 0 {
		t.Errorf("the source was asked: %v", src.calls)
	}
}

func TestForbiddenIsNotRetryable(t *testing.T) {
	if err := error(&StatusError{Status: http.StatusForbidden}); IsRetryable(err) {
		t.Error("a refused caller must not retry")
	}
	if !IsRetryable(&StatusError{Status: http.StatusServiceUnavailable}) || !IsRetryable(errors.New("connection refused")) {
		t.Error("agent restarts must stay retryable")
	}
}
