package ndp

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/mdlayher/ndp"
)

var (
	ours    = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}
	peerMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x64}
	slla    = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x65}
	eip     = netip.MustParseAddr("2001:db8:51::5")
	other   = netip.MustParseAddr("2001:db8:51::7")
	peer    = netip.MustParseAddr("2001:db8:51::100")
)

// solicitation describes a neighbor solicitation frame to build.
type solicitation struct {
	ethSrc, ethDst net.HardwareAddr
	src, dst       netip.Addr
	target         netip.Addr
	hopLimit       byte
	slla           net.HardwareAddr // nil: no source link-layer address option
	badChecksum    bool
}

// multicastNS is a well-formed solicitation for target sent to its
// solicited-node group.
func multicastNS(target netip.Addr) solicitation {
	g, _ := ndp.SolicitedNodeMulticast(target)
	return solicitation{ethSrc: peerMAC, ethDst: groupMAC(g), src: peer, dst: g, target: target, hopLimit: 255, slla: slla}
}

func (s solicitation) frame(t *testing.T) []byte { return s.build(t) }

func (s solicitation) build(t testing.TB) []byte {
	t.Helper()
	ns := &ndp.NeighborSolicitation{TargetAddress: s.target}
	if s.slla != nil {
		ns.Options = []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: s.slla}}
	}
	msg, err := ndp.MarshalMessageChecksum(ns, s.src, s.dst)
	if err != nil {
		t.Fatal(err)
	}
	if s.badChecksum {
		msg[2] ^= 0xff
	}
	f := make([]byte, offICMP+len(msg))
	copy(f[offEthDst:], s.ethDst)
	copy(f[offEthSrc:], s.ethSrc)
	binary.BigEndian.PutUint16(f[offEthType:], etherTypeIPv6)
	f[offIP] = 6 << 4
	binary.BigEndian.PutUint16(f[offPayLen:], uint16(len(msg)))
	f[offNextHdr], f[offHopLimit] = protoICMPv6, s.hopLimit
	a, b := s.src.As16(), s.dst.As16()
	copy(f[offIPSrc:], a[:])
	copy(f[offIPDst:], b[:])
	copy(f[offICMP:], msg)
	return f
}

func TestDecide(t *testing.T) {
	owns := func(a netip.Addr) bool { return a == eip }
	with := func(f func(*solicitation)) solicitation {
		s := multicastNS(eip)
		f(&s)
		return s
	}
	tests := []struct {
		name  string
		frame func(t *testing.T) []byte
		want  DropReason
	}{
		{"multicast solicitation", multicastNS(eip).frame, Answer},
		{"unicast solicitation (reachability check)", with(func(s *solicitation) { s.ethDst, s.dst, s.slla = ours, eip, nil }).frame, Answer},
		{"not owned", multicastNS(other).frame, DropNotOwned},
		{"hop limit 254: routed, not from the link", with(func(s *solicitation) { s.hopLimit = 254 }).frame, DropHopLimit},
		{"bad checksum", with(func(s *solicitation) { s.badChecksum = true }).frame, DropBadChecksum},
		{"duplicate address detection", with(func(s *solicitation) { s.src, s.slla = netip.IPv6Unspecified(), nil }).frame, DropProbe},
		{"sent by us", with(func(s *solicitation) { s.ethSrc = ours }).frame, DropOwnFrame},
		{"another host's MAC", with(func(s *solicitation) { s.ethDst = peerMAC }).frame, DropNotForUs},
		{"another target's group", with(func(s *solicitation) {
			g, _ := ndp.SolicitedNodeMulticast(netip.MustParseAddr("2001:db8:51::abcd"))
			s.dst, s.ethDst = g, groupMAC(g)
		}).frame, DropNotForUs},
		{"all-nodes destination", with(func(s *solicitation) {
			s.dst, s.ethDst = netip.MustParseAddr("ff02::1"), ours
		}).frame, DropBadDest},
		{"multicast source", with(func(s *solicitation) { s.src = netip.MustParseAddr("ff02::1") }).frame, DropBadSender},
		{"loopback source", with(func(s *solicitation) { s.src = netip.IPv6Loopback() }).frame, DropBadSender},
		{"IPv4-mapped source", with(func(s *solicitation) { s.src = netip.MustParseAddr("::ffff:10.0.0.1") }).frame, DropBadSender},
		{"source is the target", with(func(s *solicitation) { s.src = eip }).frame, DropSelf},
		{"ARP frame", func(*testing.T) []byte { f := make([]byte, 60); f[12], f[13] = 0x08, 0x06; return f }, DropNotNS},
		{"advertisement", func(t *testing.T) []byte {
			f := multicastNS(eip).frame(t)
			f[offICMP] = 136
			return f
		}, DropNotNS},
		{"truncated", func(t *testing.T) []byte { return multicastNS(eip).frame(t)[:offICMP+10] }, DropMalformed},
		{"short", func(*testing.T) []byte { return []byte{1, 2, 3} }, DropMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reply := NewReplyBuffer(ours)
			empty := bytes.Clone(reply)
			got := Decide(tt.frame(t), ours, owns, reply)
			if got != tt.want {
				t.Fatalf("Decide = %q, want %q", got, tt.want)
			}
			if !bytes.Equal(reply, empty) != (got == Answer) {
				t.Errorf("reply %x with reason %q", reply, got)
			}
		})
	}
}

// TestReply: the advertisement goes to the solicitation's source link-layer
// address (else its Ethernet source) and source address, from the target,
// solicited and override, our MAC as target link-layer address, hop limit
// 255 and a valid checksum.
func TestReply(t *testing.T) {
	owns := func(a netip.Addr) bool { return a == eip }
	for _, tc := range []struct {
		name string
		s    solicitation
		to   net.HardwareAddr
	}{
		{"multicast, with source link-layer address", multicastNS(eip), slla},
		{"unicast, without", solicitation{ethSrc: peerMAC, ethDst: ours, src: peer, dst: eip, target: eip, hopLimit: 255}, peerMAC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewReplyBuffer(ours)
			if reason := Decide(tc.s.frame(t), ours, owns, f); reason != Answer {
				t.Fatal(reason)
			}
			if !bytes.Equal(f[offEthDst:offEthDst+6], tc.to) || !bytes.Equal(f[offEthSrc:offEthSrc+6], ours) || f[offHopLimit] != 255 {
				t.Errorf("frame header % x", f[:offICMP])
			}
			src, dst := netip.AddrFrom16([16]byte(f[offIPSrc:])), netip.AddrFrom16([16]byte(f[offIPDst:]))
			if src != eip || dst != peer {
				t.Errorf("advertisement %v -> %v, want %v -> %v", src, dst, eip, peer)
			}
			msg := f[offICMP:]
			if checksum(msg, src, dst) != 0 {
				t.Error("bad checksum")
			}
			m, err := ndp.ParseMessage(msg)
			if err != nil {
				t.Fatal(err)
			}
			na, ok := m.(*ndp.NeighborAdvertisement)
			if !ok || !na.Solicited || !na.Override || na.Router || na.TargetAddress != eip || len(na.Options) != 1 {
				t.Fatalf("advertisement = %+v", m)
			}
			if lla := na.Options[0].(*ndp.LinkLayerAddress); lla.Direction != ndp.Target || !bytes.Equal(lla.Addr, ours) {
				t.Errorf("option = %+v", lla)
			}
		})
	}
}
