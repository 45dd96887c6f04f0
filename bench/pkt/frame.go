// Package pkt builds the Ethernet frames the benchmarks send (UDP over IPv4 and ARP
// requests) and sends and receives frames on a packet socket inside a network
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
	etherTypeARP  = 0x0806
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

// UDP returns an Ethernet frame carrying an IPv4 UDP datagram from src to dst, padded
// with zeros to frameLen bytes (at least MinFrameLen), with valid IP and UDP checksums.
func UDP(src, dst Endpoint, frameLen int) []byte {
	frameLen = max(frameLen, MinFrameLen)
	f := make([]byte, frameLen)
	copy(f[0:6], dst.MAC)
	copy(f[6:12], src.MAC)
	binary.BigEndian.PutUint16(f[12:14], etherTypeIPv4)
	ip := f[EthHeaderLen:]
	ipLen := frameLen - EthHeaderLen
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:4], uint16(ipLen))
	ip[6] = 0x40 // don't fragment
	ip[8] = 64   // TTL
	ip[9] = protoUDP
	s, d := src.IP.As4(), dst.IP.As4()
	copy(ip[12:16], s[:])
	copy(ip[16:20], d[:])
	udp := ip[IPHeaderLen:]
	binary.BigEndian.PutUint16(udp[0:2], src.Port)
	binary.BigEndian.PutUint16(udp[2:4], dst.Port)
	binary.BigEndian.PutUint16(udp[4:6], uint16(ipLen-IPHeaderLen))
	FixChecksums(f)
	return f
}

// SetUDPSource rewrites the source address and port of a frame made by UDP and
// recomputes its checksums.
func SetUDPSource(f []byte, ip netip.Addr, port uint16) {
	a := ip.As4()
	copy(f[EthHeaderLen+12:EthHeaderLen+16], a[:])
	binary.BigEndian.PutUint16(f[EthHeaderLen+IPHeaderLen:], port)
	FixChecksums(f)
}

// FixChecksums recomputes the IP header checksum and the UDP checksum of a frame made
// by UDP.
func FixChecksums(f []byte) {
	ip := f[EthHeaderLen:]
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:12], ^fold(sum(ip[:IPHeaderLen], 0)))
	udpLen := int(binary.BigEndian.Uint16(ip[IPHeaderLen+4:]))
	udp := ip[IPHeaderLen : IPHeaderLen+udpLen]
	udp[6], udp[7] = 0, 0
	pseudo := sum(ip[12:20], uint32(protoUDP)+uint32(udpLen))
	c := ^fold(sum(udp, pseudo))
	if c == 0 {
		c = 0xffff // zero means "no checksum" in UDP over IPv4
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

// IPv6HeaderLen is the length of an IPv6 header without extension headers.
const IPv6HeaderLen = 40

const etherTypeIPv6 = 0x86dd

// UDP6 returns an Ethernet frame carrying an IPv6 UDP datagram from src to dst, padded
// with UDP payload to frameLen bytes (at least MinFrameLen + IPv6HeaderLen -
// IPHeaderLen, so that the datagram matches UDP's IPv4 frames payload for payload),
// with a valid UDP checksum.
func UDP6(src, dst Endpoint, frameLen int) []byte {
	frameLen = max(frameLen, MinFrameLen+IPv6HeaderLen-IPHeaderLen)
	f := make([]byte, frameLen)
	copy(f[0:6], dst.MAC)
	copy(f[6:12], src.MAC)
	binary.BigEndian.PutUint16(f[12:14], etherTypeIPv6)
	ip := f[EthHeaderLen:]
	udpLen := frameLen - EthHeaderLen - IPv6HeaderLen
	ip[0] = 6 << 4
	binary.BigEndian.PutUint16(ip[4:6], uint16(udpLen))
	ip[6], ip[7] = protoUDP, 64
	s, d := src.IP.As16(), dst.IP.As16()
	copy(ip[8:24], s[:])
	copy(ip[24:40], d[:])
	udp := ip[IPv6HeaderLen:]
	binary.BigEndian.PutUint16(udp[0:2], src.Port)
	binary.BigEndian.PutUint16(udp[2:4], dst.Port)
	binary.BigEndian.PutUint16(udp[4:6], uint16(udpLen))
	FixChecksums6(f)
	return f
}

// SetUDPSource6 rewrites the source address and port of a frame made by UDP6 and
// recomputes its checksum.
func SetUDPSource6(f []byte, ip netip.Addr, port uint16) {
	a := ip.As16()
	copy(f[EthHeaderLen+8:EthHeaderLen+24], a[:])
	binary.BigEndian.PutUint16(f[EthHeaderLen+IPv6HeaderLen:], port)
	FixChecksums6(f)
}

// FixChecksums6 recomputes the UDP checksum of a frame made by UDP6.
func FixChecksums6(f []byte) {
	ip := f[EthHeaderLen:]
	udpLen := int(binary.BigEndian.Uint16(ip[4:6]))
	udp := ip[IPv6HeaderLen : IPv6HeaderLen+udpLen]
	udp[6], udp[7] = 0, 0
	pseudo := sum(ip[8:40], uint32(protoUDP)+uint32(udpLen))
	c := ^fold(sum(udp, pseudo))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(udp[6:8], c)
}
