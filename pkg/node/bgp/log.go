package bgp

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"sync/atomic"

	"k8s.io/klog/v2"
)

// GoBGP logs through log/slog. logHandler passes its records to the agent's klog
// logger and picks out what GoBGP reports nowhere else about a session it dials: it
// sets those up in an "outgoing connection manager" that raises no session event, so
// only its log (records of the peer's FSM logger, with the peer's address as "Key")
// says why they fail:
//   - a connection attempt failed (refused, unreachable, no answer): "failed to
//     connect" at debug level, with the dialer's error as "Error";
//   - this speaker sent a NOTIFICATION (such as "bad peer AS" when the router's AS is
//     not the expected one): "sent notification" with "Code" and "Subcode";
//   - the router closed the connection before its OPEN: "outgoing connection IO
//     error" at debug level, with "reason" "read-failed".
//
// And about BFD, whose session resets say only that this speaker reset the session:
// records of Topic "bfd" with the router's address as "Peer", "Expired" when the
// router's packets stopped for the detection time, "Remote peer signaled BFD down"
// when the router declared the session down.
const (
	gobgpBFDExpired    = "Expired"
	gobgpBFDRemoteDown = "Remote peer signaled BFD down"
	gobgpTopicAttr     = "Topic"
	gobgpPeerAttr      = "Peer"
	gobgpBFDTopic      = "bfd"

	gobgpDialFailed       = "failed to connect"
	gobgpNotificationSent = "sent notification"
	gobgpSetupFailed      = "outgoing connection IO error"
	gobgpKeyAttr          = "Key"
	gobgpErrorAttr        = "Error"
	gobgpCodeAttr         = "Code"
	gobgpSubcodeAttr      = "Subcode"
	gobgpReasonAttr       = "reason"
	// gobgpStopFailed is logged when GoBGP's Stop finds the server already stopped,
	// which is how the speaker stops it without NOTIFICATIONs (see Run).
	gobgpStopFailed = "failed to stop BGP server"
)

// peerLog receives what logHandler picks out of GoBGP's log.
type peerLog interface {
	dialFailed(peer netip.Addr, errText string)
	notificationSent(peer netip.Addr, code, subcode uint8)
	setupFailed(peer netip.Addr, reason string)
	// bfdDown: BFD declared the router down; remote when the router signalled it.
	bfdDown(peer netip.Addr, remote bool)
}

// klog verbosity of GoBGP's levels: warnings and errors always, its info messages
// (sessions coming and going, configuration) at 2, debug at 6.
func verbosityOf(level slog.Level) int {
	switch {
	case level >= slog.LevelWarn:
		return 0
	case level >= slog.LevelInfo:
		return 2
	}
	return 6
}

type logHandler struct {
	logger   klog.Logger
	attrs    []slog.Attr
	prefix   string // group prefix of attributes added later, "g." form
	peers    peerLog
	stopping *atomic.Bool
}

func newLogHandler(logger klog.Logger, peers peerLog, stopping *atomic.Bool) *logHandler {
	return &logHandler{logger: logger, peers: peers, stopping: stopping}
}

var _ slog.Handler = (*logHandler)(nil)

// Enabled is true down to debug for dial failures; other records below the logger's
// verbosity are dropped in Handle without being formatted.
func (h *logHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *logHandler) Handle(_ context.Context, r slog.Record) error {
	switch r.Message {
	case gobgpDialFailed, gobgpNotificationSent, gobgpSetupFailed, gobgpBFDExpired, gobgpBFDRemoteDown:
		h.report(r)
	}
	if r.Message == gobgpStopFailed && h.stopping.Load() {
		return nil
	}
	v := verbosityOf(r.Level)
	if !h.logger.V(v).Enabled() {
		return nil
	}
	kv := make([]any, 0, 2*(len(h.attrs)+r.NumAttrs()))
	for _, a := range h.attrs {
		kv = appendAttr(kv, "", a)
	}
	r.Attrs(func(a slog.Attr) bool {
		kv = appendAttr(kv, h.prefix, a)
		return true
	})
	if r.Level >= slog.LevelError {
		h.logger.Error(nil, r.Message, kv...)
	} else {
		h.logger.V(v).Info(r.Message, kv...)
	}
	return nil
}

// report passes a record about a session being set up to h.peers.
func (h *logHandler) report(r slog.Record) {
	var key, errText, reason, topic, peer string
	var code, subcode int64 = -1, -1
	find := func(a slog.Attr) {
		v := a.Value.Resolve()
		switch a.Key {
		case gobgpKeyAttr:
			key = v.String()
		case gobgpTopicAttr:
			topic = v.String()
		case gobgpPeerAttr:
			peer = v.String()
		case gobgpErrorAttr:
			errText = v.String()
		case gobgpCodeAttr:
			code = attrInt(v)
		case gobgpSubcodeAttr:
			subcode = attrInt(v)
		case gobgpReasonAttr:
			reason = v.String()
		}
	}
	for _, a := range h.attrs {
		find(a)
	}
	r.Attrs(func(a slog.Attr) bool { find(a); return true })
	if topic == gobgpBFDTopic {
		if addr, err := netip.ParseAddr(peer); err == nil {
			h.peers.bfdDown(addr, r.Message == gobgpBFDRemoteDown)
		}
		return
	}
	addr, err := netip.ParseAddr(key)
	if err != nil {
		return
	}
	switch {
	case r.Message == gobgpDialFailed && errText != "":
		h.peers.dialFailed(addr, errText)
	case r.Message == gobgpNotificationSent && code >= 0 && code <= 255 && subcode >= 0 && subcode <= 255:
		h.peers.notificationSent(addr, uint8(code), uint8(subcode))
	case r.Message == gobgpSetupFailed && reason != "":
		h.peers.setupFailed(addr, reason)
	}
}

func attrInt(v slog.Value) int64 {
	switch v.Kind() {
	case slog.KindInt64:
		return v.Int64()
	case slog.KindUint64:
		return int64(min(v.Uint64(), 1<<62))
	}
	return -1
}

func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = make([]slog.Attr, 0, len(h.attrs)+len(attrs))
	c.attrs = append(c.attrs, h.attrs...)
	for _, a := range attrs {
		a.Key = h.prefix + a.Key
		c.attrs = append(c.attrs, a)
	}
	return &c
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix = h.prefix + name + "."
	return &c
}

// appendAttr flattens a (group) attribute into klog key/value pairs.
func appendAttr(kv []any, prefix string, a slog.Attr) []any {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, g := range v.Group() {
			kv = appendAttr(kv, p, g)
		}
		return kv
	}
	if a.Key == "" {
		return kv
	}
	// GoBGP capitalises and spaces its keys ("Remote Addr"); klog keys read better plain.
	return append(kv, prefix+strings.ReplaceAll(a.Key, " ", ""), v.Any())
}
