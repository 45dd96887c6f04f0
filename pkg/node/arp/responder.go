// Package arp answers ARP requests for the ElasticIPs this node serves.
//
// The kernel's ARP never answers for ElasticIPs (they are no local address, and
// the external interface runs with arp_ignore=1, arp_announce=2, proxy_arp=0),
// so a responder per external interface answers requests for the owned
// addresses with the interface's MAC. It answers from a TCX ingress program it
// attaches to the interface (the kernel path, kernel.go: Decide's decisions made
// in the kernel, no user-space wakeup per request), through a link held by the
// agent's process, so that the kernel stops answering when the process is gone.
// Where that program cannot be attached it answers from a raw socket in user
// space (the socket path) (docs/arp.md#replies-in-the-kernel).
//
// Unless asked to (SetGratuitous, for the networks with spec.gratuitousARP), it
// sends nothing unsolicited, so after a move upstream caches keep the old MAC
// until they expire; asked, it sends a few gratuitous ARP replies for an
// address when it starts answering for it, from the raw socket whichever path
// answers (docs/arp.md#after-a-move).
package arp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// Backoff between attempts to (re)open the socket, e.g. while the interface
// does not exist yet.
const (
	minRetry = 100 * time.Millisecond
	maxRetry = 5 * time.Second
)

// Responder answers ARP requests on one interface for a set of addresses that
// can change at any time.
//
// Where it can, it answers in the kernel (kernel.go): a TCX ingress program
// answers the requests for owned addresses and passes every other frame on;
// the raw socket then receives nothing and only sends gratuitous ARP.
// Otherwise the socket path answers. There the path from a request's arrival
// to the reply is kept short: a socket
// filter in the kernel passes only ARP requests that this host did not send,
// one goroutine locked to its OS thread blocks in read(2) on the socket (no
// trip through the runtime's network poller and scheduler), the owned
// addresses are an immutable set behind an atomic pointer (no lock), and the
// reply is written into a frame built once, with nothing allocated per
// frame.
type Responder struct {
	iface string
	owned atomic.Pointer[map[[4]byte]struct{}]

	// mu orders SetAddresses and guards what gratuitous ARP needs: the addresses
	// to announce when they start being answered, and the announcements due.
	mu         sync.Mutex
	gratuitous map[[4]byte]struct{}
	pending    map[[4]byte]*announcement
	wake       chan struct{}
	count      int
	interval   time.Duration

	// kernelOff is set by WithoutKernelPath, or once the kernel path failed in a
	// way that will not mend (its address map is full).
	kernelOff atomic.Bool
	// kern is the attached kernel path, nil while the socket path answers
	// (guarded by mu); kernelErr is set when updating its address map failed,
	// and kernelBroken tells the serving loop.
	kern         *kernelPath
	kernelErr    error
	kernelBroken chan struct{}
	kernelLogged bool // the kernel path's unavailability was logged
	path         atomic.Pointer[string]

	// The counters of the socket path, plus those of kernel paths closed.
	requests  atomic.Uint64
	replies   atomic.Uint64
	announced atomic.Uint64
	drops     [len(dropLabels)]atomic.Uint64
}

// dropLabels name the drop reasons (and failed sends) as metric label values, in
// the order of Responder.drops.
var dropLabels = [...]struct {
	reason DropReason
	label  string
}{
	{DropMalformed, "malformed"},
	{DropNotEthernetV4, "not_ethernet_ipv4"},
	{DropNotRequest, "not_request"},
	{DropOwnFrame, "own_frame"},
	{DropNotForUs, "not_for_us"},
	{DropBadSender, "bad_sender"},
	{DropProbe, "probe"},
	{DropAnnouncement, "announcement"},
	{DropNotOwned, "not_owned"},
	{dropSendFailed, "send_failed"},
}

// dropSendFailed counts replies the socket did not send.
const dropSendFailed DropReason = "send failed"

func (r *Responder) countDrop(reason DropReason) {
	for i := range dropLabels {
		if dropLabels[i].reason == reason {
			r.drops[i].Add(1)
			return
		}
	}
}

// Drops counts the frames not answered, by reason (as metric label values, every
// reason present), whichever path saw them.
func (r *Responder) Drops() map[string]uint64 {
	k := r.kernelCounts()
	out := make(map[string]uint64, len(dropLabels))
	for i, d := range dropLabels {
		out[d.label] = r.drops[i].Load() + k[slotDrops+i]
	}
	return out
}

// kernelCounts reads the attached kernel path's counters (zeros without one).
func (r *Responder) kernelCounts() [nSlots]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kern == nil {
		return [nSlots]uint64{}
	}
	c, _ := r.kern.counts() // a failed read leaves zeros: better a dip than a wrong figure
	return c
}

// Gratuitous ARP after the responder starts answering for an address: this many
// replies, this far apart, so that one lost frame, or a late answer from the Node
// that answered before, does not leave a neighbour with the old MAC.
const (
	GratuitousCount    = 3
	GratuitousInterval = time.Second
)

// announcement is the gratuitous ARP still to send for one address.
type announcement struct {
	left int
	next time.Time
}

// Option changes how a responder works.
type Option func(*Responder)

// WithoutKernelPath makes the responder answer from its raw socket only, as it
// does where the kernel path cannot be attached.
func WithoutKernelPath() Option { return func(r *Responder) { r.kernelOff.Store(true) } }

// Paths a responder answers from (Path).
const (
	PathKernel = "kernel"
	PathSocket = "socket"
)

// NewResponder returns a responder for the named interface owning no
// address. It opens nothing until Run.
func NewResponder(iface string, opts ...Option) *Responder {
	r := &Responder{iface: iface, gratuitous: map[[4]byte]struct{}{}, pending: map[[4]byte]*announcement{},
		wake: make(chan struct{}, 1), count: GratuitousCount, interval: GratuitousInterval, kernelBroken: make(chan struct{}, 1)}
	r.owned.Store(&map[[4]byte]struct{}{})
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

// SetAddresses replaces the set of owned addresses; only IPv4 addresses
// count. An address it newly owns that SetGratuitous named is announced with
// gratuitous ARP. Safe to call at any time, also while Run is running.
func (r *Responder) SetAddresses(addrs []netip.Addr) {
	m := addressSet(addrs)
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.owned.Load()
	r.owned.Store(&m)
	if r.kern != nil && r.kernelErr == nil {
		var add, del [][4]byte
		for a := range m {
			if _, ok := old[a]; !ok {
				add = append(add, a)
			}
		}
		for a := range old {
			if _, ok := m[a]; !ok {
				del = append(del, a)
			}
		}
		if err := r.kern.set(add, del); err != nil {
			r.kernelErr = err
			select {
			case r.kernelBroken <- struct{}{}:
			default:
			}
		}
	}
	for a := range r.pending {
		if _, ok := m[a]; !ok {
			delete(r.pending, a) // no longer ours: nothing more to announce
		}
	}
	added := false
	for a := range m {
		_, had := old[a]
		_, wanted := r.gratuitous[a]
		if !had && wanted {
			r.pending[a] = &announcement{left: r.count}
			added = true
		}
	}
	if added {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// SetGratuitous names the addresses to announce with gratuitous ARP when the
// responder starts answering for them (a later SetAddresses that adds them).
func (r *Responder) SetGratuitous(addrs []netip.Addr) {
	m := addressSet(addrs)
	r.mu.Lock()
	r.gratuitous = m
	r.mu.Unlock()
}

func addressSet(addrs []netip.Addr) map[[4]byte]struct{} {
	m := make(map[[4]byte]struct{}, len(addrs))
	for _, a := range addrs {
		if a = a.Unmap(); a.Is4() {
			m[a.As4()] = struct{}{}
		}
	}
	return m
}

// Owns reports whether the responder answers for a.
func (r *Responder) Owns(a netip.Addr) bool {
	if a = a.Unmap(); !a.Is4() {
		return false
	}
	_, ok := (*r.owned.Load())[a.As4()]
	return ok
}

// Requests is the number of ARP requests received (for any address).
func (r *Responder) Requests() uint64 {
	return r.requests.Load() + r.kernelCounts()[slotRequests]
}

// Replies is the number of replies sent, from either path.
func (r *Responder) Replies() uint64 {
	return r.replies.Load() + r.kernelCounts()[slotReplies]
}

// Gratuitous is the number of gratuitous ARP replies sent.
func (r *Responder) Gratuitous() uint64 { return r.announced.Load() }

// Run answers requests until ctx ends, then closes its socket and returns
// nil. If the interface is missing or the socket fails it retries with
// backoff, so the responder survives the interface going away and back.
func (r *Responder) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("interface", r.iface)
	retry := minRetry
	for {
		err := r.serveOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		logger.Error(err, "ARP responder stopped; retrying", "after", retry)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retry):
		}
		retry = min(2*retry, maxRetry)
	}
}

// serveOnce opens the socket and answers until ctx ends or the socket fails.
// The receive loop runs on a goroutine locked to its OS thread.
func (r *Responder) serveOnce(ctx context.Context) error {
	ifi, err := net.InterfaceByName(r.iface)
	if err != nil {
		return fmt.Errorf("interface %s: %w", r.iface, err)
	}
	if len(ifi.HardwareAddr) != macLen {
		return fmt.Errorf("interface %s has no Ethernet address", r.iface)
	}
	logger := klog.FromContext(ctx).WithValues("interface", r.iface)
	var k *kernelPath
	if !r.kernelOff.Load() {
		if k, err = r.startKernel(ifi); err != nil {
			if !r.kernelLogged {
				logger.Info("Cannot answer ARP in the kernel; answering from user space", "reason", err.Error())
				r.kernelLogged = true
			}
			k = nil
		}
	}
	// With the kernel path the socket receives nothing: the program has
	// answered what there was to answer and the socket only sends.
	filter, path := requestFilter, PathSocket
	if k != nil {
		filter, path = receiveNothing, PathKernel
	}
	conn, err := listen(ifi.Index, filter)
	if err != nil {
		r.stopKernel(k)
		return fmt.Errorf("packet socket on %s: %w", r.iface, err)
	}
	defer conn.close()
	defer r.stopKernel(k)
	r.path.Store(&path)
	defer r.path.Store(nil)
	logger.Info("Answering ARP requests", "path", path)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		done <- r.serve(ctx, conn, ifi.HardwareAddr)
	}()
	stopAnnouncing := make(chan struct{})
	var announcer sync.WaitGroup
	announcer.Go(func() { r.announce(ctx, stopAnnouncing, conn, ifi.HardwareAddr) })
	defer func() {
		close(stopAnnouncing)
		announcer.Wait()
	}()
	var broken <-chan struct{} // the kernel path's address map failed
	if k != nil {
		broken = r.kernelBroken
	}
	select {
	case <-ctx.Done():
		conn.stop.Store(true) // the loop sees it within pollInterval
		<-done
		return nil
	case err := <-done:
		return err
	case <-broken:
		r.mu.Lock()
		err := r.kernelErr
		r.mu.Unlock()
		// Until the socket path takes over nothing is lost: the kernel path still
		// answers for the addresses it holds.
		r.kernelOff.Store(true)
		conn.stop.Store(true)
		<-done
		return fmt.Errorf("answering ARP in the kernel no more, from user space instead: %w", err)
	}
}

// startKernel loads the kernel path, fills its address map and attaches it to ifi.
func (r *Responder) startKernel(ifi *net.Interface) (*kernelPath, error) {
	k, err := loadKernelPath(ifi.HardwareAddr)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	var add [][4]byte
	for a := range *r.owned.Load() {
		add = append(add, a)
	}
	if err := k.set(add, nil); err != nil {
		r.mu.Unlock()
		k.close()
		return nil, fmt.Errorf("owned-address map: %w", err)
	}
	r.kern, r.kernelErr = k, nil
	select {
	case <-r.kernelBroken:
	default:
	}
	r.mu.Unlock()
	if err := k.attach(ifi.Index); err != nil {
		r.mu.Lock()
		r.kern = nil
		r.mu.Unlock()
		k.close()
		return nil, err
	}
	return k, nil
}

// stopKernel detaches k (if not nil), adds its counters to the responder's and
// closes it.
func (r *Responder) stopKernel(k *kernelPath) {
	if k == nil {
		return
	}
	if k.link != nil {
		_ = k.link.Close()
		k.link = nil
	}
	r.mu.Lock()
	if c, err := k.counts(); err == nil {
		r.requests.Add(c[slotRequests])
		r.replies.Add(c[slotReplies])
		for i := range r.drops {
			r.drops[i].Add(c[slotDrops+i])
		}
	}
	r.kern = nil
	r.mu.Unlock()
	k.close()
}

// announce sends the gratuitous ARP replies that are due until stop is closed;
// what is not sent yet stays pending for the next socket.
func (r *Responder) announce(ctx context.Context, stop <-chan struct{}, conn frameConn, ours net.HardwareAddr) {
	logger := klog.FromContext(ctx).WithValues("interface", r.iface)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if wait, ok := r.sendDue(logger, conn, ours, time.Now()); ok {
			timer.Reset(wait)
		} else {
			timer.Stop()
		}
		select {
		case <-stop:
			return
		case <-r.wake:
		case <-timer.C:
		}
	}
}

// sendDue sends every announcement due at now and says how long until the next one.
func (r *Responder) sendDue(logger klog.Logger, conn frameConn, ours net.HardwareAddr, now time.Time) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	owned := *r.owned.Load()
	var next time.Time
	for a, p := range r.pending {
		if _, ok := owned[a]; !ok {
			delete(r.pending, a)
			continue
		}
		if p.next.After(now) {
			if next.IsZero() || p.next.Before(next) {
				next = p.next
			}
			continue
		}
		addr := netip.AddrFrom4(a)
		if _, err := conn.Write(GratuitousReply(ours, addr)); err != nil {
			logger.Error(err, "Cannot send gratuitous ARP; retrying", "address", addr, "after", r.interval)
		} else {
			if p.left == r.count {
				logger.Info("Sending gratuitous ARP", "address", addr, "count", r.count)
			}
			r.announced.Add(1)
			if p.left--; p.left <= 0 {
				delete(r.pending, a)
				continue
			}
		}
		p.next = now.Add(r.interval)
		if next.IsZero() || p.next.Before(next) {
			next = p.next
		}
	}
	if next.IsZero() {
		return 0, false
	}
	return next.Sub(now), true
}

// frameConn is the part of a packet socket the responder uses.
type frameConn interface {
	Read(b []byte) (int, error)
	Write(b []byte) (int, error)
}

func (r *Responder) serve(ctx context.Context, conn frameConn, ours net.HardwareAddr) error {
	logger := klog.FromContext(ctx).WithValues("interface", r.iface)
	buf := make([]byte, 1514)
	reply := NewReplyBuffer(ours)
	owns := r.Owns
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		reason := Decide(buf[:n], ours, owns, reply)
		if reason != DropMalformed && reason != DropNotEthernetV4 && reason != DropNotRequest && reason != DropOwnFrame {
			r.requests.Add(1)
		}
		if reason != Answer {
			r.countDrop(reason)
			continue
		}
		if _, err := conn.Write(reply); err != nil {
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			r.countDrop(dropSendFailed)
			logger.Error(err, "Cannot send ARP reply", "to", net.HardwareAddr(reply[offEthDst:offEthDst+macLen]).String())
			continue
		}
		r.replies.Add(1)
		if v := logger.V(4); v.Enabled() {
			v.Info("Answered ARP request", "address", netip.AddrFrom4([4]byte(reply[offSPA:offSPA+ipv4Len])),
				"requester", netip.AddrFrom4([4]byte(reply[offTPA:offTPA+ipv4Len])))
		}
	}
}

// pollInterval bounds how long a blocked read waits before looking whether
// the responder should stop.
const pollInterval = 100 * time.Millisecond

// packetConn is a blocking AF_PACKET socket bound to one interface, receiving
// only what requestFilter passes.
type packetConn struct {
	fd   int
	stop atomic.Bool
}

// requestFilter passes ARP requests that this host did not send, untagged
// (a frame whose VLAN tag the interface took off is no request of this
// network), truncated to the part Decide reads, and drops everything else in
// the kernel, before it wakes the responder. The kernel path counts and
// answers exactly the frames this filter passes.
var requestFilter = []bpf.Instruction{
	bpf.LoadExtension{Num: bpf.ExtType},
	bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.PACKET_OUTGOING, SkipTrue: 7},
	bpf.LoadExtension{Num: bpf.ExtVLANTagPresent},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0, SkipTrue: 5},
	bpf.LoadAbsolute{Off: offEthType, Size: 2},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: etherTypeARP, SkipTrue: 3},
	bpf.LoadAbsolute{Off: offOp, Size: 2},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: opRequest, SkipTrue: 1},
	bpf.RetConstant{Val: ReplyLen},
	bpf.RetConstant{Val: 0},
}

// receiveNothing is the filter of a socket that only sends.
var receiveNothing = []bpf.Instruction{bpf.RetConstant{Val: 0}}

// listen opens the socket: created receiving nothing, given its filter, then
// bound to the ARP EtherType on the interface, so that no frame gets past
// without the filter. Reads block (for at most pollInterval).
//
// Bound to the ARP EtherType (not ETH_P_ALL, whose sockets see a frame before
// the TCX ingress programs run), the socket gets an incoming frame only after
// the kernel path has passed it on: a request the kernel path answered never
// reaches it, so there is never a second reply.
func listen(ifindex int, filter []bpf.Instruction) (*packetConn, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	c := &packetConn{fd: fd}
	raw, err := bpf.Assemble(filter)
	if err != nil {
		c.close()
		return nil, err
	}
	prog := make([]unix.SockFilter, len(raw))
	for i, ins := range raw {
		prog[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	tv := unix.NsecToTimeval(pollInterval.Nanoseconds())
	for _, step := range []func() error{
		func() error {
			return unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]})
		},
		func() error { return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv) },
		// Replies go straight to the driver: no queueing discipline to pass.
		func() error { return unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1) },
		func() error {
			return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(etherTypeARP), Ifindex: ifindex})
		},
	} {
		if err := step(); err != nil {
			c.close()
			return nil, err
		}
	}
	return c, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Read blocks until a frame arrives, returning net.ErrClosed once stop is set.
func (c *packetConn) Read(b []byte) (int, error) {
	for {
		if c.stop.Load() {
			return 0, net.ErrClosed
		}
		n, err := unix.Read(c.fd, b)
		switch {
		case err == nil:
			return n, nil
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
			continue
		default:
			return 0, err
		}
	}
}

// Write sends a frame on the bound interface.
func (c *packetConn) Write(b []byte) (int, error) {
	if c.stop.Load() {
		return 0, net.ErrClosed
	}
	return unix.Write(c.fd, b)
}

func (c *packetConn) close() { _ = unix.Close(c.fd) }
