package arp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"k8s.io/klog/v2"

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
// The same list as the last call's changes nothing and builds no set.
func (r *Responder) SetGratuitous(addrs []netip.Addr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if slices.Equal(r.gratuitousGiven, addrs) {
		return
	}
	r.gratuitousGiven = slices.Clone(addrs)
	r.gratuitous = family.Addresses(addrs)
}

// Gratuitous is the number of gratuitous ARP replies sent.
func (r *Responder) Gratuitous() uint64 { return r.announced.Load() }

// schedule drops the announcements of the addresses no longer owned and adds
// those of the addresses newly owned that SetGratuitous named. r.mu is held.
func (r *Responder) schedule(old, owned map[netip.Addr]struct{}) {
	for a := range r.pending {
		if _, ok := owned[a]; !ok {
			delete(r.pending, a) // no longer ours: nothing more to announce
		}
	}
	added := false
	for a := range owned {
		_, had := old[a]
		_, wanted := r.gratuitous[a]
		if !had && wanted {
			r.pending[a] = &announcement{left: r.count}
			added = true
		}
	}
	if added {
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
	owned := r.Owned()
	var next time.Time
	for a, p := range r.pending {
		if _, ok := owned[a]; !ok {
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
