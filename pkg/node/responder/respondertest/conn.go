// Package respondertest is a fake responder.Conn for the tests of the responders that
// share pkg/node/responder: it feeds frames to Serve and records what was sent.
package respondertest

import (
	"bytes"
	"errors"
	"net"
	"slices"

	"github.com/mdlayher/packet"
)

// ErrDone is what a read returns once every frame was read.
var ErrDone = errors.New("no more frames")

// Conn feeds In to its reader, one frame a read, running Before's function of the
// same index first (when there is one: to change the owned addresses mid-stream).
// Writes to a hardware address whose last byte is in Fail fail; the others are
// recorded in Sent and To.
type Conn struct {
	In     [][]byte
	Before []func()
	Fail   []byte
	Sent   [][]byte
	To     []net.HardwareAddr
}

// ReadFrom returns the next frame of In, or ErrDone.
func (c *Conn) ReadFrom(b []byte) (int, net.Addr, error) {
	if len(c.In) == 0 {
		return 0, nil, ErrDone
	}
	if len(c.Before) > 0 {
		if c.Before[0] != nil {
			c.Before[0]()
		}
		c.Before = c.Before[1:]
	}
	n := copy(b, c.In[0])
	c.In = c.In[1:]
	return n, nil, nil
}

// WriteTo records b, sent to addr's hardware address, unless that address fails.
func (c *Conn) WriteTo(b []byte, addr net.Addr) (int, error) {
	to := addr.(*packet.Addr).HardwareAddr
	if slices.Contains(c.Fail, to[len(to)-1]) {
		return 0, errors.New("no buffer space")
	}
	c.Sent = append(c.Sent, bytes.Clone(b))
	c.To = append(c.To, slices.Clone(to))
	return len(b), nil
}
