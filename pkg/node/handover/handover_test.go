package handover

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Two agents of one Node: the second stands by until the first lets go (flock locks
// belong to the open file, so two Locks of one process exclude each other as two
// processes do).
func TestLockExcludesASecondHolder(t *testing.T) {
	dir := t.TempDir()
	first, second := NewLock(dir), NewLock(dir)
	if ok, err := first.TryAcquire(); err != nil || !ok {
		t.Fatalf("first agent: held=%v err=%v", ok, err)
	}
	if ok, err := second.TryAcquire(); err != nil || ok {
		t.Fatalf("second agent took a held lock: held=%v err=%v", ok, err)
	}
	if second.Held() {
		t.Fatal("second agent says it holds the lock")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() { got <- second.Acquire(ctx) }()
	select {
	case err := <-got:
		t.Fatalf("second agent acquired while the first holds the lock: %v", err)
	case <-time.After(3 * PollInterval):
	}
	first.f.Close() // the first agent exits: the kernel releases its lock
	if err := <-got; err != nil {
		t.Fatalf("second agent did not take over: %v", err)
	}
	if !second.Held() {
		t.Fatal("second agent does not hold the lock after Acquire")
	}
}

func TestAcquireEndsWithContext(t *testing.T) {
	dir := t.TempDir()
	first, second := NewLock(dir), NewLock(dir)
	if ok, _ := first.TryAcquire(); !ok {
		t.Fatal("first agent could not lock")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := second.Acquire(ctx); err == nil {
		t.Fatal("Acquire returned nil on a cancelled context while the lock is held")
	}
}

func TestAnsweringRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if got, err := LoadAnswering(dir); err != nil || got != nil {
		t.Fatalf("no file: got %v, %v", got, err)
	}
	want := []netip.Addr{netip.MustParseAddr("10.225.51.10"), netip.MustParseAddr("10.225.51.20")}
	if err := SaveAnswering(dir, []netip.Addr{want[1], want[0], want[1]}); err != nil {
		t.Fatal(err)
	}
	got, err := LoadAnswering(dir)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %v, %v; want %v", got, err, want)
	}
	if err := SaveAnswering(dir, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := LoadAnswering(dir); err != nil || len(got) != 0 {
		t.Fatalf("after saving none: got %v, %v", got, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	// A damaged file costs the lines that are no address, nothing else.
	if err := os.WriteFile(filepath.Join(dir, AnsweringFile), []byte("garbage\n10.225.51.10\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := LoadAnswering(dir); err != nil || !slices.Equal(got, want[:1]) {
		t.Fatalf("damaged file: got %v, %v", got, err)
	}
}
