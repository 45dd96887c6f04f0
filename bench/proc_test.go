package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

func TestStatusKB(t *testing.T) {
	status := []byte("Name:\tjuneau\nVmPeak:\t  900 kB\nVmHWM:\t   61440 kB\nVmRSS:\t   51200 kB\nThreads:\t9\n")
	if got, err := statusKB(status, "VmRSS"); err != nil || got != 50<<20 {
		t.Errorf("VmRSS = %d, %v; want 50 MiB", got, err)
	}
	if got, err := statusKB(status, "VmHWM"); err != nil || got != 60<<20 {
		t.Errorf("VmHWM = %d, %v; want 60 MiB", got, err)
	}
	for _, bad := range []string{"Name:\tx\n", "VmRSS:\t12 MB\n", "VmRSS:\tlots kB\n"} {
		if _, err := statusKB([]byte(bad), "VmRSS"); err == nil {
			t.Errorf("statusKB(%q) succeeded", bad)
		}
	}
}

func TestParseCPU(t *testing.T) {
	// A command name with spaces and a parenthesis must not shift the fields.
	stat := []byte("4242 (juneau (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 150 0 0 20 0 9 0 100 0 0")
	if got, err := parseCPU(stat); err != nil || got != 4*time.Second {
		t.Errorf("parseCPU = %v, %v; want 4s (250+150 ticks)", got, err)
	}
	if _, err := parseCPU([]byte("4242 (short) S 1")); err == nil {
		t.Error("parseCPU of a short line succeeded")
	}
}

func TestReadUsageOfThisProcess(t *testing.T) {
	u, err := readUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.RSS < 1<<20 || u.PeakRSS < u.RSS {
		t.Errorf("RSS %d bytes, peak %d: implausible for a Go test binary", u.RSS, u.PeakRSS)
	}
}

func TestChildProcess(t *testing.T) {
	// GNU sleep adds up its arguments: the tiny second one makes the command line unique.
	marker := fmt.Sprintf("0.%09d", time.Now().UnixNano()%1e9)
	cmd := exec.Command("sleep", "30", marker)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Under load /proc may show the child's new command line a moment after Start.
	var pid int
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) {
			var err error
			pid, err = childProcess("30", marker)
			return err == nil, nil
		})
	if err != nil || pid != cmd.Process.Pid {
		t.Fatalf("childProcess = %d, %v; want %d", pid, err, cmd.Process.Pid)
	}
	if _, err := childProcess(marker, "no-such-argument"); err == nil {
		t.Error("childProcess matched a missing argument")
	}
	// A process that is not our child never matches, whatever its arguments.
	grandchild := exec.Command("sh", "-c", "sleep 30 "+marker+" & wait")
	if err := grandchild.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = grandchild.Process.Kill(); _ = grandchild.Wait() })
	if pid, err := childProcess("30", marker); err != nil || pid != cmd.Process.Pid {
		t.Errorf("with a grandchild of the same arguments: %d, %v; want only the child %d", pid, err, cmd.Process.Pid)
	}
}

func TestParsePPID(t *testing.T) {
	if got, err := parsePPID([]byte("4242 (a) b) S 17 4242 4242 0")); err != nil || got != 17 {
		t.Errorf("parsePPID = %d, %v; want 17", got, err)
	}
	if _, err := parsePPID([]byte("4242 (x) S")); err == nil {
		t.Error("parsePPID of a short line succeeded")
	}
}
