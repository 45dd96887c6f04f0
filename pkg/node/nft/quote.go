package nft

import (
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// ICMPErrorTypes are the ICMP types that carry a quote of the packet that
// caused them: destination unreachable, source quench, redirect, time
// exceeded, parameter problem.
var ICMPErrorTypes = []byte{3, 4, 5, 11, 12}

// Offsets inside an IPv4 header and inside an ICMP error (from the start of
// the ICMP header, i.e. nftables' transport header base). The quote starts at
// +8; quoted addresses and the quoted header checksum sit at fixed offsets
// whatever options the quoted header carries.
const (
	offIPChecksum = 10
	offIPSrc      = 12
	offIPDst      = 16

	offICMPChecksum   = 2
	offQuoteVerIHL    = 8
	offQuoteFrag      = 8 + 6 // flags and fragment offset
	offQuoteProto     = 8 + 9
	offQuoteChecksum  = 8 + offIPChecksum
	offQuoteSrc       = 8 + offIPSrc
	offQuoteDst       = 8 + offIPDst
	offQuoteUDPCsum   = 8 + 20 + 6  // only with a 20-byte quoted header
	offQuoteTCPCsum   = 8 + 20 + 16 // likewise
	quoteVerIHLNoOpts = 0x45
)

// isICMPError matches ICMP messages that quote a packet and applies verdict.
func isICMPError(s setsOf, verdict expr.Any) []expr.Any {
	return append(s.fam.isICMP(reg0), loadTH(0, 1, reg0), in(s.icmpErrors, reg0), verdict)
}

// quoteRules rewrite the quoted address of an ICMP error. The lookup key is
// "outer address . quoted address" (outerOff in the IP header, quoteOff from
// the ICMP header): the quoted packet must name the same address the error
// travels to (inbound) or from (outbound); otherwise no rule matches and the
// last rule drops it.
//
// Rewriting the quoted address with the quoted IP header checksum as csum
// field keeps the outer ICMP checksum valid: both changes are inside the ICMP
// message and cancel out. The quoted TCP/UDP checksum also covers the address
// (pseudo-header); Linux ignores it in a quote, but packet analysers do not,
// so it is fixed first: write new value with the L4 checksum as csum field,
// then write the old value back with the ICMP checksum as csum field (the
// only way to make the kernel compute the L4 delta), then the final rule
// writes the new value once more with the IP header checksum. Every write
// leaves the ICMP checksum valid.
func quoteRules(m *nftables.Set, outerOff, quoteOff uint32) [][]expr.Any {
	f := fam4
	key := func() []expr.Any {
		return []expr.Any{f.loadNH(outerOff, reg0), loadTH(quoteOff, 4, reg1), lookupMap(m, reg0, reg2)}
	}
	// A quote too short to hold the checksum field ends the rule at its first
	// write, which reads that field before it changes anything.
	l4fix := func(proto byte, csumOff uint32, nonZero bool) []expr.Any {
		e := []expr.Any{
			loadTH(offQuoteVerIHL, 1, reg3), eq(reg3, []byte{quoteVerIHLNoOpts}),
			loadTH(offQuoteProto, 1, reg3), eq(reg3, []byte{proto}),
			// Only a first fragment (or a whole datagram) has the L4 header.
			loadTH(offQuoteFrag, 2, reg3),
			&expr.Bitwise{SourceRegister: reg3, DestRegister: reg3, Len: 2, Mask: []byte{0x1f, 0xff}, Xor: []byte{0, 0}},
			eq(reg3, []byte{0, 0}),
		}
		if nonZero { // a zero UDP checksum means "none" and must stay zero
			e = append(e, loadTH(csumOff, 2, reg3), &expr.Cmp{Op: expr.CmpOpNeq, Register: reg3, Data: []byte{0, 0}})
		}
		e = append(e, key()...)
		return append(e,
			loadTH(quoteOff, 4, reg3),                  // old quoted address
			f.writeTH(quoteOff, reg2, csumOff),         // new, quoted L4 checksum follows
			f.writeTH(quoteOff, reg3, offICMPChecksum), // old again, ICMP checksum follows
		)
	}
	main := append(key(), f.writeTH(quoteOff, reg2, offQuoteChecksum), &expr.Verdict{Kind: expr.VerdictReturn})
	return [][]expr.Any{
		l4fix(unix.IPPROTO_UDP, offQuoteUDPCsum, true),
		l4fix(unix.IPPROTO_TCP, offQuoteTCPCsum, false),
		main,
		{&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop}},
	}
}

// quoteRules6 rewrite the quoted address of an ICMPv6 error, with the same
// key and drop as quoteRules. The quoted IPv6 header has no checksum to
// absorb the change, but the quoted TCP, UDP or ICMPv6 checksum covers the
// quoted addresses (pseudo-header) and lies inside the ICMPv6 message too:
// writing the address with that checksum as csum field fixes it and, the
// two changes cancelling in the sum, keeps the outer ICMPv6 checksum valid.
// A quote with another next header (an extension header, a fragment), too
// short to hold the field, or with a zero UDP checksum (invalid over IPv6)
// has the change folded into the outer ICMPv6 checksum instead.
func quoteRules6(m *nftables.Set, outerOff, quoteOff uint32) [][]expr.Any {
	f := fam6
	r0, r1, r2, r3 := f.reg(0), f.reg(1), f.reg(2), f.reg(3)
	key := []expr.Any{f.loadNH(outerOff, r0), loadTH(quoteOff, 16, r1), lookupMap(m, r0, r2)}
	rewrite := func(csumOff uint32) []expr.Any {
		return append(slices.Clone(key), f.writeTH(quoteOff, r2, csumOff), &expr.Verdict{Kind: expr.VerdictReturn})
	}
	l4fix := func(proto byte, csumOff uint32) []expr.Any {
		return append([]expr.Any{
			loadTH(offQuote6NextHdr, 1, r3), eq(r3, []byte{proto}),
			// Also proves the checksum field is inside the (possibly short) quote.
			loadTH(csumOff, 2, r3), &expr.Cmp{Op: expr.CmpOpNeq, Register: r3, Data: []byte{0, 0}},
		}, rewrite(csumOff)...)
	}
	return [][]expr.Any{
		l4fix(unix.IPPROTO_UDP, offQuote6UDPCsum),
		l4fix(unix.IPPROTO_TCP, offQuote6TCPCsum),
		l4fix(unix.IPPROTO_ICMPV6, offQuote6ICMPSum),
		rewrite(offICMPChecksum),
		{&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop}},
	}
}
