package nft

import (
	"errors"
	"fmt"

	"github.com/google/nftables"
	mnl "github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Socket buffer sizes for the netlink socket. A whole batch goes out in one
// sendmsg, which the kernel refuses when it exceeds the send buffer: 10,000
// mappings make about 1.5 MB, 10,000 limited ones about 8 MB. The receive
// side must hold one ack per message at once, because the kernel sends them
// all when the batch is done; an ack takes about 1.25 KiB of the buffer
// (measured: 8 MiB, which the kernel doubles, holds about 13,500). Element
// messages are few (chunked), but every limit chain and its rule is a message
// of its own, so a batch writing n of them asks for n KiB more (2 KiB each
// once doubled).
const (
	sendBufferBytes    = 64 << 20
	receiveBufferBytes = 8 << 20
	ackBytes           = 1 << 10
)

// receiveBufferFor sizes the receive buffer of a batch with limitMessages
// chain and rule messages.
func receiveBufferFor(limitMessages int) int { return receiveBufferBytes + limitMessages*ackBytes }

// connFor returns the lasting connection with a receive buffer of at least
// receiveBuffer bytes, opening it if needed.
func (p *Programmer) connFor(receiveBuffer int) (*nftables.Conn, error) {
	receiveBuffer = max(receiveBuffer, receiveBufferBytes)
	if p.conn != nil && receiveBuffer > p.rcvbuf {
		if p.resize == nil || p.resize(receiveBuffer) != nil {
			p.closeConn()
		} else {
			p.rcvbuf = receiveBuffer
		}
	}
	if p.conn == nil {
		c, resize, err := p.dial(receiveBuffer, true)
		if err != nil {
			return nil, fmt.Errorf("netlink: %w", err)
		}
		p.conn, p.resize, p.rcvbuf = c, resize, receiveBuffer
	}
	return p.conn, nil
}

func (p *Programmer) closeConn() {
	if p.conn != nil {
		_ = p.conn.CloseLasting()
	}
	p.conn, p.resize = nil, nil
}

// raiseBuffers enlarges the netlink socket buffers for ordinary batches.
func raiseBuffers(c *mnl.Conn) error { return setBuffers(c, sendBufferBytes, receiveBufferBytes) }

// setBuffers sets the netlink socket buffers. The *FORCE options ignore the
// rmem_max/wmem_max caps (the agent has CAP_NET_ADMIN); without the
// capability fall back to the capped options.
func setBuffers(c *mnl.Conn, send, receive int) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	cerr := raw.Control(func(fd uintptr) {
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, send) != nil {
			serr = errors.Join(serr, unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, send))
		}
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, receive) != nil {
			serr = errors.Join(serr, unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, receive))
		}
	})
	return errors.Join(cerr, serr)
}
