// Package arp answers ARP requests for the ElasticIPs this node serves.
//
// The kernel never answers for ElasticIPs (they are no local address, and the
// external interface runs with arp_ignore=1, arp_announce=2, proxy_arp=0), so
// a raw-socket responder per external interface answers requests for the
// owned addresses with the interface's MAC. It sends nothing unsolicited: no
// gratuitous ARP, so after a move upstream caches keep the old MAC until
// they expire.
package arp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mdlayher/packet"
	"k8s.io/klog/v2"
)

// etherTypeARP is the EtherType the packet socket is bound to.
const etherTypeARP = 0x0806

// Backoff between attempts to (re)open the socket, e.g. while the interface
// does not exist yet.
const (
	minRetry = 100 * time.Millisecond
	maxRetry = 5 * time.Second
)

// Responder answers ARP requests on one interface for a set of addresses that
// can change at any time.
type Responder struct {
	iface string
	owned atomic.Pointer[map[netip.Addr]struct{}]

	requests atomic.Uint64
	replies  atomic.Uint64
}

// NewResponder returns a responder for the named interface owning no
// address. It opens nothing until Run.
func NewResponder(iface string) *Responder {
	r := &Responder{iface: iface}
	r.owned.Store(&map[netip.Addr]struct{}{})
	return r
}

// SetAddresses replaces the set of owned addresses; only IPv4 addresses
// count. Safe to call at any time, also while Run is running.
func (r *Responder) SetAddresses(addrs []netip.Addr) {
	m := make(map[netip.Addr]struct{}, len(addrs))
	for _, a := range addrs {
		if a = a.Unmap(); a.Is4() {
			m[a] = struct{}{}
		}
	}
	r.owned.Store(&m)
}

// Owns reports whether the responder answers for a.
func (r *Responder) Owns(a netip.Addr) bool {
	_, ok := (*r.owned.Load())[a.Unmap()]
	return ok
}

// Requests is the number of ARP requests received (for any address).
func (r *Responder) Requests() uint64 { return r.requests.Load() }

// Replies is the number of replies sent.
func (r *Responder) Replies() uint64 { return r.replies.Load() }

// Run answers requests until ctx ends, then closes its socket and returns
// nil. If the interface is missing or the socket fails it retries with
// backoff, so the responder survives the interface going away and back.
func (r *Responder) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("interface", r.iface)
	retry := minRetry
	for {
		err := r.serveOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		logger.Error(err, "ARP responder stopped; retrying", "after", retry)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retry):
		}
		retry = min(2*retry, maxRetry)
	}
}

// serveOnce opens the socket and answers until ctx ends or the socket fails.
func (r *Responder) serveOnce(ctx context.Context) error {
	ifi, err := net.InterfaceByName(r.iface)
	if err != nil {
		return fmt.Errorf("interface %s: %w", r.iface, err)
	}
	// A packet socket bound to the ARP EtherType; unlike arp.Dial it does not
	// need an IPv4 address on the interface.
	conn, err := packet.Listen(ifi, packet.Raw, etherTypeARP, nil)
	if err != nil {
		return fmt.Errorf("packet socket on %s: %w", r.iface, err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // unblocks the read below when ctx ends
		defer wg.Done()
		select {
		case <-ctx.Done():
		case <-stop:
		}
		conn.Close()
	}()
	defer func() {
		close(stop)
		wg.Wait()
	}()
	return r.serve(ctx, conn, ifi.HardwareAddr)
}

// frameConn is the part of a packet socket the responder uses.
type frameConn interface {
	ReadFrom(b []byte) (int, net.Addr, error)
	WriteTo(b []byte, addr net.Addr) (int, error)
}

func (r *Responder) serve(ctx context.Context, conn frameConn, ours net.HardwareAddr) error {
	logger := klog.FromContext(ctx).WithValues("interface", r.iface)
	buf := make([]byte, 1514)
	for {
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		reply, reason := Decide(buf[:n], ours, r.Owns)
		if reason != DropMalformed && reason != DropNotEthernetV4 && reason != DropNotRequest && reason != DropOwnFrame {
			r.requests.Add(1)
		}
		if reply == nil {
			continue
		}
		frame, err := marshalReply(reply)
		if err != nil {
			logger.Error(err, "Cannot build ARP reply")
			continue
		}
		if _, err := conn.WriteTo(frame, &packet.Addr{HardwareAddr: reply.To}); err != nil {
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			logger.Error(err, "Cannot send ARP reply", "to", reply.Packet.TargetIP)
			continue
		}
		r.replies.Add(1)
		logger.V(4).Info("Answered ARP request", "address", reply.Packet.SenderIP, "requester", reply.Packet.TargetIP)
	}
}
