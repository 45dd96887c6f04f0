package framework

import (
	"fmt"
	"os"
	"path/filepath"
)

// Versions of the control-plane binaries; hack/lib.sh names the same ones.
const (
	KubernetesVersion = "v1.37.2"
	EtcdVersion       = "v3.7.3"
)

// Binaries locates kube-apiserver, kubectl and etcd built by hack/build-control-plane.sh.
type Binaries struct {
	Dir string
}

// FindBinaries returns the cache directory of the control-plane binaries:
// $JUNEAU_BIN_DIR, or the default cache location hack/lib.sh uses.
func FindBinaries() (Binaries, error) {
	dir := os.Getenv("JUNEAU_BIN_DIR")
	if dir == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return Binaries{}, fmt.Errorf("finding the binary cache: %w", err)
			}
			base = filepath.Join(home, ".cache")
		}
		dir = filepath.Join(base, "juneau", "k8s-"+KubernetesVersion+"-etcd-"+EtcdVersion)
	}
	b := Binaries{Dir: dir}
	for _, name := range []string{"kube-apiserver", "kubectl", "etcd"} {
		if _, err := os.Stat(b.path(name)); err != nil {
			return Binaries{}, fmt.Errorf("control-plane binary %s missing (run hack/build-control-plane.sh or make test): %w", name, err)
		}
	}
	return b, nil
}

func (b Binaries) path(name string) string { return filepath.Join(b.Dir, name) }

// Kubectl is the path of the built kubectl; never the system one, which is older.
func (b Binaries) Kubectl() string { return b.path("kubectl") }

// RepoRoot walks up from the working directory to the directory holding go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
