package responder

import (
	"context"
	"fmt"
	"net"

	"github.com/mdlayher/packet"
	"k8s.io/klog/v2"
)

// MaxFrame bounds what is read of a frame: every request answered is far
// shorter.
const MaxFrame = 1514

// Conn is the part of a packet socket (*packet.Conn) the responder reads from and
// replies on.
type Conn interface {
	ReadFrom(b []byte) (int, net.Addr, error)
	WriteTo(b []byte, addr net.Addr) (int, error)
}

// Send writes an Ethernet frame out of conn, to the frame's destination.
func Send(conn Conn, frame []byte) error {
	_, err := conn.WriteTo(frame, &packet.Addr{HardwareAddr: frame[:macLen]})
	return err
}

// Serve answers the frames it reads from conn, as the interface with MAC ours,
// until ctx ends (it returns nil) or reading fails. Run serves each socket it
// opens with it. The reply is written into one buffer, made once.
func (r *Responder) Serve(ctx context.Context, conn Conn, ours net.HardwareAddr) error {
	logger := klog.FromContext(ctx)
	f := r.family
	buf := make([]byte, MaxFrame)
	reply := f.NewReply(ours)
	to := &packet.Addr{HardwareAddr: reply[:macLen]} // Decide writes the destination there
	owns := r.Owns
	for {
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("read: %w", err)
		}
		reason := f.Decide(buf[:n], ours, owns, reply)
		if reason != Answer {
			if r.count(reason) {
				r.requests.Add(1)
			}
			if v := logger.V(5); f.Log.NotAnswered != "" && v.Enabled() {
				v.Info(f.Log.NotAnswered, "reason", reason)
			}
			continue
		}
		r.requests.Add(1)
		if _, err := conn.WriteTo(reply, to); err != nil {
			r.count(SendFailed)
			logger.Error(err, f.Log.CannotSend, "to", to.HardwareAddr.String())
			continue
		}
		r.replies.Add(1)
		if logger.V(4).Enabled() {
			f.LogAnswered(logger, reply)
		}
	}
}

// count counts a frame dropped for reason and says whether it was a request.
func (r *Responder) count(reason Reason) (request bool) {
	for i, d := range r.family.Drops {
		if d.Reason == reason {
			r.drops[i].Add(1)
			return d.Request
		}
	}
	return false
}
