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
)

// fakeConn feeds frames to the responder; before each read it may run a hook
// (to change the owned addresses mid-stream). Reads end with errDone.
type fakeConn struct {
	in     [][]byte
	before []func()
	sent   [][]byte
	to     []net.HardwareAddr
}

var errDone = errors.New("no more frames")

func (c *fakeConn) ReadFrom(b []byte) (int, net.Addr, error) {
	if len(c.in) == 0 {
		return 0, nil, errDone
	}
	if len(c.before) > 0 && c.before[0] != nil {
		c.before[0]()
	}
	if len(c.before) > 0 {
		c.before = c.before[1:]
	}
	n := copy(b, c.in[0])
	c.in = c.in[1:]
	return n, nil, nil
}

func (c *fakeConn) WriteTo(b []byte, _ net.Addr) (int, error) {
	c.sent = append(c.sent, bytes.Clone(b))
	c.to = append(c.to, net.HardwareAddr(bytes.Clone(b[:6])))
	return len(b), nil
}

func TestServeAnswersOwnedAddressesOnly(t *testing.T) {
	r := NewResponder("ext0")
	zero := net.HardwareAddr{0, 0, 0, 0, 0, 0}
	req := frame(t, ethernet.Broadcast, peerMAC, arp.OperationRequest, peerMAC, client, zero, eip)
	garp := frame(t, ethernet.Broadcast, peerMAC, arp.OperationRequest, peerMAC, eip, zero, eip)
	conn := &fakeConn{
		in: [][]byte{req, req, garp, req},
		before: []func(){
			nil, // owns nothing yet
			func() { r.SetAddresses([]netip.Addr{eip, netip.MustParseAddr("2001:db8::1")}) },
			nil,
			func() { r.SetAddresses(nil) },
		},
	}
	err := r.Serve(context.Background(), conn, ourMAC)
	if !errors.Is(err, errDone) {
		t.Fatalf("serve ended with %v", err)
	}
	if len(conn.sent) != 1 || !bytes.Equal(conn.to[0], peerMAC) {
		t.Fatalf("sent %d replies to %v; want one, to the requester", len(conn.sent), conn.to)
	}
	var f ethernet.Frame
	var p arp.Packet
	if err := f.UnmarshalBinary(conn.sent[0]); err != nil {
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
