package ndp

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"

	"github.com/mdlayher/ndp"

	"github.com/loutres/juneau/pkg/node/responder"
)

// DropReason says why a frame got no answer. The empty reason means "answer".
type DropReason = responder.Reason

// Reasons a frame is not answered.
const (
	Answer          DropReason = responder.Answer
	DropMalformed   DropReason = "malformed"
	DropNotNS       DropReason = "not an ICMPv6 neighbor solicitation"
	DropHopLimit    DropReason = "hop limit is not 255 (not from the link)"
	DropBadChecksum DropReason = "bad ICMPv6 checksum"
	DropOwnFrame    DropReason = "sent by this interface"
	DropNotForUs    DropReason = "Ethernet destination is neither ours nor the target's solicited-node group"
	DropBadDest     DropReason = "IPv6 destination is neither the target nor its solicited-node group"
	DropBadSender   DropReason = "source is not a unicast address"
	DropProbe       DropReason = "duplicate address detection (source ::)"
	DropSelf        DropReason = "source equals target"
	DropNotOwned    DropReason = "target not owned"
)

// Layout of an Ethernet frame carrying an IPv6 packet without extension
// headers and an ICMPv6 message.
const (
	offEthDst   = 0
	offEthSrc   = 6
	offEthType  = 12
	offIP       = 14
	offPayLen   = offIP + 4
	offNextHdr  = offIP + 6
	offHopLimit = offIP + 7
	offIPSrc    = offIP + 8
	offIPDst    = offIP + 24
	offICMP     = offIP + 40

	etherTypeIPv6 = 0x86dd
	protoICMPv6   = 58
	typeNS        = 135
	nsLen         = 24 // ICMPv6 header, reserved, target
	naLen         = 32 // ICMPv6 header, flags, target, target link-layer address option
	macLen        = 6
	hopLimitNDP   = 255

	// ReplyLen is the length of an advertisement frame.
	ReplyLen = offICMP + naLen
)

// NewReplyBuffer returns an advertisement frame with every field that does not
// depend on the solicitation already written: our MAC as Ethernet source, the
// IPv6 header but its addresses. Decide fills in the rest for each solicitation
// it answers.
func NewReplyBuffer(ours net.HardwareAddr) []byte {
	f := make([]byte, ReplyLen)
	copy(f[offEthSrc:], ours)
	binary.BigEndian.PutUint16(f[offEthType:], etherTypeIPv6)
	f[offIP] = 6 << 4
	binary.BigEndian.PutUint16(f[offPayLen:], naLen)
	f[offNextHdr], f[offHopLimit] = protoICMPv6, hopLimitNDP
	return f
}

// Decide looks at one received Ethernet frame and decides whether to answer
// (RFC 4861, 7.1.1 and 7.2.4). It answers only a valid neighbor solicitation
// received from the link (hop limit 255, correct checksum), not sent by this
// interface, addressed to us or to the target's solicited-node group, from a
// unicast source other than the target, asking for an address owns reports
// as ours. Duplicate address detection (source ::) is never answered, as
// probes are not in ARP: juneau only answers questions.
//
// To answer, it writes into reply, a buffer made by NewReplyBuffer for the same
// MAC, a solicited neighbor advertisement, override flag set, from the target
// to the soliciting address, carrying our MAC as target link-layer address,
// sent to the solicitation's source link-layer address (its Ethernet source
// when it has none). Apart from writing reply, Decide is pure.
func Decide(frame []byte, ours net.HardwareAddr, owns func(netip.Addr) bool, reply []byte) DropReason {
	if len(frame) < offEthType+2 {
		return DropMalformed
	}
	if binary.BigEndian.Uint16(frame[offEthType:]) != etherTypeIPv6 {
		return DropNotNS
	}
	if len(frame) < offICMP || frame[offIP]>>4 != 6 {
		return DropMalformed
	}
	if frame[offNextHdr] != protoICMPv6 || len(frame) < offICMP+1 || frame[offICMP] != typeNS {
		return DropNotNS
	}
	payLen := int(binary.BigEndian.Uint16(frame[offPayLen:]))
	if payLen < nsLen || len(frame) < offICMP+payLen || frame[offICMP+1] != 0 {
		return DropMalformed
	}
	if frame[offHopLimit] != hopLimitNDP {
		return DropHopLimit
	}
	src, dst := netip.AddrFrom16([16]byte(frame[offIPSrc:])), netip.AddrFrom16([16]byte(frame[offIPDst:]))
	msg := frame[offICMP : offICMP+payLen]
	if checksum(msg, src, dst) != 0 {
		return DropBadChecksum
	}
	ethSrc := net.HardwareAddr(frame[offEthSrc : offEthSrc+macLen])
	if bytes.Equal(ethSrc, ours) {
		return DropOwnFrame
	}
	m, err := ndp.ParseMessage(msg)
	if err != nil {
		return DropMalformed
	}
	ns, ok := m.(*ndp.NeighborSolicitation)
	if !ok || ns.TargetAddress.IsMulticast() {
		return DropMalformed
	}
	target := ns.TargetAddress
	group, _ := ndp.SolicitedNodeMulticast(target)
	ethDst := frame[offEthDst : offEthDst+macLen]
	if !bytes.Equal(ethDst, ours) && !bytes.Equal(ethDst, groupMAC(group)) {
		return DropNotForUs
	}
	if dst != target && dst != group {
		return DropBadDest
	}
	switch {
	case src.IsUnspecified():
		return DropProbe
	case src.IsMulticast() || src.IsLoopback() || src.Is4In6():
		return DropBadSender
	case src == target:
		return DropSelf
	}
	if !owns(target) {
		return DropNotOwned
	}
	to := ethSrc
	for _, o := range ns.Options {
		if lla, ok := o.(*ndp.LinkLayerAddress); ok && lla.Direction == ndp.Source && len(lla.Addr) == macLen {
			to = lla.Addr
		}
	}
	if to[0]&1 != 0 {
		return DropBadSender
	}
	na := &ndp.NeighborAdvertisement{
		Solicited: true, Override: true, TargetAddress: target,
		Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: ours}},
	}
	adv, err := ndp.MarshalMessageChecksum(na, target, src)
	if err != nil || len(adv) != naLen {
		return DropMalformed // cannot happen: a unicast target and a 6-byte address
	}
	copy(reply[offEthDst:], to)
	t, s := target.As16(), src.As16()
	copy(reply[offIPSrc:], t[:])
	copy(reply[offIPDst:], s[:])
	copy(reply[offICMP:], adv)
	return Answer
}

// groupMAC is the Ethernet multicast address of an IPv6 multicast group:
// 33:33 and the group's last four bytes.
func groupMAC(group netip.Addr) net.HardwareAddr {
	g := group.As16()
	return net.HardwareAddr{0x33, 0x33, g[12], g[13], g[14], g[15]}
}

// checksum is the ICMPv6 checksum over msg and the pseudo-header; a message
// carrying a valid checksum sums to zero.
func checksum(msg []byte, src, dst netip.Addr) uint16 {
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	s, d := src.As16(), dst.As16()
	add(s[:])
	add(d[:])
	sum += uint32(len(msg)) + protoICMPv6
	add(msg)
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}
