package handover

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/listdiff"
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

// TestSaver: Save returns at once and keeps no list of the caller's; Run writes the
// last list handed over (also when each was told where it changed: SaveSince), also
// the one handed over just before it stops; a failed write is told by the next Save.
func TestSaver(t *testing.T) {
	dir := t.TempDir()
	s := NewSaver(dir)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	first := []netip.Addr{netip.MustParseAddr("10.225.51.5")}
	if err := s.Save(first); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got, err := LoadAnswering(dir)
		return slices.Equal(got, first), err
	}); err != nil {
		t.Fatalf("the first list was not written: %v", err)
	}
	// Lists told where they changed (SaveSince, as the agent tells them), one address
	// inserted at a time anywhere: the file holds the last.
	var tr listdiff.Tracker
	var list []netip.Addr
	tr.Reset(0)
	for i := range 30 {
		a := netip.AddrFrom4([4]byte{10, 225, 53, byte(i * 37 % 30)})
		j, _ := slices.BinarySearchFunc(list, a, netip.Addr.Compare)
		list = slices.Insert(list, j, a)
		tr.Insert(j)
		if err := s.SaveSince(list, tr.Mark()); err != nil {
			t.Fatal(err)
		}
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got, err := LoadAnswering(dir)
		return slices.Equal(got, list), err
	}); err != nil {
		t.Fatalf("the last list told was not written: %v", err)
	}
	last := []netip.Addr{netip.MustParseAddr("10.225.51.6"), netip.MustParseAddr("2001:db8::6")}
	for i := range 50 { // many lists in a row: the last one counts
		if err := s.Save([]netip.Addr{netip.AddrFrom4([4]byte{10, 225, 52, byte(i)})}); err != nil {
			t.Fatal(err)
		}
	}
	handed := slices.Clone(last)
	if err := s.Save(handed); err != nil {
		t.Fatal(err)
	}
	handed[0] = netip.MustParseAddr("10.225.51.99") // the caller's list is its own again
	cancel()
	<-done
	if got, err := LoadAnswering(dir); err != nil || !slices.Equal(got, last) {
		t.Fatalf("after Run stopped the file holds %v (%v), want %v", got, err, last)
	}

	// A directory that cannot be written: the write fails, and the next Save says so.
	broken := NewSaver(filepath.Join(dir, "missing"))
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go broken.Run(ctx)
	if err := broken.Save(first); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return broken.Save(first) != nil, nil
	}); err != nil {
		t.Fatal("a failed write was never told")
	}
}
