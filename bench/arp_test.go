package main

import (
	"net"
	"net/netip"
	"testing"

	ndpresponder "github.com/loutres/juneau/pkg/node/ndp"
)

// TestNSFrame: the solicitation row 9 sends with IPv6 mappings is one juneau's NDP
// responder answers for an owned target, and only for it; the probe takes that answer
// as the reply, and neither another target's nor its own solicitation.
func TestNSFrame(t *testing.T) {
	client, node := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}
	target := netip.MustParseAddr("2001:db8:52::7")
	frame := nsFrame(client, netip.MustParseAddr("fd00:225:51::100"), target)
	reply := ndpresponder.NewReplyBuffer(node)
	owns := func(a netip.Addr) bool { return a == target }
	if why := ndpresponder.Decide(frame, node, owns, reply); why != ndpresponder.Answer {
		t.Fatalf("not answered: %s", why)
	}
	tp := &arpTopology{ndp: true}
	if !tp.isReply(reply, target) || tp.isReply(reply, netip.MustParseAddr("2001:db8:52::8")) || tp.isReply(frame, target) {
		t.Error("the advertisement is not told apart as the reply for its target (and only for it)")
	}
	other := nsFrame(client, netip.MustParseAddr("fd00:225:51::100"), netip.MustParseAddr("2001:db8:52::8"))
	if why := ndpresponder.Decide(other, node, owns, reply); why != ndpresponder.DropNotOwned {
		t.Fatalf("a target not owned: %q, want %q", why, ndpresponder.DropNotOwned)
	}
}
