package pkt

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/loutres/juneau/test/netns"
)

var (
	macA = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xa}
	macB = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xb}
)

func TestUDPFrame(t *testing.T) {
	for _, tc := range []struct {
		name     string
		frameLen int
		wantLen  int
	}{
		{"padded to the minimum", 0, MinFrameLen},
		{"odd length", 101, 101},
		{"full size", 1514, 1514},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := Endpoint{MAC: macA, IP: netip.MustParseAddr("10.225.51.100"), Port: 40000}
			dst := Endpoint{MAC: macB, IP: netip.MustParseAddr("10.225.51.5"), Port: 9}
			f := UDP(src, dst, tc.frameLen)
			if len(f) != tc.wantLen {
				t.Fatalf("length %d, want %d", len(f), tc.wantLen)
			}
			if !bytes.Equal(f[0:6], macB) || !bytes.Equal(f[6:12], macA) {
				t.Errorf("MACs %x -> %x", f[6:12], f[0:6])
			}
			p, ok := netns.ParseFrame(f)
			if !ok {
				t.Fatal("not an IPv4 frame")
			}
			if p.Src != src.IP || p.Dst != dst.IP || p.Proto != netns.ProtoUDP {
				t.Errorf("header %v -> %v proto %d", p.Src, p.Dst, p.Proto)
			}
			if !p.HeaderChecksumOK {
				t.Error("IP header checksum invalid")
			}
			if ok, checked := p.L4ChecksumOK(); !ok || !checked {
				t.Errorf("UDP checksum ok=%v checked=%v", ok, checked)
			}
			sp, dp, _ := p.Ports()
			if sp != 40000 || dp != 9 {
				t.Errorf("ports %d -> %d", sp, dp)
			}
		})
	}
}

func TestSetUDPSourceKeepsChecksumsValid(t *testing.T) {
	f := UDP(Endpoint{MAC: macA, IP: netip.MustParseAddr("10.225.51.100"), Port: 1024},
		Endpoint{MAC: macB, IP: netip.MustParseAddr("10.244.1.5"), Port: 9}, 0)
	for i := range 300 {
		ip := netip.AddrFrom4([4]byte{10, 225, 51, byte(100 + i%100)})
		port := uint16(1024 + i*211)
		SetUDPSource(f, ip, port)
		p, _ := netns.ParseFrame(f)
		sp, _, _ := p.Ports()
		if p.Src != ip || sp != port {
			t.Fatalf("source %v:%d, want %v:%d", p.Src, sp, ip, port)
		}
		if ok, _ := p.L4ChecksumOK(); !ok || !p.HeaderChecksumOK {
			t.Fatalf("checksums broken after rewriting to %v:%d", ip, port)
		}
	}
}

func TestARPRequestFrame(t *testing.T) {
	self, target := netip.MustParseAddr("10.225.51.100"), netip.MustParseAddr("10.225.51.5")
	f := ARPRequestFrame(macA, self, target)
	if len(f) != MinFrameLen || !bytes.Equal(f[0:6], net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) {
		t.Fatalf("frame %x", f)
	}
	a, ok := netns.ParseARP(f)
	if !ok || a.Op != ARPRequest || a.SenderIP != self || a.TargetIP != target || !bytes.Equal(a.SenderMAC, macA) {
		t.Fatalf("parsed %+v ok=%v", a, ok)
	}
}

func TestChecksumOfValidHeaderIsZero(t *testing.T) {
	f := UDP(Endpoint{MAC: macA, IP: netip.MustParseAddr("10.0.0.1")}, Endpoint{MAC: macB, IP: netip.MustParseAddr("10.0.0.2")}, 0)
	if c := Checksum(f[EthHeaderLen : EthHeaderLen+IPHeaderLen]); c != 0 {
		t.Errorf("checksum over a valid header = %#x, want 0", c)
	}
}

// TestUDPOverIPv6: the same datagram behind an IPv6 header, with a valid checksum.
func TestUDPOverIPv6(t *testing.T) {
	src := Endpoint{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, IP: netip.MustParseAddr("2001:db8::100"), Port: 40000}
	dst := Endpoint{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, IP: netip.MustParseAddr("2001:db8::5"), Port: 9}
	f := UDP(src, dst, 0)
	if len(f) != 80 || binary.BigEndian.Uint16(f[12:14]) != 0x86dd {
		t.Fatalf("frame of %d bytes, ethertype %#x", len(f), binary.BigEndian.Uint16(f[12:14]))
	}
	check := func() {
		t.Helper()
		ip := f[EthHeaderLen:]
		udp := ip[IPv6HeaderLen:]
		if fold(sum(udp, sum(ip[8:40], uint32(protoUDP)+uint32(len(udp))))) != 0xffff {
			t.Error("bad UDP checksum")
		}
	}
	check()
	SetUDPSource(f, netip.MustParseAddr("2001:db8::101"), 1234)
	check()
	if binary.BigEndian.Uint16(f[EthHeaderLen+IPv6HeaderLen:]) != 1234 || f[EthHeaderLen+23] != 0x01 {
		t.Error("source not rewritten")
	}
}
