// Package pkt builds the Ethernet frames the benchmarks send (UDP over IPv4 and IPv6,
// ARP requests) and sends and receives frames on a packet socket inside a network
// namespace the benchmark created.
package pkt

import (
	"encoding/binary"
	"net"
	"net/netip"
)

// Sizes of the headers the frames carry.
const (
	EthHeaderLen = 14
	IPHeaderLen  = 20
	UDPHeaderLen = 8
	// MinFrameLen is the shortest Ethernet frame without its FCS; a 60-byte frame is
	// the classic 64-byte packet of forwarding benchmarks.
	MinFrameLen = 60

	etherTypeIPv4 = 0x0800
	etherTypeIPv6 = 0x86dd
	etherTypeARP  = 0x0806
	// IPv6HeaderLen is the length of an IPv6 header without extension headers.
	IPv6HeaderLen = 40
	protoUDP      = 17

	// ARP operations.
	ARPRequest = 1
	ARPReply   = 2
)

// Endpoint is one side of a UDP datagram.
type Endpoint struct {
	MAC  net.HardwareAddr
	IP   netip.Addr
	Port uint16
}

// UDP returns an Ethernet frame carrying a UDP datagram from src to dst, with valid IP
// and UDP checksums, over IPv4 or, when dst is an IPv6 address, IPv6. An IPv4 frame is
// padded with zeros to frameLen bytes (at least MinFrameLen); an IPv6 frame carries the
// same datagram behind its 20 bytes longer header.
func UDP(src, dst Endpoint, frameLen int) []byte {
	frameLen = max(frameLen, MinFrameLen)
	ipHeader, etherType := IPHeaderLen, uint16(etherTypeIPv4)
	if dst.IP.Is6() {
		frameLen += IPv6HeaderLen - IPHeaderLen
		ipHeader, etherType = IPv6HeaderLen, etherTypeIPv6
	}
	f := make([]byte, frameLen)
	copy(f[0:6], dst.MAC)
	copy(f[6:12], src.MAC)
	binary.BigEndian.PutUint16(f[12:14], etherType)
	ip := f[EthHeaderLen:]
	udpLen := frameLen - EthHeaderLen - ipHeader
	if dst.IP.Is6() {
		ip[0] = 6 << 4
		binary.BigEndian.PutUint16(ip[4:6], uint16(udpLen))
		ip[6], ip[7] = protoUDP, 64 // next header, hop limit
	} else {
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:4], uint16(frameLen-EthHeaderLen))
		ip[6] = 0x40 // don't fragment
		ip[8] = 64   // TTL
		ip[9] = protoUDP
	}
	srcOff, addrLen := addrLayout(f)
	copy(ip[srcOff:], src.IP.AsSlice())
	copy(ip[srcOff+addrLen:], dst.IP.AsSlice())
	udp := ip[ipHeader:]
	binary.BigEndian.PutUint16(udp[0:2], src.Port)
	binary.BigEndian.PutUint16(udp[2:4], dst.Port)
	binary.BigEndian.PutUint16(udp[4:6], uint16(udpLen))
	FixChecksums(f)
	return f
}

// addrLayout returns where the source address of a frame's IP header starts (the
// destination follows it) and the address length.
func addrLayout(f []byte) (srcOff, addrLen int) {
	if binary.BigEndian.Uint16(f[12:14]) == etherTypeIPv6 {
		return 8, 16
	}
	return 12, 4
}

// SetUDPSource rewrites the source address and port of a frame made by UDP and
// recomputes its checksums.
func SetUDPSource(f []byte, ip netip.Addr, port uint16) {
	srcOff, addrLen := addrLayout(f)
	copy(f[EthHeaderLen+srcOff:EthHeaderLen+srcOff+addrLen], ip.AsSlice())
	binary.BigEndian.PutUint16(f[EthHeaderLen+ipHeaderLen(f):], port)
	FixChecksums(f)
}

func ipHeaderLen(f []byte) int {
	if _, addrLen := addrLayout(f); addrLen == 16 {
		return IPv6HeaderLen
	}
	return IPHeaderLen
}

// FixChecksums recomputes the IPv4 header checksum (IPv6 has none) and the UDP
// checksum of a frame made by UDP.
func FixChecksums(f []byte) {
	ip := f[EthHeaderLen:]
	hl := ipHeaderLen(f)
	srcOff, addrLen := addrLayout(f)
	if hl == IPHeaderLen {
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:12], ^fold(sum(ip[:IPHeaderLen], 0)))
	}
	udpLen := int(binary.BigEndian.Uint16(ip[hl+4:]))
	udp := ip[hl : hl+udpLen]
	udp[6], udp[7] = 0, 0
	pseudo := sum(ip[srcOff:srcOff+2*addrLen], uint32(protoUDP)+uint32(udpLen))
	c := ^fold(sum(udp, pseudo))
	if c == 0 {
		c = 0xffff // zero means "no checksum" in UDP over IPv4 (and is invalid over IPv6)
	}
	binary.BigEndian.PutUint16(udp[6:8], c)
}

// Checksum is the Internet checksum of b.
func Checksum(b []byte) uint16 { return ^fold(sum(b, 0)) }

func sum(b []byte, acc uint32) uint32 {
	for len(b) >= 2 {
		acc += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint32(b[0]) << 8
	}
	return acc
}

func fold(acc uint32) uint16 {
	for acc > 0xffff {
		acc = acc&0xffff + acc>>16
	}
	return uint16(acc)
}

// ARPRequestFrame returns a broadcast ARP request from (mac, ip) asking for target,
// padded to MinFrameLen.
func ARPRequestFrame(mac net.HardwareAddr, ip, target netip.Addr) []byte {
	f := make([]byte, MinFrameLen)
	for i := range 6 {
		f[i] = 0xff
	}
	copy(f[6:12], mac)
	binary.BigEndian.PutUint16(f[12:14], etherTypeARP)
	a := f[EthHeaderLen:]
	binary.BigEndian.PutUint16(a[0:2], 1) // Ethernet
	binary.BigEndian.PutUint16(a[2:4], etherTypeIPv4)
	a[4], a[5] = 6, 4
	binary.BigEndian.PutUint16(a[6:8], ARPRequest)
	copy(a[8:14], mac)
	s, t := ip.As4(), target.As4()
	copy(a[14:18], s[:])
	// Target hardware address stays zero: unknown.
	copy(a[24:28], t[:])
	return f
}
