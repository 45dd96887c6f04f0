package pkt

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// EtherTypeARP is the protocol to Open a socket that receives ARP frames.
const EtherTypeARP = etherTypeARP

// Socket is a raw packet socket bound to one interface. It is opened in the network
// namespace of the calling thread (open it inside netns.NS.Do) and stays there.
type Socket struct {
	fd int
	// BlastCPU is the CPU time the sending thread used in the last Blast,
	// including the kernel's work in its context (a veth delivers the frame
	// in the sender's softirq), but not the time it waited for a CPU.
	BlastCPU time.Duration
}

// Open opens a packet socket on dev receiving frames of protocol proto (an EtherType;
// 0 receives nothing, for a socket that only sends).
func Open(dev string, proto uint16) (*Socket, error) {
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", dev, err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(proto)))
	if err != nil {
		return nil, fmt.Errorf("packet socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(proto), Ifindex: ifi.Index}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind packet socket to %s: %w", dev, err)
	}
	// Hand frames straight to the driver: the benchmark measures the path behind the
	// interface, not the sender's queueing discipline.
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("PACKET_QDISC_BYPASS: %w", err)
	}
	return &Socket{fd: fd}, nil
}

// Close closes the socket.
func (s *Socket) Close() error { return unix.Close(s.fd) }

// Send sends one frame.
func (s *Socket) Send(frame []byte) error {
	_, err := unix.Write(s.fd, frame)
	return err
}

// mmsghdr is struct mmsghdr of sendmmsg(2), which golang.org/x/sys/unix does not wrap.
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
	_   [4]byte
}

// batch is how many frames one sendmmsg call carries.
const batch = 64

// Blast sends the frames next returns for i = 0, 1, 2, ... as fast as the kernel takes
// them, batch by batch, until d has passed or limit frames are sent. It returns how
// many were sent and how long that took. next may return the same buffer again only
// after batch further calls (a frame is in flight until its batch is sent).
func (s *Socket) Blast(next func(i int) []byte, d time.Duration, limit int) (sent int, elapsed time.Duration, err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	iov := make([]unix.Iovec, batch)
	msgs := make([]mmsghdr, batch)
	cpu0 := threadCPU()
	defer func() { s.BlastCPU = threadCPU() - cpu0 }()
	start := time.Now()
	deadline := start.Add(d)
	for sent < limit {
		n := min(batch, limit-sent)
		for j := range n {
			f := next(sent + j)
			iov[j].Base = &f[0]
			iov[j].SetLen(len(f))
			msgs[j].hdr.Iov = &iov[j]
			msgs[j].hdr.SetIovlen(1)
		}
		r, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(s.fd), uintptr(unsafe.Pointer(&msgs[0])), uintptr(n), 0, 0, 0)
		switch {
		case errno == unix.EINTR || errno == unix.EAGAIN || errno == unix.ENOBUFS:
		case errno != 0:
			return sent, time.Since(start), fmt.Errorf("sendmmsg: %w", errno)
		default:
			sent += int(r)
		}
		if time.Now().After(deadline) {
			break
		}
	}
	runtime.KeepAlive(msgs)
	runtime.KeepAlive(iov)
	return sent, time.Since(start), nil
}

// EnableTimestamps makes the kernel stamp every received frame (SO_TIMESTAMPNS), so
// Recv reports when a frame arrived rather than when it was read.
func (s *Socket) EnableTimestamps() error {
	return unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
}

// SetReadTimeout bounds every Recv.
func (s *Socket) SetReadTimeout(d time.Duration) error {
	tv := unix.NsecToTimeval(d.Nanoseconds())
	return unix.SetsockoptTimeval(s.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
}

// ErrTimeout is returned by Recv when the read timeout passed.
var ErrTimeout = errors.New("receive timed out")

// Recv reads one received frame (frames the interface sent are skipped) and returns its
// length and kernel arrival time (zero unless EnableTimestamps was called).
func (s *Socket) Recv(buf []byte) (int, time.Time, error) {
	oob := make([]byte, 128)
	for {
		n, oobn, _, from, err := unix.Recvmsg(s.fd, buf, oob, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			return 0, time.Time{}, ErrTimeout
		}
		if err != nil {
			return 0, time.Time{}, fmt.Errorf("recvmsg: %w", err)
		}
		if sll, ok := from.(*unix.SockaddrLinklayer); ok && sll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		return n, arrival(oob[:oobn]), nil
	}
}

// arrival extracts the SO_TIMESTAMPNS control message.
func arrival(oob []byte) time.Time {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPNS && len(m.Data) >= int(unsafe.Sizeof(unix.Timespec{})) {
			ts := (*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
			return time.Unix(ts.Sec, ts.Nsec)
		}
	}
	return time.Time{}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// threadCPU is the CPU time the calling thread has used.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
