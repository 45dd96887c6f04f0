package bgprouter

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// BFD are a router's BFD timers (RFC 5880) for the neighbors marked BFD, and what a
// BFD failure does to their BGP sessions.
type BFD struct {
	// MinRx and MinTx are the router's Required Min RX and Desired Min TX Intervals,
	// Multiplier its Detect Mult; zero: 300ms, 300ms, 3.
	MinRx, MinTx time.Duration
	Multiplier   int
	// Graceful makes a BFD failure a graceful restart of the BGP session (BIRD's `bfd
	// graceful`): BIRD keeps the node's routes, stale, for the restart time, instead
	// of dropping them at once as `bfd on` does. BIRD only.
	Graceful bool
}

// templateData is what the configuration templates see: the Config and the BFD values
// with their defaults.
type templateData struct{ Config }

// HasBFD reports whether any neighbor runs BFD.
func (d templateData) HasBFD() bool { return d.Config.hasBFD() }

// RxMillis, TxMillis and Mult are the BFD timers with their defaults.
func (b BFD) RxMillis() int64 { return millisOr300(b.MinRx) }
func (b BFD) TxMillis() int64 { return millisOr300(b.MinTx) }
func (b BFD) Mult() int {
	if b.Multiplier == 0 {
		return 3
	}
	return b.Multiplier
}

func millisOr300(d time.Duration) int64 {
	if d == 0 {
		return 300
	}
	return d.Milliseconds()
}

// BFDSession is one BFD session of a router: the neighbor's address and its state as
// the router words it ("Up", "Down", "Init", "AdminDown").
type BFDSession struct {
	Address string
	State   string
}

// BFDSessions returns BIRD's BFD sessions (`show bfd sessions`), by neighbor address.
func (b *BIRD) BFDSessions() (map[string]BFDSession, error) {
	out, err := b.Command("show", "bfd", "sessions")
	if err != nil {
		return nil, err
	}
	return parseBIRDBFD(out), nil
}

// parseBIRDBFD reads `show bfd sessions`:
//
//	bfd1:
//	IP address                Interface  State      Since         Interval  Timeout
//	10.225.51.11              eth0       Up         12:00:01.234    0.300    0.900
func parseBIRDBFD(out string) map[string]BFDSession {
	sessions := map[string]BFDSession{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || !strings.ContainsAny(f[0], ".:") || strings.HasSuffix(f[0], ":") {
			continue
		}
		sessions[f[0]] = BFDSession{Address: f[0], State: f[2]}
	}
	return sessions
}

// BFDSessions returns bfdd's BFD sessions (`show bfd peers json`), by neighbor address.
func (r *FRR) BFDSessions() (map[string]BFDSession, error) {
	out, err := r.daemonCommand("bfdd", "show bfd peers json")
	if err != nil {
		return nil, err
	}
	var peers []struct {
		Peer   string `json:"peer"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &peers); err != nil {
		return nil, fmt.Errorf("decoding %q: %w", out, err)
	}
	sessions := map[string]BFDSession{}
	for _, p := range peers {
		state := map[string]string{"up": "Up", "down": "Down", "init": "Init", "shutdown": "AdminDown"}[p.Status]
		if state == "" {
			state = p.Status
		}
		sessions[p.Peer] = BFDSession{Address: p.Peer, State: state}
	}
	return sessions, nil
}

// waitBFD polls a router's BFD sessions until the one with addr is in state.
func waitBFD(timeout time.Duration, addr, state string, read func() (map[string]BFDSession, error)) (map[string]BFDSession, error) {
	var got map[string]BFDSession
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		var err error
		got, err = read()
		return err == nil && got[addr].State == state, nil
	})
	return got, err
}

// WaitBFD polls until BIRD's BFD session with addr is in state.
func (b *BIRD) WaitBFD(addr, state string, timeout time.Duration) {
	b.t.Helper()
	if got, err := waitBFD(timeout, addr, state, b.BFDSessions); err != nil {
		out, _ := b.Command("show", "bfd", "sessions")
		b.t.Fatalf("BIRD's BFD session with %s is not %s: %v (%v)\n%s", addr, state, err, got, out)
	}
}

// WaitBFD polls until bfdd's BFD session with addr is in state.
func (r *FRR) WaitBFD(addr, state string, timeout time.Duration) {
	r.t.Helper()
	if got, err := waitBFD(timeout, addr, state, r.BFDSessions); err != nil {
		r.t.Fatalf("FRR's BFD session with %s is not %s: %v (%v)\n%s", addr, state, err, got, r.Log())
	}
}

// BFDPacketsIn returns how many BFD control packets bfdd received from addr (`show bfd
// peer ADDR counters json`).
func (r *FRR) BFDPacketsIn(addr string) (uint64, error) {
	out, err := r.daemonCommand("bfdd", "show bfd peer "+addr+" counters json")
	if err != nil {
		return 0, err
	}
	var c struct {
		In uint64 `json:"control-packet-input"`
	}
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		return 0, fmt.Errorf("decoding %q: %w", out, err)
	}
	return c.In, nil
}

// WaitBFDPackets polls until bfdd received n more BFD control packets from addr than
// when it is called. FRR 8.4's bfdd takes the C bit of a packet from the bit where RFC
// 5880 puts F (Final): until the neighbor sent a packet after its answer to bfdd's
// poll (bfdd polls when a session comes up, to move to its configured timers), bfdd
// believes the neighbor's BFD independent of its control plane
// (docs/bgp.md#bfd-and-graceful-restart). A few packets after Up, that poll is over.
func (r *FRR) WaitBFDPackets(addr string, n uint64, timeout time.Duration) {
	r.t.Helper()
	start, err := r.BFDPacketsIn(addr)
	if err != nil {
		r.t.Fatal(err)
	}
	var got uint64
	err = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		got, err = r.BFDPacketsIn(addr)
		return err == nil && got >= start+n, nil
	})
	if err != nil {
		r.t.Fatalf("bfdd's count of BFD packets from %s went from %d to %d in %s, want %d more: %v", addr, start, got, timeout, n, err)
	}
}
