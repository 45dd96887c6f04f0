// Package handover lets two node agents of one Node run side by side, as a DaemonSet
// rolling update with maxSurge starts the new agent before it stops the old one, and
// lets an agent that restarts after a crash answer ARP before it hears from the API
// server (docs/operations.md#restarts-and-rollouts).
//
//   - The datapath lock: an exclusive flock(2) on a file in the agent's state directory
//     (a host directory, /run/juneau). Only its holder writes the nftables table, the
//     status conditions and readiness gates, and serves the CNI socket; the kernel
//     releases it when the holder exits, crashed or not. An agent that finds it held
//     stands by: it answers ARP for what its caches say this Node serves (answering
//     twice, with the same interface's MAC, is harmless) and takes the lock as soon as
//     the old agent is gone.
//   - The answered addresses: the holder writes the addresses it answers ARP for to a
//     file next to the lock after every change; a starting agent answers for them at
//     once, before its informers have synced. They match the NAT rules the kernel kept
//     (the old agent wrote both), and the first sync from the caches replaces them.
package handover

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"
)

// File names inside the state directory.
const (
	LockFile      = "agent.lock"
	AnsweringFile = "arp-answering"
)

// PollInterval is how often a standing-by agent tries the lock.
const PollInterval = 50 * time.Millisecond

// Lock is the datapath lock of one Node.
type Lock struct {
	path string
	f    *os.File
	held atomic.Bool
}

// NewLock returns the lock kept in dir; it opens nothing until TryAcquire.
func NewLock(dir string) *Lock { return &Lock{path: filepath.Join(dir, LockFile)} }

// Path is the lock file.
func (l *Lock) Path() string { return l.path }

// Held reports whether this process holds the lock.
func (l *Lock) Held() bool { return l.held.Load() }

// TryAcquire takes the lock if it is free and reports whether this process holds it.
// The lock is kept until the process exits.
func (l *Lock) TryAcquire() (bool, error) {
	if l.held.Load() {
		return true, nil
	}
	if l.f == nil {
		if err := os.MkdirAll(filepath.Dir(l.path), 0o750); err != nil {
			return false, fmt.Errorf("state directory of %s: %w", l.path, err)
		}
		f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return false, fmt.Errorf("open lock %s: %w", l.path, err)
		}
		l.f = f
	}
	err := unix.Flock(int(l.f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lock %s: %w", l.path, err)
	}
	l.held.Store(true)
	return true, nil
}

// Acquire waits until this process holds the lock or ctx ends.
func (l *Lock) Acquire(ctx context.Context) error {
	return wait.PollUntilContextCancel(ctx, PollInterval, true, func(context.Context) (bool, error) {
		return l.TryAcquire()
	})
}

// SaveAnswering writes the addresses answered for to dir, replacing the file atomically.
func SaveAnswering(dir string, addrs []netip.Addr) error {
	b := make([]byte, 0, 16*len(addrs))
	for _, a := range addrs {
		b = append(a.AppendTo(b), '\n')
	}
	path := filepath.Join(dir, AnsweringFile)
	tmp, err := os.CreateTemp(dir, "."+AnsweringFile+"-*")
	if err != nil {
		return fmt.Errorf("save answered addresses: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("save answered addresses: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save answered addresses: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("save answered addresses: %w", err)
	}
	return nil
}

// LoadAnswering reads the addresses a previous agent answered for; none when there is no
// file. Lines that are no address are skipped.
func LoadAnswering(dir string) ([]netip.Addr, error) {
	data, err := os.ReadFile(filepath.Join(dir, AnsweringFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read answered addresses: %w", err)
	}
	var out []netip.Addr
	for _, line := range strings.Split(string(data), "\n") {
		if a, err := netip.ParseAddr(strings.TrimSpace(line)); err == nil {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out), nil
}
