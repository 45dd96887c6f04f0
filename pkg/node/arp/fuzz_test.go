package arp

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
)

// fuzzOwns owns every address whose last byte is odd, so half of what the fuzzer asks
// for is ours.
func fuzzOwns(a netip.Addr) bool { return a.Is4() && a.As4()[3]%2 == 1 }

// FuzzDecide feeds arbitrary frames to Decide and checks it against reference, an
// independent reading of the frame's bytes (RFC 826 plus juneau's rules): same
// decision; when answering, the reply exactly the one RFC 826 prescribes whatever an
// earlier answer left in the reused buffer; otherwise the buffer untouched; the input
// always untouched.
func FuzzDecide(f *testing.F) {
	zero := net.HardwareAddr{0, 0, 0, 0, 0, 0}
	eip, other := netip.MustParseAddr("10.225.51.5"), netip.MustParseAddr("10.225.51.6")
	f.Add(frame(f, ethernet.Broadcast, peerMAC, arp.OperationRequest, peerMAC, client, zero, eip))
	f.Add(frame(f, ourMAC, peerMAC, arp.OperationRequest, peerMAC, client, ourMAC, eip))
	f.Add(frame(f, ethernet.Broadcast, peerMAC, arp.OperationRequest, peerMAC, client, zero, other))
	f.Add(frame(f, ourMAC, peerMAC, arp.OperationReply, peerMAC, client, ourMAC, eip))
	f.Add(frame(f, ethernet.Broadcast, peerMAC, arp.OperationRequest, peerMAC, eip, zero, eip))
	f.Add(frame(f, ethernet.Broadcast, peerMAC, arp.OperationRequest, peerMAC, netip.IPv4Unspecified(), zero, eip))
	f.Add(frame(f, ethernet.Broadcast, ourMAC, arp.OperationRequest, ourMAC, client, zero, eip))
	f.Add(frame(f, otherMAC, peerMAC, arp.OperationRequest, peerMAC, client, otherMAC, eip))
	f.Add(frame(f, ethernet.Broadcast, peerMAC, arp.OperationRequest, net.HardwareAddr{1, 0, 0x5e, 0, 0, 1}, client, zero, eip))
	tagged, err := (&ethernet.Frame{Destination: ethernet.Broadcast, Source: peerMAC, VLAN: &ethernet.VLAN{ID: 10},
		EtherType: ethernet.EtherTypeARP, Payload: frame(f, ethernet.Broadcast, peerMAC, arp.OperationRequest, peerMAC, client, zero, eip)[14:]}).MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tagged)
	// The responder reuses one reply buffer: make it hold an earlier answer.
	earlier := frame(f, ethernet.Broadcast, otherMAC, arp.OperationRequest, otherMAC, netip.MustParseAddr("10.225.51.200"), zero, netip.MustParseAddr("10.225.51.7"))
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := slices.Clone(in)
		reply := NewReplyBuffer(ourMAC)
		if Decide(earlier, ourMAC, fuzzOwns, reply) != Answer {
			t.Fatal("the earlier request is not answered")
		}
		before := slices.Clone(reply)
		reason := Decide(in, ourMAC, fuzzOwns, reply)
		if !bytes.Equal(in, orig) {
			t.Fatalf("Decide changed its input")
		}
		want, acceptable := reference(in)
		if reason != want && !slices.Contains(acceptable, reason) {
			t.Fatalf("Decide(% x) = %q, the reference says %q", in, reason, want)
		}
		if reason == Answer {
			checkReply(t, in, reply)
		} else if !bytes.Equal(reply, before) {
			t.Fatalf("Decide(% x) = %q wrote into the reply buffer", in, reason)
		}
	})
}

// reference decides from the raw bytes. For frames that are not plain (untagged)
// Ethernet/IPv4 ARP it accepts either "malformed" or "not Ethernet/IPv4 ARP": which of
// the two a broken header deserves is a matter of taste, not answering it is not.
func reference(b []byte) (DropReason, []DropReason) {
	notARP := []DropReason{DropMalformed, DropNotEthernetV4}
	if len(b) < 14 {
		return DropMalformed, nil
	}
	if binary.BigEndian.Uint16(b[12:14]) != 0x0806 {
		return DropNotEthernetV4, notARP
	}
	p := b[14:]
	if len(p) < 8 {
		return DropMalformed, nil
	}
	htype, ptype, hlen, plen, op := binary.BigEndian.Uint16(p[0:2]), binary.BigEndian.Uint16(p[2:4]), int(p[4]), int(p[5]), binary.BigEndian.Uint16(p[6:8])
	if htype != 1 || ptype != 0x0800 || hlen != 6 || plen != 4 {
		return DropNotEthernetV4, notARP
	}
	if len(p) < 28 {
		return DropMalformed, nil
	}
	dst, src := b[0:6], b[6:12]
	sha, spa, tpa := p[8:14], netip.AddrFrom4([4]byte(p[14:18])), netip.AddrFrom4([4]byte(p[24:28]))
	switch {
	case op != 1:
		return DropNotRequest, nil
	case bytes.Equal(src, ourMAC) || bytes.Equal(sha, ourMAC):
		return DropOwnFrame, nil
	case !bytes.Equal(dst, ethernet.Broadcast) && !bytes.Equal(dst, ourMAC):
		return DropNotForUs, nil
	case sha[0]&1 == 1 || bytes.Equal(sha, make([]byte, 6)):
		return DropBadSender, nil
	case spa.IsUnspecified():
		return DropProbe, nil
	case spa == tpa:
		return DropAnnouncement, nil
	case !fuzzOwns(tpa):
		return DropNotOwned, nil
	}
	return Answer, nil
}

// checkReply: the reply RFC 826 prescribes, unicast to the requester, as bytes on the wire.
func checkReply(t *testing.T, in, out []byte) {
	t.Helper()
	p := in[14:]
	sha, spa, tpa := net.HardwareAddr(p[8:14]), netip.AddrFrom4([4]byte(p[14:18])), netip.AddrFrom4([4]byte(p[24:28]))
	// Ethernet header, the ARP reply, then zeros up to the 60-byte minimum frame.
	want := slices.Concat([]byte(sha), []byte(ourMAC), []byte{0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 2},
		[]byte(ourMAC), tpa.AsSlice(), []byte(sha), spa.AsSlice(), make([]byte, 60-42))
	if !bytes.Equal(out, want) {
		t.Fatalf("reply to % x is\n% x, want\n% x", in, out, want)
	}
	if reason := Decide(out, ourMAC, fuzzOwns, NewReplyBuffer(ourMAC)); reason != DropNotRequest {
		t.Fatalf("our own reply is judged %q, want %q", reason, DropNotRequest)
	}
}
