package cnitest

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"

	"github.com/loutres/juneau/pkg/node/cniserver"
)

// FakeAgent stands in for the node agent: it answers the plugin from a table the test
// fills and records what the plugin reports. It implements cniserver.Source and
// cniserver.Observer.
type FakeAgent struct {
	// Socket is where the agent listens.
	Socket string

	stop func()

	mu        sync.Mutex
	nics      map[string][]cniserver.Interface
	calls     map[string]int
	plumbed   []cniserver.Plumbing
	unplumbed []cniserver.Plumbing
}

var (
	_ cniserver.Source   = (*FakeAgent)(nil)
	_ cniserver.Observer = (*FakeAgent)(nil)
)

// StartFakeAgent serves a FakeAgent through a real cniserver.Server on a fresh socket
// until the test ends.
func StartFakeAgent(t testing.TB) *FakeAgent {
	t.Helper()
	dir, err := os.MkdirTemp("", "jncni") // short: sun_path holds 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	a := &FakeAgent{Socket: filepath.Join(dir, "cni.sock"), nics: map[string][]cniserver.Interface{}, calls: map[string]int{}}

	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- cniserver.New(a, cniserver.WithObserver(a)).Run(ctx, a.Socket) }()
	var once sync.Once
	a.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-errc; err != nil {
				t.Errorf("fake agent: %v", err)
			}
		})
	}
	t.Cleanup(a.stop)
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, err := os.Stat(a.Socket)
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("fake agent never listened on %s: %v", a.Socket, err)
	}
	return a
}

// Stop stops serving and removes the socket, as when the node agent is down.
func (a *FakeAgent) Stop() { a.stop() }

// Set makes the agent answer nics for the Pod.
func (a *FakeAgent) Set(namespace, pod string, nics ...cniserver.Interface) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.nics[namespace+"/"+pod] = nics
}

// Calls is how often the plugin asked about the Pod.
func (a *FakeAgent) Calls(namespace, pod string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls[namespace+"/"+pod]
}

// Reports returns what the plugin reported as plumbed and unplumbed.
func (a *FakeAgent) Reports() (plumbed, unplumbed []cniserver.Plumbing) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]cniserver.Plumbing(nil), a.plumbed...), append([]cniserver.Plumbing(nil), a.unplumbed...)
}

// DirectInterfaces implements cniserver.Source.
func (a *FakeAgent) DirectInterfaces(namespace, pod string, _ types.UID) ([]cniserver.Interface, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls[namespace+"/"+pod]++
	return append([]cniserver.Interface(nil), a.nics[namespace+"/"+pod]...), nil
}

// Plumbed implements cniserver.Observer.
func (a *FakeAgent) Plumbed(_ context.Context, p cniserver.Plumbing) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.plumbed = append(a.plumbed, p)
	return nil
}

// Unplumbed implements cniserver.Observer.
func (a *FakeAgent) Unplumbed(_ context.Context, p cniserver.Plumbing) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.unplumbed = append(a.unplumbed, p)
	return nil
}
