package arp

import (
	"bytes"
	"net"
	"net/netip"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
)

// DropReason says why a frame got no reply. The empty reason means "answer".
type DropReason string

// Reasons a frame is not answered.
const (
	Answer            DropReason = ""
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

const (
	ethernetHWType     = 1
	ethernetAddrLength = 6
	ipv4AddrLength     = 4
)

// Reply is an answer to send: an ARP reply and the hardware address of the
// requester, to which it is unicast.
type Reply struct {
	Packet *arp.Packet
	To     net.HardwareAddr
}

// Decide looks at one received Ethernet frame and decides whether to answer.
// It answers only well-formed Ethernet/IPv4 ARP requests, addressed to
// broadcast or to us, from a unicast sender other than ourselves, asking for
// an address owns reports as ours. It never answers announcements or probes
// (others' gratuitous ARP and duplicate address detection): juneau only
// answers questions. Decide is pure.
func Decide(frame []byte, ours net.HardwareAddr, owns func(netip.Addr) bool) (*Reply, DropReason) {
	var f ethernet.Frame
	if err := f.UnmarshalBinary(frame); err != nil {
		return nil, DropMalformed
	}
	// A VLAN tag still in the frame (the kernel moves tags out of frames before a
	// packet socket sees them) marks another L2 network: an untagged reply would not
	// reach the requester there.
	if f.EtherType != ethernet.EtherTypeARP || f.VLAN != nil || f.ServiceVLAN != nil {
		return nil, DropNotEthernetV4
	}
	var p arp.Packet
	if err := p.UnmarshalBinary(f.Payload); err != nil {
		return nil, DropMalformed
	}
	if p.HardwareType != ethernetHWType || p.ProtocolType != uint16(ethernet.EtherTypeIPv4) ||
		p.HardwareAddrLength != ethernetAddrLength || p.IPLength != ipv4AddrLength {
		return nil, DropNotEthernetV4
	}
	if p.Operation != arp.OperationRequest {
		return nil, DropNotRequest
	}
	if bytes.Equal(f.Source, ours) || bytes.Equal(p.SenderHardwareAddr, ours) {
		return nil, DropOwnFrame
	}
	if !bytes.Equal(f.Destination, ethernet.Broadcast) && !bytes.Equal(f.Destination, ours) {
		return nil, DropNotForUs
	}
	if !unicast(p.SenderHardwareAddr) {
		return nil, DropBadSender
	}
	if p.SenderIP.IsUnspecified() {
		return nil, DropProbe
	}
	if p.SenderIP == p.TargetIP {
		return nil, DropAnnouncement
	}
	if !owns(p.TargetIP) {
		return nil, DropNotOwned
	}
	reply, err := arp.NewPacket(arp.OperationReply, ours, p.TargetIP, p.SenderHardwareAddr, p.SenderIP)
	if err != nil {
		return nil, DropMalformed
	}
	return &Reply{Packet: reply, To: p.SenderHardwareAddr}, Answer
}

// unicast reports a usable unicast hardware address: not all zeros and the
// group bit clear.
func unicast(hw net.HardwareAddr) bool {
	return len(hw) == ethernetAddrLength && hw[0]&1 == 0 && !bytes.Equal(hw, make([]byte, ethernetAddrLength))
}

// marshalReply builds the Ethernet frame carrying a reply.
func marshalReply(r *Reply) ([]byte, error) {
	payload, err := r.Packet.MarshalBinary()
	if err != nil {
		return nil, err
	}
	f := ethernet.Frame{
		Destination: r.To,
		Source:      r.Packet.SenderHardwareAddr,
		EtherType:   ethernet.EtherTypeARP,
		Payload:     payload,
	}
	return f.MarshalBinary()
}
