package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat (USER_HZ, 100 on Linux).
const userHZ = 100

// procUsage is what /proc says about a process at one moment.
type procUsage struct {
	RSS     int64         // resident set size (VmRSS), bytes
	PeakRSS int64         // largest RSS so far (VmHWM), bytes
	CPU     time.Duration // user + system time used so far
}

// readUsage reads VmRSS and the CPU time of pid.
func readUsage(pid int) (procUsage, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procUsage{}, err
	}
	rss, err := statusKB(status, "VmRSS")
	if err != nil {
		return procUsage{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	peak, err := statusKB(status, "VmHWM")
	if err != nil {
		return procUsage{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procUsage{}, err
	}
	cpu, err := parseCPU(stat)
	if err != nil {
		return procUsage{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	return procUsage{RSS: rss, PeakRSS: peak, CPU: cpu}, nil
}

// statusKB reads a field such as "VmRSS:   1234 kB" of /proc/<pid>/status, in bytes.
func statusKB(status []byte, field string) (int64, error) {
	for line := range bytes.Lines(status) {
		rest, ok := bytes.CutPrefix(line, []byte(field+":"))
		if !ok {
			continue
		}
		f := strings.Fields(string(rest))
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("unexpected %s line %q", field, line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		return kb * 1024, err
	}
	return 0, fmt.Errorf("no %s line", field)
}

// parseCPU sums utime and stime (fields 14 and 15) of /proc/<pid>/stat. The command
// name (field 2) may hold spaces and parentheses, so fields are counted after its
// closing parenthesis.
func parseCPU(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed stat %q", stat)
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state): utime is field 14 → f[11], stime field 15 → f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("short stat %q", stat)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("stat times %q %q", f[11], f[12])
	}
	return time.Duration(ut+st) * time.Second / userHZ, nil
}

// childProcess returns the pid of the one child of this process whose command line
// holds every string of want as an argument; an error when there is none or more than
// one. Children are the components the benchmark (or a harness it uses) started.
func childProcess(want ...string) (int, error) {
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return 0, err
	}
	self := os.Getpid()
	var found []int
	for _, dir := range dirs {
		stat, err1 := os.ReadFile(filepath.Join(dir, "stat"))
		cmdline, err2 := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err1 != nil || err2 != nil {
			continue // gone meanwhile
		}
		if ppid, err := parsePPID(stat); err != nil || ppid != self {
			continue
		}
		if hasArgs(strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"), want) {
			pid, _ := strconv.Atoi(filepath.Base(dir))
			found = append(found, pid)
		}
	}
	switch len(found) {
	case 0:
		return 0, fmt.Errorf("no child process with arguments %q", want)
	case 1:
		return found[0], nil
	}
	return 0, fmt.Errorf("%d child processes with arguments %q: %v", len(found), want, found)
}

// parsePPID reads the parent pid (field 4) of /proc/<pid>/stat.
func parsePPID(stat []byte) (int, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed stat %q", stat)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 2 {
		return 0, fmt.Errorf("short stat %q", stat)
	}
	return strconv.Atoi(f[1])
}

func hasArgs(args, want []string) bool {
	for _, w := range want {
		ok := false
		for _, a := range args {
			if a == w {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
