package arp

import (
	"bytes"
	"net"
	"net/netip"
	"testing"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
)

var (
	ourMAC   = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}
	peerMAC  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x64}
	otherMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x99}
	eip      = netip.MustParseAddr("10.225.51.5")
	client   = netip.MustParseAddr("10.225.51.100")
)

func owns(a netip.Addr) bool { return a == eip }

// frame builds an Ethernet frame carrying an ARP packet.
func frame(t testing.TB, dst, src net.HardwareAddr, op arp.Operation, sha net.HardwareAddr, spa netip.Addr, tha net.HardwareAddr, tpa netip.Addr) []byte {
	t.Helper()
	p := &arp.Packet{
		HardwareType: 1, ProtocolType: uint16(ethernet.EtherTypeIPv4), HardwareAddrLength: 6, IPLength: 4,
		Operation: op, SenderHardwareAddr: sha, SenderIP: spa, TargetHardwareAddr: tha, TargetIP: tpa,
	}
	pb, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	fb, err := (&ethernet.Frame{Destination: dst, Source: src, EtherType: ethernet.EtherTypeARP, Payload: pb}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return fb
}

func TestDecide(t *testing.T) {
	zeroMAC := net.HardwareAddr{0, 0, 0, 0, 0, 0}
	request := frame(t, ethernet.Broadcast, peerMAC, arp.OperationRequest, peerMAC, client, zeroMAC, eip)
	ipFrame, _ := (&ethernet.Frame{Destination: ourMAC, Source: peerMAC, EtherType: ethernet.EtherTypeIPv4, Payload: make([]byte, 46)}).MarshalBinary()
	wrongHW := bytes.Clone(request)
	wrongHW[14+1] = 6 // hardware type 6 (IEEE 802) instead of Ethernet
	tests := []struct {
		name  string
		frame []byte
		want  DropReason
	}{
		{"broadcast request for owned address", request, Answer},
		{"unicast request (cache refresh)", frame(t, ourMAC, peerMAC, arp.OperationRequest, peerMAC, client, ourMAC, eip), Answer},
		{"request for another address", frame(t, ethernet.Broadcast, peerMAC, arp.OperationRequest, peerMAC, client, zeroMAC, netip.MustParseAddr("10.225.51.6")), DropNotOwned},
		{"reply", frame(t, ourMAC, peerMAC, arp.OperationReply, peerMAC, client, ourMAC, eip), DropNotRequest},
		{"gratuitous request", frame(t, ethernet.Broadcast, peerMAC, arp.OperationRequest, peerMAC, eip, zeroMAC, eip), DropAnnouncement},
		{"gratuitous reply", frame(t, ethernet.Broadcast, peerMAC, arp.OperationReply, peerMAC, eip, ethernet.Broadcast, eip), DropNotRequest},
		{"probe", frame(t, ethernet.Broadcast, peerMAC, arp.OperationRequest, peerMAC, netip.IPv4Unspecified(), zeroMAC, eip), DropProbe},
		{"our own request", frame(t, ethernet.Broadcast, ourMAC, arp.OperationRequest, ourMAC, netip.MustParseAddr("10.225.51.2"), zeroMAC, eip), DropOwnFrame},
		{"unicast to someone else", frame(t, otherMAC, peerMAC, arp.OperationRequest, peerMAC, client, otherMAC, eip), DropNotForUs},
		{"multicast sender", frame(t, ethernet.Broadcast, peerMAC, arp.OperationRequest, net.HardwareAddr{0x01, 0, 0x5e, 0, 0, 1}, client, zeroMAC, eip), DropBadSender},
		{"zero sender", frame(t, ethernet.Broadcast, peerMAC, arp.OperationRequest, zeroMAC, client, zeroMAC, eip), DropBadSender},
		{"not ARP", ipFrame, DropNotEthernetV4},
		{"not Ethernet hardware", wrongHW, DropNotEthernetV4},
		{"truncated ARP", request[:14+10], DropMalformed},
		{"truncated Ethernet", request[:10], DropMalformed},
		{"empty", nil, DropMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reply := NewReplyBuffer(ourMAC)
			empty := bytes.Clone(reply)
			reason := Decide(tt.frame, ourMAC, owns, reply)
			if reason != tt.want {
				t.Fatalf("reason = %q, want %q", reason, tt.want)
			}
			if written := !bytes.Equal(reply, empty); written != (tt.want == Answer) {
				t.Fatalf("reply written: %v, with reason %q", written, reason)
			}
		})
	}
}

func TestDecideReplyContents(t *testing.T) {
	b := NewReplyBuffer(ourMAC)
	if reason := Decide(frame(t, ethernet.Broadcast, peerMAC, arp.OperationRequest, peerMAC, client, net.HardwareAddr{0, 0, 0, 0, 0, 0}, eip), ourMAC, owns, b); reason != Answer {
		t.Fatalf("reason %q", reason)
	}
	if len(b) != 60 {
		t.Errorf("reply of %d bytes, want a minimum Ethernet frame of 60", len(b))
	}
	var f ethernet.Frame
	if err := f.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.Destination, peerMAC) || !bytes.Equal(f.Source, ourMAC) || f.EtherType != ethernet.EtherTypeARP {
		t.Errorf("reply frame %v → %v type %v; want unicast from us to the requester", f.Source, f.Destination, f.EtherType)
	}
	var p arp.Packet
	if err := p.UnmarshalBinary(f.Payload); err != nil {
		t.Fatal(err)
	}
	if p.Operation != arp.OperationReply || !bytes.Equal(p.SenderHardwareAddr, ourMAC) || p.SenderIP != eip ||
		!bytes.Equal(p.TargetHardwareAddr, peerMAC) || p.TargetIP != client {
		t.Errorf("reply = %+v", p)
	}
	// Answering another request reuses the buffer: nothing of the first stays.
	other := netip.MustParseAddr("10.225.51.101")
	if Decide(frame(t, ourMAC, otherMAC, arp.OperationRequest, otherMAC, other, ourMAC, eip), ourMAC, owns, b) != Answer {
		t.Fatal("second request not answered")
	}
	if err := f.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if err := p.UnmarshalBinary(f.Payload); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.Destination, otherMAC) || p.TargetIP != other || !bytes.Equal(p.TargetHardwareAddr, otherMAC) || p.SenderIP != eip {
		t.Errorf("second reply %+v to %v", p, f.Destination)
	}
}

// TestDecideAllocatesNothing: the per-frame path allocates no memory.
func TestDecideAllocatesNothing(t *testing.T) {
	req := frame(t, ethernet.Broadcast, peerMAC, arp.OperationRequest, peerMAC, client, net.HardwareAddr{0, 0, 0, 0, 0, 0}, eip)
	r := NewResponder("ext0")
	r.SetAddresses([]netip.Addr{eip})
	b, o := NewReplyBuffer(ourMAC), r.Owns
	if n := testing.AllocsPerRun(100, func() { Decide(req, ourMAC, o, b) }); n != 0 {
		t.Errorf("%v allocations per frame", n)
	}
}
