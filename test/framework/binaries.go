package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Versions of the binaries tests use; hack/lib.sh names the same ones.
const (
	KubernetesVersion = "v1.37.2"
	EtcdVersion       = "v3.7.3"
	CNIPluginsVersion = "v1.10.0"
	// FlannelVersion is flanneld's, FlannelCNIVersion that of the containernetworking
	// plugins release whose flannel meta plugin the real cluster runs with it.
	FlannelVersion    = "v0.28.10"
	FlannelCNIVersion = "v0.9.1"
)

// Binaries locates kube-apiserver, kubectl and etcd built by hack/build-control-plane.sh.
type Binaries struct {
	Dir string
}

// FindBinaries returns the cache directory of the control-plane binaries:
// $JUNEAU_BIN_DIR, or the default cache location hack/lib.sh uses.
func FindBinaries() (Binaries, error) {
	dir, err := cacheDir("JUNEAU_BIN_DIR", "kube-"+KubernetesVersion+"-etcd-"+EtcdVersion)
	if err != nil {
		return Binaries{}, err
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

// RepoRootOf is RepoRoot for a test, which fails without it.
func RepoRootOf(t testing.TB) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

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

// cacheDir is $env, or <cache>/juneau/<leaf> as hack/lib.sh computes it.
func cacheDir(env, leaf string) (string, error) {
	if dir := os.Getenv(env); dir != "" {
		return dir, nil
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("finding the binary cache: %w", err)
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "juneau", leaf), nil
}

// CNIPluginDir returns the directory of the reference CNI plugins (ptp, host-local)
// built by hack/build-cni-plugins.sh.
func CNIPluginDir() (string, error) {
	dir, err := cacheDir("JUNEAU_CNI_DIR", "cni-plugins-"+CNIPluginsVersion)
	if err != nil {
		return "", err
	}
	for _, name := range []string{"ptp", "host-local"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("CNI plugin %s missing (run hack/build-cni-plugins.sh or make test): %w", name, err)
		}
	}
	return dir, nil
}

// FlannelDir returns the directory of flanneld, the flannel CNI meta plugin and the
// bridge plugin, built by hack/build-flannel.sh.
func FlannelDir() (string, error) {
	dir, err := cacheDir("JUNEAU_FLANNEL_DIR", "flannel-"+FlannelVersion+"-cni-"+FlannelCNIVersion)
	if err != nil {
		return "", err
	}
	for _, name := range []string{"flanneld", "flannel", "bridge"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("%s missing (run hack/build-flannel.sh): %w", filepath.Join(dir, name), err)
		}
	}
	return dir, nil
}

// Versions of the operators' tools hack/build-ops-tools.sh builds (hack/lib.sh names the
// same ones).
const (
	HelmVersion       = "v3.22.0"
	PrometheusVersion = "v0.316.0"
)

// OpsTool returns the path of helm, prometheus or promtool built by
// hack/build-ops-tools.sh into $JUNEAU_OPS_DIR or the default cache.
func OpsTool(name string) (string, error) {
	dir, err := cacheDir("JUNEAU_OPS_DIR", "ops-helm-"+HelmVersion+"-prometheus-"+PrometheusVersion)
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s missing (run hack/build-ops-tools.sh or make test): %w", name, err)
	}
	return p, nil
}

// KwokVersion is the kwok hack/build-kwok.sh builds (hack/lib.sh names the same).
const KwokVersion = "v0.8.0"

// Kwok returns the path of kwok built by hack/build-kwok.sh into $JUNEAU_KWOK_DIR or the
// default cache.
func Kwok() (string, error) {
	dir, err := cacheDir("JUNEAU_KWOK_DIR", "kwok-"+KwokVersion)
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "kwok")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("kwok missing (run hack/build-kwok.sh or make scale): %w", err)
	}
	return p, nil
}
