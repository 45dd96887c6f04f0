package responder

import (
	"context"
	"net"
	"net/netip"
	"slices"

	"github.com/mdlayher/packet"
	"golang.org/x/net/bpf"
	"k8s.io/klog/v2"
)

// Reason says why a frame got no reply. The empty reason, Answer, means reply.
type Reason string

// Answer is the Reason of a frame that is answered.
const Answer Reason = ""

// SendFailed is the Reason counted for a reply the socket did not send.
const SendFailed Reason = "send failed"

// Drop is one Reason a family counts, as its metrics show it.
type Drop struct {
	Reason Reason
	// Label is the reason as a metric label value.
	Label string
	// Request says that a frame dropped for Reason was a request, for some
	// address: it counts among the requests seen.
	Request bool
}

// Decide looks at one received Ethernet frame and decides whether to answer, for
// the interface MAC ours and the addresses owns reports as owned. To answer, it
// writes the reply into reply, a buffer the family's NewReply made for ours, and
// returns Answer; otherwise it leaves reply alone and says why not.
type Decide func(frame []byte, ours net.HardwareAddr, owns func(netip.Addr) bool, reply []byte) Reason

// Family is what one protocol brings to a Responder: its socket, its decision
// and its names.
type Family struct {
	// Protocol is the EtherType the socket is bound to.
	Protocol uint16
	// Filter is the socket's classic BPF program, a pre-filter of Decide's rules.
	Filter []bpf.Instruction
	// BypassQdisc sends replies straight to the driver, past the interface's
	// queueing discipline.
	BypassQdisc bool
	// Accept says whether an address is the family's, and gives it as the owned
	// set holds it (e.g. unmapped, without zone).
	Accept func(netip.Addr) (netip.Addr, bool)
	// NewReply returns the reply buffer Decide writes into, for the interface
	// MAC ours.
	NewReply func(ours net.HardwareAddr) []byte
	Decide   Decide
	// Drops are every Reason Decide returns but Answer, and SendFailed, in the
	// order of the counters.
	Drops []Drop
	// LogAnswered logs a reply sent at -v=4, with the family's own line naming
	// the answered address and the requester's (docs/operations.md quotes the
	// lines); it is called only when that level is on.
	LogAnswered func(logger klog.Logger, reply []byte)
	Log         Messages
}

// Addresses is the set of the family's addresses among addrs, as Accept gives them.
func (f *Family) Addresses(addrs []netip.Addr) map[netip.Addr]struct{} {
	m := make(map[netip.Addr]struct{}, len(addrs))
	for _, a := range addrs {
		if a, ok := f.Accept(a); ok {
			m[a] = struct{}{}
		}
	}
	return m
}

// Sorted is the family's addresses among addrs as Accept gives them, strictly
// increasing: addrs itself when it is so already (the agent's lists), else a list of
// its own.
func (f *Family) Sorted(addrs []netip.Addr) []netip.Addr {
	ok := true
	for i, a := range addrs {
		if b, accepted := f.Accept(a); !accepted || b != a || (i > 0 && addrs[i-1].Compare(a) >= 0) {
			ok = false
			break
		}
	}
	if ok {
		return addrs
	}
	var out []netip.Addr
	for _, a := range addrs {
		if b, accepted := f.Accept(a); accepted {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// Messages are a family's log lines.
type Messages struct {
	// Stopped: the socket failed; it is opened again "after" a while.
	Stopped string
	// CannotSend: a reply was not sent, "to" the hardware address.
	CannotSend string
	// NotAnswered, at -v=5: a frame was not answered, for "reason". Empty: not
	// logged.
	NotAnswered string
}

// Hooks are a family's own work beside answering; nil ones do nothing.
type Hooks struct {
	// Changed is told which addresses stopped being owned (removed) and which
	// started (added), as Accept gives them, once the set has changed; the calls
	// are in the order of SetAddresses's, one at a time. Neither list is to be
	// changed.
	Changed func(removed, added []netip.Addr)
	// Open is called each time the interface is found, before the socket is
	// opened on it, with the context of Run (its logger names the interface).
	Open func(ctx context.Context, ifi *net.Interface) (Session, error)
}

// Session is a family's part of one open socket.
type Session struct {
	// Filter replaces the Family's filter on this socket, if not nil.
	Filter []bpf.Instruction
	// Run runs beside the read loop once the socket is open, with a context
	// that ends with the socket. Its nil return ends only Run; an error ends
	// the socket too, which is opened again after a while.
	Run func(ctx context.Context, c *packet.Conn) error
	// Close runs once the read loop and Run have returned, before the socket
	// closes, or once it could not be opened.
	Close func()
}

func (s Session) close() {
	if s.Close != nil {
		s.Close()
	}
}
