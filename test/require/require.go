// Package require holds the preconditions tests share: root privileges and
// binaries on disk. Outside CI a missing precondition skips the test with a clear
// message; with CI set it fails, so CI can never pass by skipping.
package require

import (
	"os"
	"os/exec"
	"testing"
)

// InCI reports whether the CI environment variable is set.
func InCI() bool { return os.Getenv("CI") != "" }

// Unmet skips the test (or fails it in CI) because a precondition does not hold.
func Unmet(t testing.TB, format string, args ...any) {
	t.Helper()
	if InCI() {
		t.Fatalf("precondition not met under CI: "+format, args...)
	}
	t.Skipf("skipping: "+format, args...)
}

// Root makes sure the test runs as root (network namespaces, nftables, raw sockets).
func Root(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Unmet(t, "needs root")
	}
}

// Binary returns the path of an executable found on PATH.
func Binary(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Unmet(t, "needs %q on PATH: %v", name, err)
	}
	return p
}

// File makes sure path exists and returns it.
func File(t testing.TB, path string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		Unmet(t, "needs %s: %v", path, err)
	}
	return path
}
