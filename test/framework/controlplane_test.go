package framework

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/loutres/juneau/test/require"
)

// TestStartsAgainOnATakenPort: a port found free but taken before etcd or the API
// server binds it (by another test binary) costs that component one more start on
// another port, not the test.
func TestStartsAgainOnATakenPort(t *testing.T) {
	bins, err := FindBinaries()
	if err != nil {
		require.Unmet(t, "%v", err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	picks := 0
	takenOnce := func() {
		picks = 0
		pickPort = func() (int, error) {
			picks++
			if picks == 1 {
				return taken.Addr().(*net.TCPAddr).Port, nil
			}
			return freePort()
		}
	}
	t.Cleanup(func() { pickPort = freePort })
	dir, err := os.MkdirTemp("", "juneau-cp-")
	if err != nil {
		t.Fatal(err)
	}
	cp := &ControlPlane{Binaries: bins, Dir: dir}
	defer cp.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	takenOnce()
	if err := cp.startEtcd(ctx); err != nil {
		t.Fatalf("etcd did not start: %v", err)
	}
	if picks != 4 {
		t.Errorf("etcd's ports were picked %d times, want 4 (two starts)", picks)
	}
	takenOnce()
	if err := cp.startAPIServer(ctx); err != nil {
		t.Fatalf("kube-apiserver did not start: %v", err)
	}
	if picks != 2 {
		t.Errorf("kube-apiserver's port was picked %d times, want 2 (two starts)", picks)
	}
}
