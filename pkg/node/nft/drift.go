package nft

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// Drift is a change to juneau's tables that juneau did not make: someone ran
// `nft flush table ip juneau` or deleted an element, or notifications were
// lost and such a change may have gone unseen. The Programmer trusts what it
// applied, so the remedy is a full sync (Invalidate, then Sync).
type Drift struct {
	// Processes are the command names of the processes that committed the
	// changes, sorted.
	Processes []string
	// Changes counts the tables, chains, rules, sets and elements of ours
	// they added or deleted.
	Changes int
	// Lost means change notifications were dropped (the socket's receive
	// buffer overflowed): another process may have changed our tables unseen.
	Lost bool
}

func (d Drift) String() string {
	if d.Lost && d.Changes == 0 {
		return "change notifications lost"
	}
	s := fmt.Sprintf("%d objects changed by %s", d.Changes, strings.Join(d.Processes, ", "))
	if d.Lost {
		s += "; change notifications lost"
	}
	return s
}

// merge adds o to d.
func (d *Drift) merge(o Drift) {
	for _, p := range o.Processes {
		if !slices.Contains(d.Processes, p) {
			d.Processes = append(d.Processes, p)
		}
	}
	slices.Sort(d.Processes)
	d.Changes += o.Changes
	d.Lost = d.Lost || o.Lost
}

// Timings of a DriftWatcher.
const (
	// driftDebounce gathers the transactions of a burst (a script running nft
	// several times) into one report.
	driftDebounce = 50 * time.Millisecond
	// lostInterval is the least time between two reports of lost
	// notifications: should our own full syncs ever overflow the socket, the
	// repairs they cause must not follow each other back to back. A loss is
	// reported late, never dropped.
	lostInterval = 5 * time.Second
	// driftReceiveBuffer holds the notifications of our own largest
	// transactions while the watcher reads them, so that they are never lost
	// (a loss is repaired by a full sync, which would cause another): a full
	// sync of 100,000 own and 100,000 in-cluster mappings sends 700,000
	// notifications, 58 MB, and overflowed a buffer of 32 MB while the watcher
	// read them; two such syncs fit this one unread. The kernel takes memory
	// for what waits to be read only.
	driftReceiveBuffer = 256 << 20
)

// DriftWatcher reports changes to juneau's tables made by other processes, from
// the kernel's nftables change notifications (the NFNLGRP_NFTABLES netlink
// group) in the namespace programmed, so that they are repaired within a
// moment rather than at the next periodic resync.
//
// The kernel sends, for every committed transaction, a notification per object
// added or deleted and then one naming the generation and the command name of
// the committing process. A transaction that touched a table named TableName
// (ip or ip6) counts as drift unless its process has this process's command
// name: the agent itself, or another agent on the node during a rollout, whose
// rules are the same. The process id is no help: the kernel reports it in the
// initial PID namespace, which a containerised agent does not see.
type DriftWatcher struct {
	opts Options
	// self is this process's command name (as the kernel reports it).
	self string
	// receiveBuffer of the notification socket; tests make it small.
	receiveBuffer int
	debounce      time.Duration
	lostInterval  time.Duration
	// joined, when set, is called once the socket receives notifications.
	joined func()
	// held, when set, keeps the reader from reading until it is closed (tests: what
	// queues meanwhile must fit the receive buffer).
	held chan struct{}
}

// NewDriftWatcher returns a watcher of the namespace of opts; it opens nothing
// until Run.
func NewDriftWatcher(opts Options) *DriftWatcher {
	return &DriftWatcher{opts: opts, self: selfComm(), receiveBuffer: driftReceiveBuffer,
		debounce: driftDebounce, lostInterval: lostInterval}
}

// selfComm is the command name the kernel gives this process's transactions.
func selfComm() string {
	b, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
}

// Run watches until ctx ends and calls report (from one goroutine, never
// concurrently) for every burst of drift. A failure to open or read the
// notification socket is logged and retried with back-off: without the
// watcher, drift is still repaired by the periodic resync.
func (w *DriftWatcher) Run(ctx context.Context, report func(Drift)) error {
	logger := klog.FromContext(ctx)
	backoff := time.Second
	for ctx.Err() == nil {
		err := w.watch(ctx, report)
		if ctx.Err() != nil {
			break
		}
		logger.Error(err, "Watching nftables changes failed; drift is repaired by the periodic resync until it works again", "retryIn", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Minute)
	}
	return nil
}

// watch runs one notification socket until ctx ends or the socket fails.
func (w *DriftWatcher) watch(ctx context.Context, report func(Drift)) error {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: w.opts.NetNS})
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer c.Close()
	if err := c.JoinGroup(unix.NFNLGRP_NFTABLES); err != nil {
		return fmt.Errorf("joining the nftables notification group: %w", err)
	}
	if err := setReceiveBuffer(c, w.receiveBuffer); err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Watching nftables changes made by other processes", "table", TableName, "self", w.self)
	if w.joined != nil {
		w.joined()
	}

	type received struct {
		msgs []netlink.Message
		err  error
	}
	recv := make(chan received)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		if w.held != nil {
			select {
			case <-w.held:
			case <-stop:
				return
			}
		}
		for {
			msgs, err := c.Receive()
			select {
			case recv <- received{msgs, err}:
			case <-stop:
				return
			}
			if err != nil && !errors.Is(err, unix.ENOBUFS) {
				return
			}
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			_ = c.Close() // ends the blocked Receive
		case <-stop:
		}
	}()

	tr := transactions{self: w.self}
	var (
		pending  Drift
		flush    <-chan time.Time // fires when a burst is over
		lastLost time.Time
	)
	for {
		select {
		case <-ctx.Done():
			return nil
		case r := <-recv:
			if r.err != nil {
				if !errors.Is(r.err, unix.ENOBUFS) {
					return fmt.Errorf("reading nftables notifications: %w", r.err)
				}
				tr.reset() // the transaction in progress lost some of its messages
				pending.merge(Drift{Lost: true})
			}
			for _, m := range r.msgs {
				if d, ok := tr.message(m); ok {
					pending.merge(d)
				}
			}
			if flush == nil && (pending.Changes > 0 || pending.Lost) {
				wait := w.debounce
				if pending.Changes == 0 && !lastLost.IsZero() {
					wait = max(wait, w.lostInterval-time.Since(lastLost))
				}
				flush = time.After(wait)
			}
		case <-flush:
			flush = nil
			if pending.Lost {
				lastLost = time.Now()
			}
			report(pending)
			pending = Drift{}
		}
	}
}

// setReceiveBuffer raises the socket's receive buffer (past rmem_max with
// CAP_NET_ADMIN, as the agent has).
func setReceiveBuffer(c *netlink.Conn, n int) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	cerr := raw.Control(func(fd uintptr) {
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n) != nil {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, n)
		}
	})
	return errors.Join(cerr, serr)
}

// transactions follows the notifications of committed transactions: object
// messages, then the transaction's NEWGEN message.
type transactions struct {
	self string
	// ours counts the objects of our tables the current transaction changed.
	ours int
}

func (t *transactions) reset() { t.ours = 0 }

// message takes one notification and, at the end of a transaction that
// another process committed and that changed our tables, returns it as drift.
func (t *transactions) message(m netlink.Message) (Drift, bool) {
	if uint16(m.Header.Type)>>8 != unix.NFNL_SUBSYS_NFTABLES || len(m.Data) < 4 {
		return Drift{}, false
	}
	switch msgType := uint16(m.Header.Type) & 0xff; msgType {
	case unix.NFT_MSG_NEWGEN:
		ours := t.ours
		t.ours = 0
		if ours == 0 {
			return Drift{}, false
		}
		comm := genProcess(m.Data[4:])
		if comm == t.self {
			return Drift{}, false
		}
		if comm == "" {
			comm = "unknown"
		}
		return Drift{Processes: []string{comm}, Changes: ours}, true
	case unix.NFT_MSG_NEWTABLE, unix.NFT_MSG_DELTABLE, unix.NFT_MSG_NEWCHAIN, unix.NFT_MSG_DELCHAIN,
		unix.NFT_MSG_NEWRULE, unix.NFT_MSG_DELRULE, unix.NFT_MSG_NEWSET, unix.NFT_MSG_DELSET,
		unix.NFT_MSG_NEWSETELEM, unix.NFT_MSG_DELSETELEM, unix.NFT_MSG_NEWOBJ, unix.NFT_MSG_DELOBJ,
		unix.NFT_MSG_NEWFLOWTABLE, unix.NFT_MSG_DELFLOWTABLE:
		if family := m.Data[0]; (family == unix.NFPROTO_IPV4 || family == unix.NFPROTO_IPV6) && string(tableOf(m.Data[4:])) == TableName {
			t.ours++
		}
	}
	return Drift{}, false
}

// tableOf reads the table an object message names: attribute 1 of every kind
// (NFTA_TABLE_NAME, NFTA_CHAIN_TABLE, NFTA_RULE_TABLE, NFTA_SET_TABLE,
// NFTA_SET_ELEM_LIST_TABLE, NFTA_OBJ_TABLE, NFTA_FLOWTABLE_TABLE), without a
// copy: a full sync at scale sends hundreds of thousands of messages.
func tableOf(attrs []byte) []byte {
	for len(attrs) >= unix.NLA_HDRLEN {
		n := int(binary.NativeEndian.Uint16(attrs))
		if n < unix.NLA_HDRLEN || n > len(attrs) {
			return nil
		}
		if binary.NativeEndian.Uint16(attrs[2:])&^(unix.NLA_F_NESTED|unix.NLA_F_NET_BYTEORDER) == 1 {
			return bytes.TrimRight(attrs[unix.NLA_HDRLEN:n], "\x00")
		}
		attrs = attrs[min(len(attrs), (n+unix.NLA_ALIGNTO-1)&^(unix.NLA_ALIGNTO-1)):]
	}
	return nil
}

// genProcess reads the command name of a NEWGEN message (NFTA_GEN_PROC_NAME).
func genProcess(attrs []byte) string {
	ad, err := netlink.NewAttributeDecoder(attrs)
	if err != nil {
		return ""
	}
	ad.ByteOrder = binary.BigEndian
	for ad.Next() {
		if ad.Type() == unix.NFTA_GEN_PROC_NAME {
			return ad.String()
		}
	}
	return ""
}
