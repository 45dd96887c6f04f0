package arp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/listdiff"
	"github.com/loutres/juneau/pkg/node/responder"
)

// Gratuitous ARP after the responder starts answering for an address: this many
// replies, this far apart, so that one lost frame, or a late answer from the Node
// that answered before, does not leave a neighbour with the old MAC.
const (
	GratuitousCount    = 3
	GratuitousInterval = time.Second
)

// announcement is the gratuitous ARP still to send for one address.
type announcement struct {
	left int
	next time.Time
}

// SetGratuitous names the addresses to announce with gratuitous ARP when the
// responder starts answering for them (a later SetAddresses that adds them).
// The same list as the last call's changes nothing; a sorted list (the agent's)
// is kept as it is given, copying only what changed, and looked up by binary search.
func (r *Responder) SetGratuitous(addrs []netip.Addr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := listdiff.Of(r.gratuitousGiven, addrs)
	if w.Empty() {
		return
	}
	r.gratuitousGiven = listdiff.Follow(r.gratuitousGiven, addrs, w)
	r.gratuitous = family.Sorted(r.gratuitousGiven)
}

// wantsGratuitous reports whether SetGratuitous named a. r.mu is held.
func (r *Responder) wantsGratuitous(a netip.Addr) bool {
	_, ok := slices.BinarySearchFunc(r.gratuitous, a, netip.Addr.Compare)
	return ok
}

// Gratuitous is the number of gratuitous ARP replies sent.
func (r *Responder) Gratuitous() uint64 { return r.announced.Load() }

// schedule drops the announcements of the addresses no longer owned and adds
// those of the addresses newly owned that SetGratuitous named. r.mu is held.
func (r *Responder) schedule(removed, added []netip.Addr) {
	for _, a := range removed {
		delete(r.pending, a) // no longer ours: nothing more to announce
	}
	scheduled := false
	for _, a := range added {
		if r.wantsGratuitous(a) {
			r.pending[a] = &announcement{left: r.count}
			scheduled = true
		}
	}
	if scheduled {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// announce sends the gratuitous ARP replies that are due until ctx ends (it
// returns nil) or the kernel path's address map failed (broken, nil without a
// kernel path: it returns why, and the socket path takes over with the next
// socket). What is not sent yet stays pending for the next socket.
func (r *Responder) announce(ctx context.Context, conn responder.Conn, ours net.HardwareAddr, broken <-chan struct{}) error {
	logger := klog.FromContext(ctx)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if wait, ok := r.sendDue(logger, conn, ours, time.Now()); ok {
			timer.Reset(wait)
		} else {
			timer.Stop()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
		case <-timer.C:
		case <-broken:
			r.mu.Lock()
			err := r.kernelErr
			r.mu.Unlock()
			// Until the socket path takes over nothing is lost: the kernel path
			// still answers for the addresses it holds.
			r.kernelOff.Store(true)
			return fmt.Errorf("answering ARP in the kernel no more, from user space instead: %w", err)
		}
	}
}

// sendDue sends every announcement due at now and says how long until the next one.
func (r *Responder) sendDue(logger klog.Logger, conn responder.Conn, ours net.HardwareAddr, now time.Time) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var next time.Time
	for a, p := range r.pending {
		if !r.Owns(a) {
			delete(r.pending, a)
			continue
		}
		if p.next.After(now) {
			if next.IsZero() || p.next.Before(next) {
				next = p.next
			}
			continue
		}
		if err := responder.Send(conn, GratuitousReply(ours, a)); err != nil {
			logger.Error(err, "Cannot send gratuitous ARP; retrying", "address", a, "after", r.interval)
		} else {
			if p.left == r.count {
				logger.Info("Sending gratuitous ARP", "address", a, "count", r.count)
			}
			r.announced.Add(1)
			if p.left--; p.left <= 0 {
				delete(r.pending, a)
				continue
			}
		}
		p.next = now.Add(r.interval)
		if next.IsZero() || p.next.Before(next) {
			next = p.next
		}
	}
	if next.IsZero() {
		return 0, false
	}
	return next.Sub(now), true
}
