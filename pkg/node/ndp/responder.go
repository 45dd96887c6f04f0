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
// interface's MAC and sends nothing unsolicited. The socket, its reopening and
// its read loop are the responder skeleton's (pkg/node/responder).
package ndp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/mdlayher/ndp"
	"github.com/mdlayher/packet"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/node/responder"
)

// core is the responder skeleton, embedded under a name of this package: its
// methods are the Responder's, the field is not exported.
type core = responder.Responder

// Responder answers neighbor solicitations on one interface for a set of
// IPv6 addresses that can change at any time.
type Responder struct {
	*core

	// mu guards the socket's multicast memberships: the groups joined and
	// the open socket (nil while none is), and how many owned addresses each
	// group has (wanted).
	mu     sync.Mutex
	conn   *packet.Conn
	ifidx  int
	joined map[[macLen]byte]struct{}
	wanted map[[macLen]byte]int
	// allMulti: the open socket takes every multicast frame instead of joining
	// groups one by one (maxGroups).
	allMulti bool
}

// maxGroups is the most solicited-node groups the socket joins one by one. Each join
// walks the socket's list of memberships (net/packet's packet_mc_add), so joining n
// groups costs n²: 20,000 took 3.5 s, and one more 5 ms. Past it the socket takes
// every multicast frame of the interface (PACKET_MR_ALLMULTI), of which its filter
// keeps the neighbor solicitations; it joins groups one by one again once they are
// half as many (docs/performance.md#scale). A variable for the tests.
var maxGroups = 1024

// drops are the drop reasons (and failed sends) as the counters count them.
var drops = [...]responder.Drop{
	{Reason: DropMalformed, Label: "malformed"},
	{Reason: DropNotNS, Label: "not_ns"},
	{Reason: DropHopLimit, Label: "hop_limit", Request: true},
	{Reason: DropBadChecksum, Label: "bad_checksum", Request: true},
	{Reason: DropOwnFrame, Label: "own_frame"},
	{Reason: DropNotForUs, Label: "not_for_us", Request: true},
	{Reason: DropBadDest, Label: "bad_destination", Request: true},
	{Reason: DropBadSender, Label: "bad_sender", Request: true},
	{Reason: DropProbe, Label: "probe", Request: true},
	{Reason: DropSelf, Label: "self", Request: true},
	{Reason: DropNotOwned, Label: "not_owned", Request: true},
	{Reason: responder.SendFailed, Label: "send_failed", Request: true},
}

// family is what NDP brings to the responder skeleton.
var family = responder.Family{
	Protocol: etherTypeIPv6,
	Filter:   nsFilter,
	// IPv4 addresses are the ARP replier's.
	Accept: func(a netip.Addr) (netip.Addr, bool) {
		return a.WithZone(""), a.Is6() && !a.Is4In6()
	},
	NewReply: NewReplyBuffer,
	Decide:   Decide,
	Drops:    drops[:],
	LogAnswered: func(logger klog.Logger, reply []byte) {
		logger.V(4).Info("Answered neighbor solicitation", "address", netip.AddrFrom16([16]byte(reply[offIPSrc:])),
			"requester", netip.AddrFrom16([16]byte(reply[offIPDst:])))
	},
	Log: responder.Messages{
		Stopped:     "NDP responder stopped; opening its socket again",
		CannotSend:  "Cannot send neighbor advertisement",
		NotAnswered: "Neighbor solicitation not answered",
	},
}

// NewResponder returns a responder for the named interface owning no
// address. It opens nothing until Run. While Run runs, SetAddresses has the
// socket join and leave the owned addresses' solicited-node groups.
func NewResponder(iface string) *Responder {
	r := &Responder{joined: map[[macLen]byte]struct{}{}, wanted: map[[macLen]byte]int{}}
	r.core = responder.New(iface, &family, responder.Hooks{Changed: r.changed, Open: r.open})
	return r
}

// changed follows SetAddresses: the groups of the addresses that changed are
// counted, and the open socket joins a group when its first owned address comes and
// leaves it when its last goes — work for what changed, not for every owned address.
func (r *Responder) changed(removed, added []netip.Addr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var touched [][macLen]byte
	count := func(addrs []netip.Addr, n int) {
		for _, a := range addrs {
			g, ok := groupOf(a)
			if !ok {
				continue
			}
			if r.wanted[g] += n; r.wanted[g] <= 0 {
				delete(r.wanted, g)
			}
			touched = append(touched, g)
		}
	}
	count(removed, -1)
	count(added, 1)
	if len(touched) == 0 {
		return
	}
	if err := r.syncGroups(touched); err != nil {
		// The socket is broken; Run reopens it and joins again.
		klog.Background().Error(err, "Joining solicited-node groups", "interface", r.Interface())
	}
}

// open has each socket the skeleton opens on ifi join the groups, and forgets it
// once it closes (leaving every group).
func (r *Responder) open(_ context.Context, ifi *net.Interface) (responder.Session, error) {
	return responder.Session{
		Run: func(_ context.Context, c *packet.Conn) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.conn, r.ifidx, r.joined, r.allMulti = c, ifi.Index, map[[macLen]byte]struct{}{}, false
			return r.syncGroups(nil)
		},
		Close: func() {
			r.mu.Lock()
			r.conn = nil
			r.mu.Unlock()
		},
	}, nil
}

// groupOf is the Ethernet group of a's solicited-node multicast address.
func groupOf(a netip.Addr) ([macLen]byte, bool) {
	g, err := ndp.SolicitedNodeMulticast(a)
	if err != nil {
		return [macLen]byte{}, false
	}
	return [macLen]byte(groupMAC(g)), true
}

// syncGroups makes the open socket's memberships of the groups touched match the
// owned addresses, of every group when touched is nil (a new socket); past maxGroups,
// one membership of every multicast frame stands for them. r.mu is held.
func (r *Responder) syncGroups(touched [][macLen]byte) error {
	if r.conn == nil {
		return nil
	}
	var errs []error
	switch n := len(r.wanted); {
	case !r.allMulti && n > maxGroups:
		if err := r.membership(unix.PACKET_ADD_MEMBERSHIP, unix.PACKET_MR_ALLMULTI, [macLen]byte{}); err != nil {
			return err
		}
		r.allMulti = true
		for g := range r.joined {
			errs = append(errs, r.membership(unix.PACKET_DROP_MEMBERSHIP, unix.PACKET_MR_MULTICAST, g))
			delete(r.joined, g)
		}
		klog.Background().Info("Taking every multicast frame instead of joining each solicited-node group", "interface", r.Interface(), "groups", n, "most", maxGroups)
		return errors.Join(errs...)
	case r.allMulti && n > maxGroups/2:
		return nil // every group's frames come already
	case r.allMulti:
		touched = nil // join them all, then stop taking every frame
	}
	if touched == nil {
		for g := range r.joined {
			touched = append(touched, g)
		}
		for g := range r.wanted {
			touched = append(touched, g)
		}
	}
	for _, g := range touched {
		_, want := r.wanted[g]
		_, have := r.joined[g]
		switch {
		case have && !want:
			errs = append(errs, r.membership(unix.PACKET_DROP_MEMBERSHIP, unix.PACKET_MR_MULTICAST, g))
			delete(r.joined, g)
		case want && !have:
			if err := r.membership(unix.PACKET_ADD_MEMBERSHIP, unix.PACKET_MR_MULTICAST, g); err != nil {
				errs = append(errs, err)
				continue
			}
			r.joined[g] = struct{}{}
		}
	}
	if r.allMulti && len(errs) == 0 {
		if err := r.membership(unix.PACKET_DROP_MEMBERSHIP, unix.PACKET_MR_ALLMULTI, [macLen]byte{}); err != nil {
			return err
		}
		r.allMulti = false
		klog.Background().Info("Joining each solicited-node group again", "interface", r.Interface(), "groups", len(r.wanted))
	}
	return errors.Join(errs...)
}

// membership joins (PACKET_ADD_MEMBERSHIP) or leaves a multicast group, or all of
// them (PACKET_MR_ALLMULTI, no group).
func (r *Responder) membership(op, typ int, group [macLen]byte) error {
	raw, err := r.conn.SyscallConn()
	if err != nil {
		return err
	}
	mreq := &unix.PacketMreq{Ifindex: int32(r.ifidx), Type: uint16(typ)}
	what := "every multicast frame"
	if typ == unix.PACKET_MR_MULTICAST {
		mreq.Alen = macLen
		copy(mreq.Address[:], group[:])
		what = "group " + net.HardwareAddr(group[:]).String()
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptPacketMreq(int(fd), unix.SOL_PACKET, op, mreq)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("%s %s: %w", map[int]string{unix.PACKET_ADD_MEMBERSHIP: "join", unix.PACKET_DROP_MEMBERSHIP: "leave"}[op], what, serr)
	}
	return nil
}
