package cniserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

type fakeSource struct {
	mu    sync.Mutex
	nics  map[string][]Interface
	err   error
	calls []string
}

func (f *fakeSource) DirectInterfaces(namespace, pod string, uid types.UID) ([]Interface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, namespace+"/"+pod+"/"+string(uid))
	if f.err != nil {
		return nil, f.err
	}
	return f.nics[namespace+"/"+pod], nil
}

type fakeObserver struct {
	mu        sync.Mutex
	plumbed   []Plumbing
	unplumbed []Plumbing
	err       error
}

func (o *fakeObserver) Plumbed(_ context.Context, p Plumbing) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.plumbed = append(o.plumbed, p)
	return o.err
}

func (o *fakeObserver) Unplumbed(_ context.Context, p Plumbing) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.unplumbed = append(o.unplumbed, p)
	return o.err
}

// socketPath returns a short socket path (sun_path holds at most 108 bytes).
func socketPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "jncni")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "run", "cni.sock")
}

// start runs a server on a fresh socket and waits until it answers.
func start(t *testing.T, s *Server) (string, <-chan error) {
	t.Helper()
	path := socketPath(t)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx, path) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	c := NewClient(path)
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.Interfaces(ctx, "probe", "probe", "")
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("server did not come up on %s: %v", path, err)
	}
	return path, errc
}

func TestInterfacesRoundTrip(t *testing.T) {
	want := []Interface{{
		Interface: "eth0", ElasticIP: "web-eip", Holds: true, Address: "10.225.51.6/32",
		Routes: []v1alpha1.Route{{Destination: "0.0.0.0/0", Gateway: "169.254.0.1", OnLink: true}},
	}, {
		Interface: "ext0", ElasticIP: "gw-eip", Waiting: `ElasticIP "gw-eip" is used by NetworkInterface "old.ext0"`,
	}}
	src := &fakeSource{nics: map[string][]Interface{"ns1/web": want}}
	path, _ := start(t, New(src))
	c := NewClient(path)

	got, err := c.Interfaces(context.Background(), "ns1", "web", "uid-1")
	if err != nil {
		t.Fatalf("Interfaces: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Interfaces = %+v, want %+v", got, want)
	}
	src.mu.Lock()
	last := src.calls[len(src.calls)-1]
	src.mu.Unlock()
	if last != "ns1/web/uid-1" {
		t.Errorf("source asked for %q, want ns1/web/uid-1", last)
	}

	// A Pod without direct NICs gets an empty, non-nil list.
	got, err = c.Interfaces(context.Background(), "ns1", "plain", "")
	if err != nil || got == nil || len(got) != 0 {
		t.Errorf("Interfaces(plain) = %#v, %v; want empty list", got, err)
	}
}

func TestInterfacesErrors(t *testing.T) {
	cases := []struct {
		name      string
		err       error
		status    int
		retryable bool
	}{
		{"unknown pod", fmt.Errorf("cache: %w", ErrPodUnknown), http.StatusNotFound, true},
		{"not synced", ErrNotReady, http.StatusServiceUnavailable, true},
		{"other", errors.New("boom"), http.StatusInternalServerError, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := &fakeSource{}
			path, _ := start(t, New(src))
			src.mu.Lock()
			src.err = tc.err
			src.mu.Unlock()
			_, err := NewClient(path).Interfaces(context.Background(), "ns", "p", "")
			var se *StatusError
			if !errors.As(err, &se) || se.Status != tc.status {
				t.Fatalf("err = %v, want status %d", err, tc.status)
			}
			if !strings.Contains(se.Message, tc.err.Error()) {
				t.Errorf("message %q does not carry %q", se.Message, tc.err)
			}
			if IsRetryable(err) != tc.retryable {
				t.Errorf("IsRetryable = %v, want %v", IsRetryable(err), tc.retryable)
			}
		})
	}
}

func TestBadRequestIsNotRetryable(t *testing.T) {
	path, _ := start(t, New(&fakeSource{}))
	_, err := NewClient(path).Interfaces(context.Background(), "", "p", "")
	var se *StatusError
	if !errors.As(err, &se) || se.Status != http.StatusBadRequest {
		t.Fatalf("err = %v, want 400", err)
	}
	if IsRetryable(err) {
		t.Error("a 400 must not be retried")
	}
}

func TestUnreachableIsRetryable(t *testing.T) {
	_, err := NewClient(socketPath(t)).Interfaces(context.Background(), "ns", "p", "")
	if err == nil || !IsRetryable(err) {
		t.Fatalf("err = %v, want a retryable connection error", err)
	}
	if !strings.Contains(err.Error(), "node agent at ") {
		t.Errorf("error %q does not name the socket", err)
	}
}

func TestPlumbingReachesObserver(t *testing.T) {
	obs := &fakeObserver{}
	path, _ := start(t, New(&fakeSource{}, WithObserver(obs)))
	c := NewClient(path)
	p := Plumbing{Namespace: "ns", Pod: "web", UID: "u", ContainerID: "c1", Interfaces: []PlumbedInterface{{
		Interface: "eth0", ElasticIP: "web-eip", Address: "10.225.51.6/32", HostInterface: "veth1234",
	}}}
	if err := c.Plumbed(context.Background(), p); err != nil {
		t.Fatalf("Plumbed: %v", err)
	}
	if err := c.Unplumbed(context.Background(), p); err != nil {
		t.Fatalf("Unplumbed: %v", err)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.plumbed) != 1 || !reflect.DeepEqual(obs.plumbed[0], p) {
		t.Errorf("plumbed = %+v, want [%+v]", obs.plumbed, p)
	}
	if len(obs.unplumbed) != 1 || !reflect.DeepEqual(obs.unplumbed[0], p) {
		t.Errorf("unplumbed = %+v, want [%+v]", obs.unplumbed, p)
	}
}

func TestPlumbingErrors(t *testing.T) {
	obs := &fakeObserver{err: errors.New("status write failed")}
	path, _ := start(t, New(&fakeSource{}, WithObserver(obs)))
	c := NewClient(path)
	err := c.Plumbed(context.Background(), Plumbing{Namespace: "ns", Pod: "p"})
	if err == nil || !strings.Contains(err.Error(), "status write failed") {
		t.Errorf("observer error not passed on: %v", err)
	}
	err = c.Plumbed(context.Background(), Plumbing{Pod: "p"})
	var se *StatusError
	if !errors.As(err, &se) || se.Status != http.StatusBadRequest {
		t.Errorf("missing namespace: err = %v, want 400", err)
	}
}

func TestPlumbingWithoutObserverIsAccepted(t *testing.T) {
	path, _ := start(t, New(&fakeSource{}))
	if err := NewClient(path).Plumbed(context.Background(), Plumbing{Namespace: "ns", Pod: "p"}); err != nil {
		t.Errorf("Plumbed: %v", err)
	}
}

func TestSocketModeAndRemovalOnStop(t *testing.T) {
	path := socketPath(t)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- New(&fakeSource{}).Run(ctx, path) }()
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		fi, err := os.Stat(path)
		return err == nil && fi.Mode().Perm() == SocketMode, nil
	})
	if err != nil {
		fi, serr := os.Stat(path)
		t.Fatalf("socket never appeared with mode %v: %v (%v, %v)", SocketMode, err, fi, serr)
	}
	// Owned by the agent's user: root, wherever the agent runs.
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Geteuid() {
		t.Errorf("socket owned by uid %d, want the server's %d", st.Uid, os.Geteuid())
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket still exists after Run returned: %v", err)
	}
}

func TestListenReplacesStaleSocket(t *testing.T) {
	path := socketPath(t)
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	// A socket file nobody serves, as a crashed agent leaves it.
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("stale socket not left behind: %v", err)
	}

	l2, err := Listen(path)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	defer l2.Close()
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != SocketMode {
		t.Errorf("socket mode = %v (%v), want %v", fi.Mode().Perm(), err, SocketMode)
	}

	// A second server must not steal a socket that is being served.
	if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), "another process") {
		t.Errorf("Listen on a live socket: err = %v, want refusal", err)
	}
}

func TestListenRefusesNonSocket(t *testing.T) {
	path := socketPath(t)
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("err = %v, want refusal to remove a regular file", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "x" {
		t.Errorf("regular file was touched: %q, %v", b, err)
	}
}
