package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/mdlayher/socket"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Frame is one Ethernet frame seen on a captured interface.
type Frame struct {
	Data []byte
	// Outgoing is true for frames the interface sent, false for received ones.
	Outgoing bool
	At       time.Time
}

// Capture records every frame crossing one interface, like tcpdump without
// the binary: the packet socket is opened inside the namespace and read by a
// goroutine until the test ends or Stop is called.
type Capture struct {
	conn     *socket.Conn
	stopOnce sync.Once
	done     chan struct{}

	mu     sync.Mutex
	frames []Frame
	err    error
}

// drainTime is how long Stop keeps reading frames already queued on the
// socket, so that a frame that arrived just before Stop is not lost.
const drainTime = 100 * time.Millisecond

// Capture starts recording frames on dev. Frames are recorded from the moment
// Capture returns.
func (n *NS) Capture(dev string) *Capture {
	n.t.Helper()
	var conn *socket.Conn
	n.MustDo(func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		c, err := socket.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0, "capture", nil)
		if err != nil {
			return fmt.Errorf("packet socket: %w", err)
		}
		proto := htons(uint16(unix.ETH_P_ALL))
		if err := c.Bind(&unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index}); err != nil {
			c.Close()
			return fmt.Errorf("bind packet socket to %s: %w", dev, err)
		}
		conn = c
		return nil
	})
	c := &Capture{conn: conn, done: make(chan struct{})}
	go c.read()
	n.t.Cleanup(c.Stop)
	return c
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (c *Capture) read() {
	defer close(c.done)
	defer c.conn.Close()
	buf := make([]byte, 65536)
	for {
		nr, from, err := c.conn.Recvfrom(context.Background(), buf, 0)
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				c.mu.Lock()
				c.err = err
				c.mu.Unlock()
			}
			return
		}
		f := Frame{Data: append([]byte(nil), buf[:nr]...), At: time.Now()}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok {
			f.Outgoing = ll.Pkttype == unix.PACKET_OUTGOING
		}
		c.mu.Lock()
		c.frames = append(c.frames, f)
		c.mu.Unlock()
	}
}

// Stop ends the capture after reading what is already queued; the frames
// recorded stay available.
func (c *Capture) Stop() {
	c.stopOnce.Do(func() {
		if err := c.conn.SetReadDeadline(time.Now().Add(drainTime)); err != nil {
			c.conn.Close()
		}
	})
	<-c.done
}

// Frames returns a copy of the frames recorded so far.
func (c *Capture) Frames() []Frame {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Frame(nil), c.frames...)
}

// Err returns the read error that ended the capture early, if any.
func (c *Capture) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// WaitFor polls until a recorded frame satisfies match and returns it.
func (c *Capture) WaitFor(timeout time.Duration, match func(Frame) bool) (Frame, error) {
	var found Frame
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, timeout, true,
		func(context.Context) (bool, error) {
			for _, f := range c.Frames() {
				if match(f) {
					found = f
					return true, nil
				}
			}
			if err := c.Err(); err != nil {
				return false, err
			}
			return false, nil
		})
	if err != nil {
		return Frame{}, errors.Join(errors.New("no matching frame captured"), err)
	}
	return found, nil
}
