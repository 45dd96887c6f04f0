package netns

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"

	"golang.org/x/net/ipv6"
)

// IPv6 next header numbers used by the packet helpers.
const (
	ProtoICMPv6 = 58

	etherTypeIPv6 = 0x86dd
	ipv6HeaderLen = 40
)

// IPv6 is a parsed IPv6 packet without extension headers. Payload holds the
// transport bytes present in the buffer, which may be fewer than the payload
// length announces (a quoted packet inside an ICMPv6 error is cut short).
type IPv6 struct {
	Header   []byte
	Payload  []byte
	Src, Dst netip.Addr
	// Next is the next header (the transport protocol without extension
	// headers), HopLimit the hop limit.
	Next, HopLimit uint8
	PayloadLen     int
}

// Complete reports whether the whole payload is present.
func (p *IPv6) Complete() bool { return len(p.Payload) >= p.PayloadLen }

// ParseIPv6 parses an IPv6 packet (possibly truncated after its header).
func ParseIPv6(b []byte) (*IPv6, error) {
	if len(b) < ipv6HeaderLen || b[0]>>4 != 6 {
		return nil, errors.New("not an IPv6 packet")
	}
	plen := int(binary.BigEndian.Uint16(b[4:6]))
	end := min(len(b), ipv6HeaderLen+plen)
	return &IPv6{
		Header: b[:ipv6HeaderLen], Payload: b[ipv6HeaderLen:end],
		Src: netip.AddrFrom16([16]byte(b[8:24])), Dst: netip.AddrFrom16([16]byte(b[24:40])),
		Next: b[6], HopLimit: b[7], PayloadLen: plen,
	}, nil
}

// ParseFrame6 parses an Ethernet frame carrying IPv6; ok is false for other
// frames.
func ParseFrame6(frame []byte) (*IPv6, bool) {
	b, ok := framePayload(frame, etherTypeIPv6)
	if !ok {
		return nil, false
	}
	p, err := ParseIPv6(b)
	return p, err == nil
}

// Ports returns the transport ports of a TCP or UDP packet.
func (p *IPv6) Ports() (src, dst uint16, ok bool) { return ports(p.Next, p.Payload) }

// L4ChecksumOK verifies the TCP, UDP or ICMPv6 checksum, each of which covers
// the pseudo-header. checked is false when the payload is incomplete.
func (p *IPv6) L4ChecksumOK() (ok, checked bool) {
	if !p.Complete() {
		return false, false
	}
	seg := p.Payload[:p.PayloadLen]
	switch p.Next {
	case ProtoICMPv6, ProtoUDP, ProtoTCP:
		return Checksum(seg, pseudoHeaderSum(p.Src, p.Dst, p.Next, len(seg))) == 0, true
	}
	return false, false
}

// ICMP parses the payload of an ICMPv6 packet.
func (p *IPv6) ICMP() (*ICMP, error) {
	if p.Next != ProtoICMPv6 || len(p.Payload) < 8 {
		return nil, errors.New("not an ICMPv6 packet")
	}
	return &ICMP{Type: p.Payload[0], Code: p.Payload[1], Rest: p.Payload[4:8], Body: p.Payload[8:]}, nil
}

// IsError6 reports whether an ICMPv6 type quotes the packet that caused it
// (destination unreachable, packet too big, time exceeded, parameter problem).
func (m *ICMP) IsError6() bool { return m.Type >= 1 && m.Type <= 4 }

// Quote6 parses the packet quoted by an ICMPv6 error.
func (m *ICMP) Quote6() (*IPv6, error) {
	if !m.IsError6() {
		return nil, errors.New("ICMPv6 message quotes nothing")
	}
	return ParseIPv6(m.Body)
}

// BuildIPv6 returns an IPv6 packet around payload.
func BuildIPv6(src, dst netip.Addr, next, hopLimit uint8, payload []byte) []byte {
	b := make([]byte, ipv6HeaderLen+len(payload))
	b[0] = 6 << 4
	binary.BigEndian.PutUint16(b[4:6], uint16(len(payload)))
	b[6], b[7] = next, hopLimit
	s, d := src.As16(), dst.As16()
	copy(b[8:24], s[:])
	copy(b[24:40], d[:])
	copy(b[40:], payload)
	return b
}

// BuildUDP6 returns an IPv6/UDP packet with a valid checksum.
func BuildUDP6(src, dst netip.Addr, sport, dport uint16, data []byte) []byte {
	return BuildIPv6(src, dst, ProtoUDP, 64, udpSegment(src, dst, sport, dport, data))
}

// BuildTCP6 returns an IPv6/TCP segment (20-byte header, ACK set) with a
// valid checksum.
func BuildTCP6(src, dst netip.Addr, sport, dport uint16, seq uint32, data []byte) []byte {
	return BuildIPv6(src, dst, ProtoTCP, 64, tcpSegment(src, dst, sport, dport, seq, data))
}

// SendNeighborSolicitation sends from n a neighbor solicitation for target to
// the target address itself (a unicast reachability check), with hop limit
// 255 as Neighbor Discovery requires; the kernel routes it, resolving target
// first if n does not know it.
func (n *NS) SendNeighborSolicitation(target string) {
	n.t.Helper()
	t := netip.MustParseAddr(target).As16()
	msg := append([]byte{135, 0, 0, 0, 0, 0, 0, 0}, t[:]...) // the kernel fills in the checksum
	n.MustDo(func() error {
		c, err := net.ListenPacket("ip6:ipv6-icmp", "::")
		if err != nil {
			return err
		}
		defer c.Close()
		pc := ipv6.NewPacketConn(c)
		if err := pc.SetHopLimit(255); err != nil {
			return err
		}
		_, err = pc.WriteTo(msg, nil, &net.IPAddr{IP: net.IP(t[:])})
		return err
	})
}
