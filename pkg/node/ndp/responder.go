// Package ndp answers IPv6 neighbor solicitations for the IPv6 ElasticIPs this
// node serves, beside the ARP replier (pkg/node/arp) on the same external
// interface (docs/arp.md, "IPv6: Neighbor Discovery").
//
// The kernel never answers for ElasticIPs: they are no local address and the
// external interface runs with proxy_ndp=0. A packet socket on the interface
// receives neighbor solicitations through a kernel filter, both those sent
// to the node's MAC (a neighbour re-checking an address it knows: they are
// not for the node's own IPv6 stack, so an ICMPv6 socket would never see
// them) and those sent to the solicited-node multicast group of an owned
// address, whose Ethernet group the socket joins. It answers with the
// interface's MAC and sends nothing unsolicited.
package ndp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mdlayher/ndp"
	"github.com/mdlayher/packet"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// Backoff between attempts to (re)open the socket.
const (
	minRetry = 100 * time.Millisecond
	maxRetry = 5 * time.Second
)

// Responder answers neighbor solicitations on one interface for a set of
// IPv6 addresses that can change at any time.
type Responder struct {
	iface string
	owned atomic.Pointer[map[netip.Addr]struct{}]

	// mu guards the socket's multicast memberships: the groups joined and
	// the open socket (nil while none is).
	mu     sync.Mutex
	conn   *packet.Conn
	ifidx  int
	joined map[[macLen]byte]struct{}

	requests atomic.Uint64
	replies  atomic.Uint64
}

// NewResponder returns a responder for the named interface owning no
// address. It opens nothing until Run.
func NewResponder(iface string) *Responder {
	r := &Responder{iface: iface, joined: map[[macLen]byte]struct{}{}}
	r.owned.Store(&map[netip.Addr]struct{}{})
	return r
}

// SetAddresses replaces the set of owned addresses; only IPv6 addresses
// count (IPv4 ones are the ARP replier's). Safe to call at any time, also
// while Run is running: the socket joins and leaves the addresses'
// solicited-node groups.
func (r *Responder) SetAddresses(addrs []netip.Addr) {
	m := make(map[netip.Addr]struct{}, len(addrs))
	for _, a := range addrs {
		if a.Is6() && !a.Is4In6() {
			m[a.WithZone("")] = struct{}{}
		}
	}
	r.owned.Store(&m)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.syncGroups(); err != nil {
		// The socket is broken; Run reopens it and joins again.
		klog.Background().Error(err, "Joining solicited-node groups", "interface", r.iface)
	}
}

// Owns reports whether the responder answers for a.
func (r *Responder) Owns(a netip.Addr) bool {
	_, ok := (*r.owned.Load())[a]
	return ok
}

// Requests is the number of neighbor solicitations received (for any
// address).
func (r *Responder) Requests() uint64 { return r.requests.Load() }

// Replies is the number of advertisements sent.
func (r *Responder) Replies() uint64 { return r.replies.Load() }

// groups are the Ethernet groups of the owned addresses' solicited-node
// multicast addresses.
func (r *Responder) groups() map[[macLen]byte]struct{} {
	out := map[[macLen]byte]struct{}{}
	for a := range *r.owned.Load() {
		g, err := ndp.SolicitedNodeMulticast(a)
		if err == nil {
			out[[macLen]byte(groupMAC(g))] = struct{}{}
		}
	}
	return out
}

// syncGroups makes the open socket's memberships match the owned addresses.
// r.mu is held.
func (r *Responder) syncGroups() error {
	if r.conn == nil {
		return nil
	}
	want := r.groups()
	var errs []error
	for g := range r.joined {
		if _, ok := want[g]; !ok {
			errs = append(errs, r.membership(unix.PACKET_DROP_MEMBERSHIP, g))
			delete(r.joined, g)
		}
	}
	for g := range want {
		if _, ok := r.joined[g]; !ok {
			if err := r.membership(unix.PACKET_ADD_MEMBERSHIP, g); err != nil {
				errs = append(errs, err)
				continue
			}
			r.joined[g] = struct{}{}
		}
	}
	return errors.Join(errs...)
}

func (r *Responder) membership(op int, group [macLen]byte) error {
	raw, err := r.conn.SyscallConn()
	if err != nil {
		return err
	}
	mreq := &unix.PacketMreq{Ifindex: int32(r.ifidx), Type: unix.PACKET_MR_MULTICAST, Alen: macLen}
	copy(mreq.Address[:], group[:])
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptPacketMreq(int(fd), unix.SOL_PACKET, op, mreq)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("%s group %s: %w", map[int]string{unix.PACKET_ADD_MEMBERSHIP: "join", unix.PACKET_DROP_MEMBERSHIP: "leave"}[op],
			net.HardwareAddr(group[:]), serr)
	}
	return nil
}

// Run answers solicitations until ctx ends, then closes its socket and
// returns nil. If the interface is missing or the socket fails it opens it
// again, backing off from minRetry to maxRetry.
func (r *Responder) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("interface", r.iface)
	backoff := wait.Backoff{Duration: minRetry, Factor: 2, Cap: maxRetry, Steps: math.MaxInt32}
	_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		err := r.serveOnce(ctx)
		if ctx.Err() != nil {
			return true, nil
		}
		logger.Error(err, "NDP responder stopped; opening its socket again")
		return false, nil
	})
	return nil
}

// nsFilter passes IPv6 neighbor solicitations that this host did not send,
// without extension headers, with hop limit 255, and drops everything else
// in the kernel, before it wakes the responder.
var nsFilter = []bpf.Instruction{
	bpf.LoadExtension{Num: bpf.ExtType},
	bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.PACKET_OUTGOING, SkipTrue: 9},
	bpf.LoadAbsolute{Off: offEthType, Size: 2},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: etherTypeIPv6, SkipTrue: 7},
	bpf.LoadAbsolute{Off: offNextHdr, Size: 1},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: protoICMPv6, SkipTrue: 5},
	bpf.LoadAbsolute{Off: offHopLimit, Size: 1},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: hopLimitNDP, SkipTrue: 3},
	bpf.LoadAbsolute{Off: offICMP, Size: 1},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: typeNS, SkipTrue: 1},
	bpf.RetConstant{Val: maxFrame},
	bpf.RetConstant{Val: 0},
}

// maxFrame bounds what is read of a frame: a solicitation with its options
// is far shorter.
const maxFrame = 1514

// serveOnce opens the socket, joins the groups and answers until ctx ends or
// the socket fails.
func (r *Responder) serveOnce(ctx context.Context) error {
	ifi, err := net.InterfaceByName(r.iface)
	if err != nil {
		return fmt.Errorf("interface %s: %w", r.iface, err)
	}
	if len(ifi.HardwareAddr) != macLen {
		return fmt.Errorf("interface %s has no Ethernet address", r.iface)
	}
	prog, err := bpf.Assemble(nsFilter)
	if err != nil {
		return err
	}
	// The filter is attached before the socket is bound: no frame gets past
	// without it.
	conn, err := packet.Listen(ifi, packet.Raw, unix.ETH_P_IPV6, &packet.Config{Filter: prog})
	if err != nil {
		return fmt.Errorf("packet socket on %s: %w", r.iface, err)
	}
	r.mu.Lock()
	r.conn, r.ifidx, r.joined = conn, ifi.Index, map[[macLen]byte]struct{}{}
	err = r.syncGroups()
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.conn = nil
		r.mu.Unlock()
		conn.Close() // leaves every group
	}()
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	return r.serve(ctx, conn, ifi.HardwareAddr)
}

// frameConn is the part of a packet socket the responder uses.
type frameConn interface {
	ReadFrom(b []byte) (int, net.Addr, error)
	WriteTo(b []byte, addr net.Addr) (int, error)
}

func (r *Responder) serve(ctx context.Context, conn frameConn, ours net.HardwareAddr) error {
	logger := klog.FromContext(ctx).WithValues("interface", r.iface)
	buf := make([]byte, maxFrame)
	owns := r.Owns
	for {
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("read: %w", err)
		}
		reply, reason := Decide(buf[:n], ours, owns)
		if reason != DropMalformed && reason != DropNotNS && reason != DropOwnFrame {
			r.requests.Add(1)
		}
		if reason != Answer {
			if v := logger.V(5); v.Enabled() {
				v.Info("Neighbor solicitation not answered", "reason", reason)
			}
			continue
		}
		to := net.HardwareAddr(reply[offEthDst : offEthDst+macLen])
		if _, err := conn.WriteTo(reply, &packet.Addr{HardwareAddr: to}); err != nil {
			logger.Error(err, "Cannot send neighbor advertisement", "to", to.String())
			continue
		}
		r.replies.Add(1)
		if v := logger.V(4); v.Enabled() {
			v.Info("Answered neighbor solicitation", "address", netip.AddrFrom16([16]byte(reply[offIPSrc:])),
				"requester", netip.AddrFrom16([16]byte(reply[offIPDst:])))
		}
	}
}
