package handover

import (
	"context"
	"net/netip"
	"sync"

	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/listdiff"
)

// Saver saves the answered addresses (SaveAnswering) beside the agent's sync instead
// of in it: Save hands the latest list over and returns at once, and Run writes the
// latest list handed over, one write at a time, lists handed over during a write
// folded into the next. With 100,000 addresses a write takes milliseconds, which every
// sync that changed one address spent before it could take the next change
// (docs/performance.md#scale). A crash between a change and its write leaves the file
// one change behind; the next agent answers for it until its first sync, as it would
// for a file written just before the change.
type Saver struct {
	dir  string
	wake chan struct{}

	// mu guards the list last handed over (a copy of it) and its version (seen, when
	// a change told it), whether it is written, and the error of the last write; buf
	// is the writer's own copy.
	mu   sync.Mutex
	next []netip.Addr
	seen uint64
	due  bool
	err  error
	buf  []netip.Addr
}

// NewSaver returns a Saver writing to dir; it writes nothing until Run.
func NewSaver(dir string) *Saver {
	return &Saver{dir: dir, wake: make(chan struct{}, 1)}
}

// Save hands addrs over to be written: the Saver copies what differs from the last
// list. It returns the error of the last write, nil when it succeeded or none was made.
func (s *Saver) Save(addrs []netip.Addr) error { return s.SaveSince(addrs, listdiff.Change{}) }

// SaveSince is Save told where addrs differs from a version of it (the agent's list,
// listdiff.Change): from the version it holds, it copies the change's window without
// comparing the lists.
func (s *Saver) SaveSince(addrs []netip.Addr, c listdiff.Change) error {
	s.mu.Lock()
	s.next = listdiff.Follow(s.next, addrs, listdiff.Since(c, s.seen, s.next, addrs))
	s.seen = c.To
	s.due = true
	err := s.err
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return err
}

// Run writes what Save hands over until ctx ends, and then what is still to write.
func (s *Saver) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			s.write(ctx)
			return
		case <-s.wake:
			s.write(ctx)
		}
	}
}

// write writes the list last handed over, if it is not written yet.
func (s *Saver) write(ctx context.Context) {
	s.mu.Lock()
	due := s.due
	s.buf, s.due = append(s.buf[:0], s.next...), false
	s.mu.Unlock()
	if !due {
		return
	}
	err := SaveAnswering(s.dir, s.buf)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Saving the answered addresses for the next agent", "dir", s.dir)
	}
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}
