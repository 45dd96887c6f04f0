package arp

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"

	"github.com/loutres/juneau/pkg/node/responder"
)

// DropReason says why a frame got no reply. The empty reason means "answer".
type DropReason = responder.Reason

// Reasons a frame is not answered.
const (
	Answer            DropReason = responder.Answer
	DropMalformed     DropReason = "malformed"
	DropNotEthernetV4 DropReason = "not Ethernet/IPv4 ARP"
	DropNotRequest    DropReason = "not a request"
	DropOwnFrame      DropReason = "sent by this interface"
	DropNotForUs      DropReason = "Ethernet destination is neither broadcast nor ours"
	DropBadSender     DropReason = "sender hardware address is not unicast"
	DropProbe         DropReason = "probe (sender IP 0.0.0.0)"
	DropAnnouncement  DropReason = "announcement (sender IP equals target IP)"
	DropNotOwned      DropReason = "target IP not owned"
)

// Layout of an Ethernet frame carrying an Ethernet/IPv4 ARP packet (RFC 826).
const (
	offEthDst   = 0
	offEthSrc   = 6
	offEthType  = 12
	offHWType   = 14
	offProto    = 16
	offHWLen    = 18
	offProtoLen = 19
	offOp       = 20
	offSHA      = 22
	offSPA      = 28
	offTHA      = 32
	offTPA      = 38
	arpEnd      = 42

	etherTypeARP  = 0x0806
	etherTypeIPv4 = 0x0800
	hwTypeEther   = 1
	opRequest     = 1
	opReply       = 2
	macLen        = 6
	ipv4Len       = 4

	// ReplyLen is the length of a reply frame: the ARP packet padded to the
	// minimum Ethernet frame (without FCS).
	ReplyLen = 60
)

var broadcast = [macLen]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// NewReplyBuffer returns a reply frame with every field that does not depend
// on the request already written: our MAC as Ethernet source and ARP sender,
// the ARP header of an Ethernet/IPv4 reply, the padding. Decide fills in the
// rest for each request it answers.
func NewReplyBuffer(ours net.HardwareAddr) []byte {
	b := make([]byte, ReplyLen)
	copy(b[offEthSrc:], ours)
	binary.BigEndian.PutUint16(b[offEthType:], etherTypeARP)
	binary.BigEndian.PutUint16(b[offHWType:], hwTypeEther)
	binary.BigEndian.PutUint16(b[offProto:], etherTypeIPv4)
	b[offHWLen], b[offProtoLen] = macLen, ipv4Len
	binary.BigEndian.PutUint16(b[offOp:], opReply)
	copy(b[offSHA:], ours)
	return b
}

// Decide looks at one received Ethernet frame and decides whether to answer.
// It answers only well-formed Ethernet/IPv4 ARP requests, addressed to
// broadcast or to us, from a unicast sender other than ourselves, asking for
// an address owns reports as ours. It never answers announcements or probes
// (others' gratuitous ARP and duplicate address detection): juneau only
// answers questions.
//
// To answer, it writes the request's addresses into reply, a buffer made by
// NewReplyBuffer for the same MAC: a unicast reply to the requester, telling
// that the asked address is at our MAC. It reads the frame in place and
// allocates nothing; apart from writing reply it is pure.
func Decide(frame []byte, ours net.HardwareAddr, owns func(netip.Addr) bool, reply []byte) DropReason {
	if len(frame) < offEthType+2 {
		return DropMalformed
	}
	if binary.BigEndian.Uint16(frame[offEthType:]) != etherTypeARP {
		return DropNotEthernetV4
	}
	if len(frame) < offOp+2 {
		return DropMalformed
	}
	if binary.BigEndian.Uint16(frame[offHWType:]) != hwTypeEther || binary.BigEndian.Uint16(frame[offProto:]) != etherTypeIPv4 ||
		frame[offHWLen] != macLen || frame[offProtoLen] != ipv4Len {
		return DropNotEthernetV4
	}
	if len(frame) < arpEnd {
		return DropMalformed
	}
	if binary.BigEndian.Uint16(frame[offOp:]) != opRequest {
		return DropNotRequest
	}
	src, dst, sha := frame[offEthSrc:offEthSrc+macLen], frame[offEthDst:offEthDst+macLen], frame[offSHA:offSHA+macLen]
	if bytes.Equal(src, ours) || bytes.Equal(sha, ours) {
		return DropOwnFrame
	}
	if !bytes.Equal(dst, broadcast[:]) && !bytes.Equal(dst, ours) {
		return DropNotForUs
	}
	if !unicast(sha) {
		return DropBadSender
	}
	spa, tpa := [ipv4Len]byte(frame[offSPA:offSPA+ipv4Len]), [ipv4Len]byte(frame[offTPA:offTPA+ipv4Len])
	if spa == [ipv4Len]byte{} {
		return DropProbe
	}
	if spa == tpa {
		return DropAnnouncement
	}
	if !owns(netip.AddrFrom4(tpa)) {
		return DropNotOwned
	}
	copy(reply[offEthDst:], sha)
	copy(reply[offSPA:], tpa[:])
	copy(reply[offTHA:], sha)
	copy(reply[offTPA:], spa[:])
	return Answer
}

// unicast reports a usable unicast hardware address: not all zeros and the
// group bit clear.
func unicast(hw []byte) bool {
	return len(hw) == macLen && hw[0]&1 == 0 && !bytes.Equal(hw, make([]byte, macLen))
}

// GratuitousReply returns a gratuitous ARP reply announcing that addr is at ours:
// broadcast, with addr as both sender and target address and ours as both sender and
// target hardware address. Linux lets such a reply replace the address of an existing
// neighbour entry at once (a reply counts as gratuitous only when its target hardware
// address equals its sender's), as do the devices that honour gratuitous ARP.
func GratuitousReply(ours net.HardwareAddr, addr netip.Addr) []byte {
	b := NewReplyBuffer(ours)
	a := addr.Unmap().As4()
	copy(b[offEthDst:], broadcast[:])
	copy(b[offSPA:], a[:])
	copy(b[offTHA:], ours)
	copy(b[offTPA:], a[:])
	return b
}
