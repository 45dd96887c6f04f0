package framework

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/test/require"
)

// shared is the one control plane of a test package; see Main and Shared.
var shared struct {
	once sync.Once
	cp   *ControlPlane
	err  error
}

// Main runs a package's tests and stops the shared control plane afterwards. Use it from
// TestMain: func TestMain(m *testing.M) { framework.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	shared.cp.Stop()
	RemoveBuiltBinary()
	os.Exit(code)
}

// Shared returns the package's control plane, starting it on first use. Several tests
// share it; each should work in its own namespace (see NewNamespace). Missing binaries
// skip the test outside CI and fail it under CI.
func Shared(t testing.TB) *ControlPlane {
	t.Helper()
	shared.once.Do(func() {
		if _, err := FindBinaries(); err != nil {
			shared.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		shared.cp, shared.err = Start(ctx)
	})
	if shared.err != nil {
		if _, err := FindBinaries(); err != nil {
			require.Unmet(t, "%v", err)
		}
		t.Fatalf("starting the control plane: %v", shared.err)
	}
	return shared.cp
}

// NewNamespace creates a namespace with a random suffix; it is deleted when the test ends
// (there is no namespace controller here, so its objects stay until the control plane stops).
func (cp *ControlPlane) NewNamespace(t testing.TB, prefix string) string {
	t.Helper()
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("%s-%s", prefix, hex.EncodeToString(b))
	ctx := context.Background()
	if _, err := cp.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cp.Kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}
