// Package cnitest invokes CNI plugin chains the way a container runtime does (libcni,
// inside a network namespace that plays the Node), with the reference ptp and
// host-local plugins as the primary CNI and juneau chained after them, against a node
// agent socket. The juneau CNI tests use it; so can end-to-end tests.
package cnitest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/loutres/juneau/test/framework"
)

// pluginsModule provides the reference plugins, at framework.CNIPluginsVersion.
const pluginsModule = "github.com/containernetworking/plugins"

// Plugins returns the CNI_PATH directories holding ptp and host-local (built by
// hack/build-cni-plugins.sh, which `make test` runs; run here when they are missing)
// and juneau (the binary under test, framework.JuneauBinary).
func Plugins(t testing.TB) []string {
	t.Helper()
	dir, err := framework.CNIPluginDir()
	if err != nil {
		root, rerr := framework.RepoRoot()
		if rerr != nil {
			t.Fatal(rerr)
		}
		cmd := exec.Command(filepath.Join(root, "hack", "build-cni-plugins.sh"))
		cmd.Dir = root
		if out, berr := cmd.CombinedOutput(); berr != nil {
			t.Fatalf("reference CNI plugins missing (%v) and building them failed: %v\n%s", err, berr, out)
		}
		if dir, err = framework.CNIPluginDir(); err != nil {
			t.Fatal(err)
		}
	}
	return []string{dir, juneauDir(t)}
}

// juneauDir returns a directory holding the juneau binary under the name "juneau" (the
// plugin type libcni looks for).
func juneauDir(t testing.TB) string {
	t.Helper()
	bin := framework.JuneauBinary(t)
	if filepath.Base(bin) == "juneau" {
		return filepath.Dir(bin)
	}
	dir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(dir, "juneau")); err != nil {
		t.Fatalf("link the juneau binary: %v", err)
	}
	return dir
}

var bridgePlugin struct {
	once sync.Once
	dir  string
	err  error
}

// BridgePlugin returns a directory holding the reference bridge plugin, a primary CNI
// juneau refuses to put an ElasticIP on eth0 with. It is built once into
// <cache>/juneau/cni-bridge-<version> from the plugins module's own directory in the
// module cache (with the module's own go.sum, so its dependencies stay out of juneau's
// and of hack/tools/cni's module graphs).
func BridgePlugin(t testing.TB) string {
	t.Helper()
	bridgePlugin.once.Do(func() { bridgePlugin.dir, bridgePlugin.err = buildBridge() })
	if bridgePlugin.err != nil {
		t.Fatalf("building the bridge CNI plugin: %v", bridgePlugin.err)
	}
	return bridgePlugin.dir
}

func buildBridge() (string, error) {
	cniDir, err := cacheLocation()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(filepath.Dir(cniDir), "cni-bridge-"+framework.CNIPluginsVersion)
	if _, err := os.Stat(filepath.Join(dir, "bridge")); err == nil {
		return dir, nil
	}
	modDir, err := moduleDir()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Build beside the target and rename, so parallel test binaries never run a
	// half-written file.
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("go", "build", "-o", tmp+string(filepath.Separator), "./plugins/main/bridge")
	cmd.Dir = modDir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly -buildvcs=false", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build in %s: %w\n%s", modDir, err, out)
	}
	if err := os.Rename(filepath.Join(tmp, "bridge"), filepath.Join(dir, "bridge")); err != nil {
		return "", fmt.Errorf("install bridge into %s: %w", dir, err)
	}
	return dir, nil
}

// cacheLocation is where hack/lib.sh keeps the reference plugins (whether or not they
// exist yet).
func cacheLocation() (string, error) {
	if dir := os.Getenv("JUNEAU_CNI_DIR"); dir != "" {
		return dir, nil
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "juneau", "cni-plugins-"+framework.CNIPluginsVersion), nil
}

// moduleDir downloads the plugins module (if needed) and returns its directory in the
// module cache.
func moduleDir() (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", pluginsModule+"@"+framework.CNIPluginsVersion)
	cmd.Dir = os.TempDir() // outside any module: the version is explicit
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w\n%s", pluginsModule, err, out)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", fmt.Errorf("go mod download %s: %w", pluginsModule, err)
	}
	if info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s", pluginsModule, info.Error)
	}
	return info.Dir, nil
}
