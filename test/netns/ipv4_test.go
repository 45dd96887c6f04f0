package netns

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

func TestBuildAndVerifyUDP(t *testing.T) {
	src, dst := netip.MustParseAddr("10.225.51.100"), netip.MustParseAddr("10.225.51.5")
	pkt := BuildUDP(src, dst, 4000, 53, []byte("payload"))
	p, err := ParseIPv4(pkt)
	if err != nil {
		t.Fatal(err)
	}
	if p.Src != src || p.Dst != dst || p.Proto != ProtoUDP || !p.HeaderChecksumOK {
		t.Fatalf("parsed %+v", p)
	}
	if ok, checked := p.L4ChecksumOK(); !ok || !checked {
		t.Fatalf("UDP checksum ok=%v checked=%v", ok, checked)
	}
	sp, dp, _ := p.Ports()
	if sp != 4000 || dp != 53 {
		t.Errorf("ports %d→%d", sp, dp)
	}

	// Changing an address without fixing the checksums must be detected.
	pkt[19]++
	p, _ = ParseIPv4(pkt)
	if p.HeaderChecksumOK {
		t.Error("corrupted header checksum not detected")
	}
	if ok, _ := p.L4ChecksumOK(); ok {
		t.Error("stale UDP pseudo-header checksum not detected")
	}
}

func TestICMPErrorQuote(t *testing.T) {
	inner := BuildUDP(netip.MustParseAddr("10.225.51.5"), netip.MustParseAddr("10.225.51.100"), 33434, 33435, make([]byte, 32))
	msg := BuildICMP(11, 0, [4]byte{}, inner)
	outer := BuildIPv4(netip.MustParseAddr("10.225.51.1"), netip.MustParseAddr("10.225.51.5"), ProtoICMP, 64, msg)
	p, err := ParseIPv4(outer)
	if err != nil {
		t.Fatal(err)
	}
	if ok, checked := p.L4ChecksumOK(); !ok || !checked {
		t.Fatal("ICMP checksum invalid")
	}
	m, err := p.ICMP()
	if err != nil || !m.IsError() {
		t.Fatalf("ICMP %v %v", m, err)
	}
	q, err := m.Quote()
	if err != nil {
		t.Fatal(err)
	}
	if q.Src != netip.MustParseAddr("10.225.51.5") || !q.HeaderChecksumOK {
		t.Errorf("quote %+v", q)
	}
	if ok, checked := q.L4ChecksumOK(); !ok || !checked {
		t.Errorf("quoted UDP checksum ok=%v checked=%v", ok, checked)
	}

	// A truncated quote cannot have its transport checksum verified.
	trunc := BuildICMP(3, 4, [4]byte{0, 0, 0x05, 0x00}, inner[:28])
	binary.BigEndian.PutUint16(trunc[8+2:8+4], 1400) // quoted total length larger than quoted bytes
	m2 := &ICMP{Type: trunc[0], Body: trunc[8:]}
	q2, err := m2.Quote()
	if err != nil {
		t.Fatal(err)
	}
	if _, checked := q2.L4ChecksumOK(); checked {
		t.Error("truncated quote reported as checkable")
	}
}

func TestParseARP(t *testing.T) {
	f := make([]byte, 42)
	copy(f[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	binary.BigEndian.PutUint16(f[12:14], 0x0806)
	a := f[14:]
	binary.BigEndian.PutUint16(a[0:2], 1)
	binary.BigEndian.PutUint16(a[2:4], 0x0800)
	a[4], a[5] = 6, 4
	binary.BigEndian.PutUint16(a[6:8], 1)
	copy(a[14:18], []byte{10, 225, 51, 5})
	copy(a[24:28], []byte{10, 225, 51, 5})
	p, ok := ParseARP(f)
	if !ok || p.Op != 1 || !p.Gratuitous() {
		t.Fatalf("ParseARP = %+v, %v", p, ok)
	}
	if _, ok := ParseARP(f[:30]); ok {
		t.Error("short frame parsed")
	}
}

func TestBuildTCP(t *testing.T) {
	p, err := ParseIPv4(BuildTCP(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), 1, 2, 3, []byte("abc")))
	if err != nil {
		t.Fatal(err)
	}
	if ok, checked := p.L4ChecksumOK(); !ok || !checked || p.Proto != ProtoTCP {
		t.Fatalf("TCP checksum ok=%v checked=%v proto=%d", ok, checked, p.Proto)
	}
}
