package arp

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"

	"github.com/loutres/juneau/pkg/node/responder/respondertest"
)

func TestServeAnswersOwnedAddressesOnly(t *testing.T) {
	r := NewResponder("ext0")
	zero := net.HardwareAddr{0, 0, 0, 0, 0, 0}
	req := frame(t, ethernet.Broadcast, peerMAC, arp.OperationRequest, peerMAC, client, zero, eip)
	garp := frame(t, ethernet.Broadcast, peerMAC, arp.OperationRequest, peerMAC, eip, zero, eip)
	conn := &respondertest.Conn{
		In: [][]byte{req, req, garp, req},
		Before: []func(){
			nil, // owns nothing yet
			func() { r.SetAddresses([]netip.Addr{eip, netip.MustParseAddr("2001:db8::1")}) },
			nil,
			func() { r.SetAddresses(nil) },
		},
	}
	err := r.Serve(context.Background(), conn, ourMAC)
	if !errors.Is(err, respondertest.ErrDone) {
		t.Fatalf("serve ended with %v", err)
	}
	if len(conn.Sent) != 1 || !bytes.Equal(conn.To[0], peerMAC) {
		t.Fatalf("sent %d replies to %v; want one, to the requester", len(conn.Sent), conn.To)
	}
	var f ethernet.Frame
	var p arp.Packet
	if err := f.UnmarshalBinary(conn.Sent[0]); err != nil {
		t.Fatal(err)
	}
	if err := p.UnmarshalBinary(f.Payload); err != nil {
		t.Fatal(err)
	}
	if p.Operation != arp.OperationReply || p.SenderIP != eip || !bytes.Equal(p.SenderHardwareAddr, ourMAC) {
		t.Errorf("reply %+v", p)
	}
	if r.Requests() != 4 || r.Replies() != 1 {
		t.Errorf("counters: requests %d replies %d; want 4 and 1", r.Requests(), r.Replies())
	}
}

func TestSetAddresses(t *testing.T) {
	r := NewResponder("ext0")
	if r.Owns(eip) {
		t.Error("new responder owns an address")
	}
	r.SetAddresses([]netip.Addr{netip.MustParseAddr("::ffff:10.225.51.5")})
	if !r.Owns(eip) {
		t.Error("IPv4-mapped address not owned as IPv4")
	}
	r.SetAddresses(nil)
	if r.Owns(eip) {
		t.Error("address still owned after SetAddresses(nil)")
	}
}

func TestRunRetriesAndStops(t *testing.T) {
	// The interface does not exist: Run keeps retrying until ctx ends, then
	// returns nil.
	r := NewResponder("jn-missing0")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run returned %v after cancel", err)
	}
}
