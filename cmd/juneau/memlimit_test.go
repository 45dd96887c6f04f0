package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/loutres/juneau/test/require"
)

// roleChild, when set, makes the test binary run a role that prints the Go runtime's
// memory limit instead of the tests (TestRoleMemoryLimit starts it in a cgroup).
const roleChild = "JUNEAU_TEST_ROLE_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(roleChild) != "" {
		cmd := &cobra.Command{RunE: role(func(context.Context) error {
			fmt.Println(debug.SetMemoryLimit(-1))
			return nil
		})}
		cmd.SetArgs(nil)
		if err := cmd.ExecuteContext(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestRoleMemoryLimit: a role started in a container's cgroup with a memory limit runs
// with GOMEMLIMIT at 90% of it; GOMEMLIMIT in the environment wins.
func TestRoleMemoryLimit(t *testing.T) {
	require.Root(t)
	limit := 256 << 20
	cg := memoryCgroup(t, limit)
	run := func(env ...string) int64 {
		t.Helper()
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		c := exec.Command("sh", "-c", `echo $$ > "$0" && exec "$1"`, filepath.Join(cg, "cgroup.procs"), self)
		c.Env = append(os.Environ(), append(env, roleChild+"=1")...)
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		got, err := strconv.ParseInt(lines[len(lines)-1], 10, 64)
		if err != nil {
			t.Fatalf("no limit printed: %s", out)
		}
		return got
	}
	if got, want := run(), int64(float64(limit)*memoryLimitRatio); got != want {
		t.Errorf("GOMEMLIMIT %d, want %d (%.0f%% of the cgroup's %d)", got, want, memoryLimitRatio*100, limit)
	}
	if got := run("GOMEMLIMIT=100MiB"); got != 100<<20 {
		t.Errorf("GOMEMLIMIT %d with GOMEMLIMIT=100MiB set, want %d", got, 100<<20)
	}
}

// memoryCgroup makes a cgroup limited to limit bytes of memory (cgroup v2, or v1's
// memory hierarchy), removed when the test ends.
func memoryCgroup(t *testing.T, limit int) string {
	t.Helper()
	name := fmt.Sprintf("juneau-test-%d", os.Getpid())
	dir, file := filepath.Join("/sys/fs/cgroup", name), "memory.max"
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
		dir, file = filepath.Join("/sys/fs/cgroup/memory", name), "memory.limit_in_bytes"
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		require.Unmet(t, "cannot make a memory cgroup: %v", err)
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Errorf("removing cgroup %s: %v", dir, err)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, file), []byte(strconv.Itoa(limit)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
