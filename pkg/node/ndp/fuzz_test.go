package ndp

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"

	"github.com/mdlayher/ndp"
)

// fuzzOwns owns every address whose last byte is odd, so half of what the fuzzer asks
// for is ours.
func fuzzOwns(a netip.Addr) bool { return a.Is6() && a.As16()[15]%2 == 1 }

// FuzzDecide feeds arbitrary frames to Decide: it never changes its input, and it
// answers only what RFC 4861 lets a node answer for an address it owns — a neighbor
// solicitation from the link (hop limit 255, valid checksum, no extension header) for
// an owned unicast target, from a unicast source other than the target — with a
// solicited, override advertisement from the target to the source, at our MAC, with a
// valid checksum.
func FuzzDecide(f *testing.F) {
	for _, s := range []solicitation{
		multicastNS(eip), multicastNS(other),
		{ethSrc: peerMAC, ethDst: ours, src: peer, dst: eip, target: eip, hopLimit: 255},
		{ethSrc: peerMAC, ethDst: ours, src: netip.IPv6Unspecified(), dst: eip, target: eip, hopLimit: 255},
		{ethSrc: peerMAC, ethDst: ours, src: peer, dst: eip, target: eip, hopLimit: 64, slla: slla},
	} {
		f.Add(s.build(f))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := slices.Clone(in)
		reply := NewReplyBuffer(ours)
		empty := slices.Clone(reply)
		reason := Decide(in, ours, fuzzOwns, reply)
		if !bytes.Equal(in, orig) {
			t.Fatal("Decide changed its input")
		}
		if reason != Answer {
			if !bytes.Equal(reply, empty) {
				t.Fatalf("reply written with reason %q", reason)
			}
			return
		}
		// The request is one the node may answer.
		src, dst := netip.AddrFrom16([16]byte(in[offIPSrc:])), netip.AddrFrom16([16]byte(in[offIPDst:]))
		plen := int(binary.BigEndian.Uint16(in[offPayLen:]))
		target := netip.AddrFrom16([16]byte(in[offICMP+8:]))
		if binary.BigEndian.Uint16(in[offEthType:]) != etherTypeIPv6 || in[offNextHdr] != protoICMPv6 || in[offHopLimit] != 255 ||
			in[offICMP] != typeNS || in[offICMP+1] != 0 || checksum(in[offICMP:offICMP+plen], src, dst) != 0 {
			t.Fatalf("answered a frame that is no valid solicitation from the link: % x", in)
		}
		if !fuzzOwns(target) || target.IsMulticast() || src.Is4In6() || !src.IsGlobalUnicast() && !src.IsLinkLocalUnicast() || src == target {
			t.Fatalf("answered for target %v from %v", target, src)
		}
		// The reply is the advertisement RFC 4861 prescribes.
		if !bytes.Equal(reply[offEthSrc:offEthSrc+6], ours) || reply[offHopLimit] != 255 || reply[offEthDst]&1 != 0 {
			t.Fatalf("reply header % x", reply[:offICMP])
		}
		rs, rd := netip.AddrFrom16([16]byte(reply[offIPSrc:])), netip.AddrFrom16([16]byte(reply[offIPDst:]))
		if rs != target || rd != src || checksum(reply[offICMP:], rs, rd) != 0 {
			t.Fatalf("reply %v -> %v (want %v -> %v), checksum ok %v", rs, rd, target, src, checksum(reply[offICMP:], rs, rd) == 0)
		}
		m, err := ndp.ParseMessage(reply[offICMP:])
		na, ok := m.(*ndp.NeighborAdvertisement)
		if err != nil || !ok || !na.Solicited || !na.Override || na.Router || na.TargetAddress != target {
			t.Fatalf("reply message %+v, %v", m, err)
		}
	})
}
