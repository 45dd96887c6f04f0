package netns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// IP protocol numbers used by the packet helpers.
const (
	ProtoICMP = 1
	ProtoTCP  = 6
	ProtoUDP  = 17
)

const (
	etherTypeIPv4 = 0x0800
	etherTypeARP  = 0x0806
	ethHeaderLen  = 14
)

// IPv4 is a parsed IPv4 packet. Payload holds the transport bytes present in
// the buffer, which may be fewer than TotalLen announces (a quoted packet
// inside an ICMP error is usually cut short).
type IPv4 struct {
	Header   []byte
	Payload  []byte
	Src, Dst netip.Addr
	Proto    uint8
	TTL      uint8
	TotalLen int
	// HeaderChecksumOK reports whether the IP header checksum is valid.
	HeaderChecksumOK bool
}

// Complete reports whether the whole datagram is present.
func (p *IPv4) Complete() bool { return len(p.Header)+len(p.Payload) >= p.TotalLen }

// ParseIPv4 parses an IPv4 packet (possibly truncated after its header).
func ParseIPv4(b []byte) (*IPv4, error) {
	if len(b) < 20 || b[0]>>4 != 4 {
		return nil, errors.New("not an IPv4 packet")
	}
	ihl := int(b[0]&0x0f) * 4
	if ihl < 20 || len(b) < ihl {
		return nil, fmt.Errorf("bad IPv4 header length %d", ihl)
	}
	total := int(binary.BigEndian.Uint16(b[2:4]))
	end := min(len(b), total)
	if end < ihl {
		end = ihl
	}
	p := &IPv4{
		Header:           b[:ihl],
		Payload:          b[ihl:end],
		Src:              netip.AddrFrom4([4]byte(b[12:16])),
		Dst:              netip.AddrFrom4([4]byte(b[16:20])),
		Proto:            b[9],
		TTL:              b[8],
		TotalLen:         total,
		HeaderChecksumOK: Checksum(b[:ihl], 0) == 0,
	}
	return p, nil
}

// ParseFrame parses an Ethernet frame carrying IPv4; ok is false for other
// frames.
func ParseFrame(frame []byte) (*IPv4, bool) {
	b, ok := framePayload(frame, etherTypeIPv4)
	if !ok {
		return nil, false
	}
	p, err := ParseIPv4(b)
	return p, err == nil
}

// framePayload returns what an Ethernet frame of the EtherType carries; ok is
// false for a frame of another type.
func framePayload(frame []byte, etherType uint16) ([]byte, bool) {
	if len(frame) < ethHeaderLen || binary.BigEndian.Uint16(frame[12:14]) != etherType {
		return nil, false
	}
	return frame[ethHeaderLen:], true
}

// Ports returns the transport ports of a TCP or UDP packet.
func (p *IPv4) Ports() (src, dst uint16, ok bool) { return ports(p.Proto, p.Payload) }

// ports reads the ports of a TCP or UDP header.
func ports(proto uint8, l4 []byte) (src, dst uint16, ok bool) {
	if (proto != ProtoTCP && proto != ProtoUDP) || len(l4) < 4 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint16(l4[0:2]), binary.BigEndian.Uint16(l4[2:4]), true
}

// L4ChecksumOK verifies the TCP, UDP or ICMP checksum. checked is false when
// it cannot be verified: the datagram is incomplete, or UDP carries no
// checksum.
func (p *IPv4) L4ChecksumOK() (ok, checked bool) {
	if !p.Complete() {
		return false, false
	}
	seg := p.Payload[:p.TotalLen-len(p.Header)]
	switch p.Proto {
	case ProtoICMP:
		return Checksum(seg, 0) == 0, true
	case ProtoUDP:
		if len(seg) < 8 || binary.BigEndian.Uint16(seg[6:8]) == 0 {
			return false, false
		}
		return Checksum(seg, pseudoHeaderSum(p.Src, p.Dst, p.Proto, len(seg))) == 0, true
	case ProtoTCP:
		if len(seg) < 20 {
			return false, false
		}
		return Checksum(seg, pseudoHeaderSum(p.Src, p.Dst, p.Proto, len(seg))) == 0, true
	}
	return false, false
}

// pseudoHeaderSum sums the pseudo-header that the TCP, UDP and ICMPv6 checksums
// cover, for either family.
func pseudoHeaderSum(src, dst netip.Addr, proto uint8, l4len int) uint32 {
	var sum uint32
	for _, a := range []netip.Addr{src, dst} {
		b := a.AsSlice()
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i : i+2]))
		}
	}
	return sum + uint32(proto) + uint32(l4len)
}

// ICMP is a parsed ICMP message.
type ICMP struct {
	Type, Code uint8
	// Body is everything after the 8-byte ICMP header.
	Body []byte
	// Rest is bytes 4..8 of the header (echo id and sequence, next-hop MTU).
	Rest []byte
}

// ICMP parses the payload of an ICMP packet.
func (p *IPv4) ICMP() (*ICMP, error) {
	if p.Proto != ProtoICMP || len(p.Payload) < 8 {
		return nil, errors.New("not an ICMP packet")
	}
	return &ICMP{Type: p.Payload[0], Code: p.Payload[1], Rest: p.Payload[4:8], Body: p.Payload[8:]}, nil
}

// IsError reports whether the ICMP type is one that quotes the packet that
// caused it (destination unreachable, source quench, redirect, time
// exceeded, parameter problem).
func (m *ICMP) IsError() bool {
	switch m.Type {
	case 3, 4, 5, 11, 12:
		return true
	}
	return false
}

// Quote parses the packet quoted by an ICMP error.
func (m *ICMP) Quote() (*IPv4, error) {
	if !m.IsError() {
		return nil, fmt.Errorf("ICMP type %d quotes nothing", m.Type)
	}
	return ParseIPv4(m.Body)
}

// Checksum returns the Internet checksum of b with initial sum (e.g. a
// pseudo-header sum). A buffer that already carries a valid checksum sums to
// zero.
func Checksum(b []byte, initial uint32) uint16 {
	sum := initial
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i : i+2]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// BuildIPv4 returns an IPv4 packet (20-byte header, DF clear) around payload
// with a valid header checksum.
func BuildIPv4(src, dst netip.Addr, proto uint8, ttl uint8, payload []byte) []byte {
	b := make([]byte, 20+len(payload))
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:4], uint16(len(b)))
	b[8] = ttl
	b[9] = proto
	s, d := src.As4(), dst.As4()
	copy(b[12:16], s[:])
	copy(b[16:20], d[:])
	binary.BigEndian.PutUint16(b[10:12], Checksum(b[:20], 0))
	copy(b[20:], payload)
	return b
}

// BuildUDP returns an IPv4/UDP packet with valid checksums.
func BuildUDP(src, dst netip.Addr, sport, dport uint16, data []byte) []byte {
	return BuildIPv4(src, dst, ProtoUDP, 64, udpSegment(src, dst, sport, dport, data))
}

// udpSegment returns a UDP header and data with a valid checksum for either family.
func udpSegment(src, dst netip.Addr, sport, dport uint16, data []byte) []byte {
	seg := make([]byte, 8+len(data))
	binary.BigEndian.PutUint16(seg[0:2], sport)
	binary.BigEndian.PutUint16(seg[2:4], dport)
	binary.BigEndian.PutUint16(seg[4:6], uint16(len(seg)))
	copy(seg[8:], data)
	sum := Checksum(seg, pseudoHeaderSum(src, dst, ProtoUDP, len(seg)))
	if sum == 0 {
		sum = 0xffff
	}
	binary.BigEndian.PutUint16(seg[6:8], sum)
	return seg
}

// BuildICMP returns an ICMP message (header and body) with a valid checksum;
// rest fills header bytes 4..8.
func BuildICMP(typ, code uint8, rest [4]byte, body []byte) []byte {
	b := make([]byte, 8+len(body))
	b[0], b[1] = typ, code
	copy(b[4:8], rest[:])
	copy(b[8:], body)
	binary.BigEndian.PutUint16(b[2:4], Checksum(b, 0))
	return b
}

// ARP is the part of an Ethernet/IPv4 ARP frame tests look at.
type ARP struct {
	Op                 uint16
	SenderMAC          []byte
	SenderIP, TargetIP netip.Addr
	// EtherDst is the frame's destination hardware address.
	EtherDst []byte
}

// Gratuitous reports an announcement: sender and target address are equal.
func (a *ARP) Gratuitous() bool { return a.SenderIP == a.TargetIP }

// ParseARP parses an Ethernet frame carrying an Ethernet/IPv4 ARP packet.
func ParseARP(frame []byte) (*ARP, bool) {
	if len(frame) < ethHeaderLen+28 || binary.BigEndian.Uint16(frame[12:14]) != etherTypeARP {
		return nil, false
	}
	a := frame[ethHeaderLen:]
	if binary.BigEndian.Uint16(a[0:2]) != 1 || binary.BigEndian.Uint16(a[2:4]) != etherTypeIPv4 || a[4] != 6 || a[5] != 4 {
		return nil, false
	}
	return &ARP{
		Op:        binary.BigEndian.Uint16(a[6:8]),
		SenderMAC: a[8:14],
		SenderIP:  netip.AddrFrom4([4]byte(a[14:18])),
		TargetIP:  netip.AddrFrom4([4]byte(a[24:28])),
		EtherDst:  frame[0:6],
	}, true
}

// BuildTCP returns an IPv4/TCP segment (20-byte header, ACK set) with valid
// checksums.
func BuildTCP(src, dst netip.Addr, sport, dport uint16, seq uint32, data []byte) []byte {
	return BuildIPv4(src, dst, ProtoTCP, 64, tcpSegment(src, dst, sport, dport, seq, data))
}

// tcpSegment returns a TCP segment (20-byte header, ACK set) with a valid checksum
// for either family.
func tcpSegment(src, dst netip.Addr, sport, dport uint16, seq uint32, data []byte) []byte {
	seg := make([]byte, 20+len(data))
	binary.BigEndian.PutUint16(seg[0:2], sport)
	binary.BigEndian.PutUint16(seg[2:4], dport)
	binary.BigEndian.PutUint32(seg[4:8], seq)
	seg[12] = 5 << 4
	seg[13] = 0x10 // ACK
	binary.BigEndian.PutUint16(seg[14:16], 65535)
	copy(seg[20:], data)
	binary.BigEndian.PutUint16(seg[16:18], Checksum(seg, pseudoHeaderSum(src, dst, ProtoTCP, len(seg))))
	return seg
}
