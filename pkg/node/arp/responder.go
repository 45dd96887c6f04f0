// Package arp answers ARP requests for the ElasticIPs this node serves.
//
// The kernel's ARP never answers for ElasticIPs (they are no local address, and
// the external interface runs with arp_ignore=1, arp_announce=2, proxy_arp=0),
// so a responder per external interface answers requests for the owned
// addresses with the interface's MAC. It answers from a TCX ingress program it
// attaches to the interface (the kernel path, kernel.go: Decide's decisions made
// in the kernel, no user-space wakeup per request), through a link held by the
// agent's process, so that the kernel stops answering when the process is gone.
// Where that program cannot be attached it answers from a packet socket in user
// space (the socket path) (docs/arp.md#replies-in-the-kernel). The socket, its
// reopening and its read loop are the responder skeleton's (pkg/node/responder).
//
// Unless asked to (SetGratuitous, for the networks with spec.gratuitousARP), it
// sends nothing unsolicited, so after a move upstream caches keep the old MAC
// until they expire; asked, it sends a few gratuitous ARP replies for an
// address when it starts answering for it, from the packet socket whichever path
// answers (docs/arp.md#after-a-move).
package arp

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/node/responder"
)

// core is the responder skeleton, embedded under a name of this package: its
// methods are the Responder's, the field is not exported.
type core = responder.Responder

// Responder answers ARP requests on one interface for a set of addresses that
// can change at any time.
//
// Where it can, it answers in the kernel (kernel.go): a TCX ingress program
// answers the requests for owned addresses and passes every other frame on;
// the packet socket then receives nothing and only sends gratuitous ARP.
// Otherwise the socket path answers. There the path from a request's arrival
// to the reply is kept short: a socket filter in the kernel passes only ARP
// requests that this host did not send (filter.go), the owned addresses are an
// immutable set behind an atomic pointer (no lock), and the reply is written
// into a frame built once (NewReplyBuffer).
type Responder struct {
	*core

	// mu guards what gratuitous ARP needs: the addresses to announce when they
	// start being answered (and the list SetGratuitous was last given), and the
	// announcements due; and the kernel path.
	mu              sync.Mutex
	gratuitous      []netip.Addr
	gratuitousGiven []netip.Addr
	pending         map[netip.Addr]*announcement
	wake            chan struct{}
	count           int
	interval        time.Duration
	announced       atomic.Uint64

	// kernelOff is set by WithoutKernelPath, or once the kernel path failed in a
	// way that will not mend (its address map is full).
	kernelOff atomic.Bool
	// kern is the attached kernel path, nil while the socket path answers
	// (guarded by mu); kernelErr is set when updating its address map failed,
	// and kernelBroken tells the session.
	kern         *kernelPath
	kernelErr    error
	kernelBroken chan struct{}
	kernelLogged bool // the kernel path's unavailability was logged
	// kernelClosed are the counters of the kernel paths closed (guarded by mu).
	kernelClosed [nSlots]uint64
	path         atomic.Pointer[string]
}

// dropLabels are the drop reasons (and failed sends) as the metrics count them,
// in the order of the kernel path's counters too.
var dropLabels = [...]responder.Drop{
	{Reason: DropMalformed, Label: "malformed"},
	{Reason: DropNotEthernetV4, Label: "not_ethernet_ipv4"},
	{Reason: DropNotRequest, Label: "not_request"},
	{Reason: DropOwnFrame, Label: "own_frame"},
	{Reason: DropNotForUs, Label: "not_for_us", Request: true},
	{Reason: DropBadSender, Label: "bad_sender", Request: true},
	{Reason: DropProbe, Label: "probe", Request: true},
	{Reason: DropAnnouncement, Label: "announcement", Request: true},
	{Reason: DropNotOwned, Label: "not_owned", Request: true},
	{Reason: dropSendFailed, Label: "send_failed", Request: true},
}

// dropSendFailed counts replies not sent.
const dropSendFailed = responder.SendFailed

// family is what ARP brings to the responder skeleton.
var family = responder.Family{
	// Bound to the ARP EtherType (not ETH_P_ALL, whose sockets see a frame
	// before the TCX ingress programs run), the socket gets an incoming frame
	// only after the kernel path has passed it on: a request the kernel path
	// answered never reaches it, so there is never a second reply.
	Protocol:    etherTypeARP,
	Filter:      requestFilter,
	BypassQdisc: true,
	Accept: func(a netip.Addr) (netip.Addr, bool) {
		a = a.Unmap()
		return a, a.Is4()
	},
	NewReply: NewReplyBuffer,
	Decide:   Decide,
	Drops:    dropLabels[:],
	LogAnswered: func(logger klog.Logger, reply []byte) {
		logger.V(4).Info("Answered ARP request", "address", netip.AddrFrom4([4]byte(reply[offSPA:])),
			"requester", netip.AddrFrom4([4]byte(reply[offTPA:])))
	},
	Log: responder.Messages{
		Stopped:    "ARP responder stopped; retrying",
		CannotSend: "Cannot send ARP reply",
	},
}

// Option changes how a responder works.
type Option func(*Responder)

// WithoutKernelPath makes the responder answer from its packet socket only, as
// it does where the kernel path cannot be attached.
func WithoutKernelPath() Option { return func(r *Responder) { r.kernelOff.Store(true) } }

// Paths a responder answers from (Path).
const (
	PathKernel = "kernel"
	PathSocket = "socket"
)

// NewResponder returns a responder for the named interface owning no
// address. It opens nothing until Run.
func NewResponder(iface string, opts ...Option) *Responder {
	r := &Responder{pending: map[netip.Addr]*announcement{},
		wake: make(chan struct{}, 1), count: GratuitousCount, interval: GratuitousInterval, kernelBroken: make(chan struct{}, 1)}
	r.core = responder.New(iface, &family, responder.Hooks{Changed: r.changed, Open: r.open})
	for _, o := range opts {
		o(r)
	}
	return r
}

// Path says where requests are answered: PathKernel, PathSocket, or "" while
// the responder is not running.
func (r *Responder) Path() string {
	if p := r.path.Load(); p != nil {
		return *p
	}
	return ""
}

// changed follows SetAddresses (only IPv4 addresses count): it brings the kernel
// path's address map up to date and schedules the gratuitous ARP of the addresses
// newly owned that SetGratuitous named.
func (r *Responder) changed(removed, added []netip.Addr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kern != nil && r.kernelErr == nil {
		if err := r.kern.set(as4(added), as4(removed)); err != nil {
			r.kernelErr = err
			select {
			case r.kernelBroken <- struct{}{}:
			default:
			}
		}
	}
	r.schedule(removed, added)
}

// as4 is the IPv4 addresses as the kernel path's map keys them.
func as4(addrs []netip.Addr) [][4]byte {
	out := make([][4]byte, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, a.As4())
	}
	return out
}

// Requests is the number of ARP requests received (for any address), on either
// path.
func (r *Responder) Requests() uint64 {
	return r.core.Requests() + r.kernelCounts()[slotRequests]
}

// Replies is the number of replies sent, from either path.
func (r *Responder) Replies() uint64 {
	return r.core.Replies() + r.kernelCounts()[slotReplies]
}

// Drops counts the frames not answered, by reason (as metric label values, every
// reason present), whichever path saw them.
func (r *Responder) Drops() map[string]uint64 {
	k := r.kernelCounts()
	out := r.core.Drops()
	for i, d := range dropLabels {
		out[d.Label] += k[slotDrops+i]
	}
	return out
}
