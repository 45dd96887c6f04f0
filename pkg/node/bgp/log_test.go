package bgp

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr/funcr"
)

func TestLogHandler(t *testing.T) {
	var lines []string
	logger := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 2})
	var peers recordedPeerLog
	var stopping atomic.Bool
	h := newLogHandler(logger, &peers, &stopping)
	gobgp := slog.New(h)

	// What GoBGP's FSM does: a logger per peer, a debug record per failed attempt.
	peerLog := gobgp.With(slog.String("Topic", "Peer"), slog.String("Key", "10.225.51.1"))
	peerLog.Debug("failed to connect", slog.String("Error", "dial tcp 10.225.51.1:179: connect: connection refused"))
	peerLog.Debug("try to connect")
	peerLog.Debug("outgoing connection IO error", slog.String("reason", "read-failed"))
	peerLog.Info("Peer Up", slog.String("State", "BGP_FSM_OPENCONFIRM"))
	gobgp.WithGroup("fsm").Warn("sent notification", slog.Int("Code", 6), slog.Group("Data", slog.String("Remote Addr", "x")))
	peerLog.Info("sent notification", slog.String("State", "BGP_FSM_ACTIVE"), slog.Int("Code", 2), slog.Int("Subcode", 2))
	gobgp.Error("failed to stop BGP server", slog.String("Error", "BGP server is not running"))
	// GoBGP's BFD: a record per expiry or Down from the router, the router as "Peer".
	gobgp.Warn("Expired", slog.String("Topic", "bfd"), slog.String("Peer", "10.225.51.1"))
	gobgp.Warn("Remote peer signaled BFD down", slog.String("Topic", "bfd"), slog.String("Peer", "10.225.51.2"))
	gobgp.Warn("Expired", slog.String("Topic", "Peer"), slog.String("Peer", "10.225.51.3"))
	stopping.Store(true)
	gobgp.Error("failed to stop BGP server", slog.String("Error", "BGP server is not running"))

	if len(peers.dials) != 1 || !strings.Contains(peers.dials[0], "10.225.51.1: dial tcp 10.225.51.1:179: connect: connection refused") {
		t.Errorf("dial failures reported: %q, want one for %s", peers.dials, routerA)
	}
	if len(peers.notifications) != 1 || peers.notifications[0] != "10.225.51.1: 2/2" {
		t.Errorf("notifications reported: %q, want 2/2 for %s (the one without a peer is left out)", peers.notifications, routerA)
	}
	if len(peers.setups) != 1 || peers.setups[0] != "10.225.51.1: read-failed" {
		t.Errorf("setup failures reported: %q", peers.setups)
	}
	if strings.Join(peers.bfd, ", ") != "10.225.51.1: remote false, 10.225.51.2: remote true" {
		t.Errorf("BFD downs reported: %q, want an expiry for 10.225.51.1 and a Down from 10.225.51.2 (not the record of another topic)", peers.bfd)
	}
	want := []string{
		`"level"=2 "msg"="Peer Up" "Topic"="Peer" "Key"="10.225.51.1" "State"="BGP_FSM_OPENCONFIRM"`,
		`"level"=0 "msg"="sent notification" "fsm.Code"=6 "fsm.Data.RemoteAddr"="x"`,
		`"level"=2 "msg"="sent notification" "Topic"="Peer" "Key"="10.225.51.1" "State"="BGP_FSM_ACTIVE" "Code"=2 "Subcode"=2`,
		`"msg"="failed to stop BGP server" "error"=null "Error"="BGP server is not running"`,
		`"level"=0 "msg"="Expired" "Topic"="bfd" "Peer"="10.225.51.1"`,
		`"level"=0 "msg"="Remote peer signaled BFD down" "Topic"="bfd" "Peer"="10.225.51.2"`,
		`"level"=0 "msg"="Expired" "Topic"="Peer" "Peer"="10.225.51.3"`,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("klog lines:\n%s\nwant (debug dropped at verbosity 2, the stop failure dropped while stopping):\n%s",
			strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

func TestReadableNotification(t *testing.T) {
	for code, want := range map[string]string{
		"code 2(open) subcode 2(bad peer as)":                      "open: bad peer as",
		"code 4(hold timer expired) subcode 0(undefined)":          "hold timer expired",
		"code 6(cease) subcode 5(connection rejected)":             "cease: connection rejected",
		"code 4(hold timer expired) subcode 1(hold timer expired)": "hold timer expired",
		"something else": "something else",
	} {
		if got := readable(code); got != want {
			t.Errorf("readable(%q) = %q, want %q", code, got, want)
		}
	}
}

type recordedPeerLog struct{ dials, notifications, setups, bfd []string }

func (r *recordedPeerLog) bfdDown(peer netip.Addr, remote bool) {
	r.bfd = append(r.bfd, fmt.Sprintf("%s: remote %v", peer, remote))
}

func (r *recordedPeerLog) setupFailed(peer netip.Addr, reason string) {
	r.setups = append(r.setups, peer.String()+": "+reason)
}

func (r *recordedPeerLog) dialFailed(peer netip.Addr, errText string) {
	r.dials = append(r.dials, peer.String()+": "+errText)
}

func (r *recordedPeerLog) notificationSent(peer netip.Addr, code, subcode uint8) {
	r.notifications = append(r.notifications, fmt.Sprintf("%s: %d/%d", peer, code, subcode))
}
