package nft

import (
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// family is what differs between the two tables juneau owns, `ip juneau` for
// IPv4 and `ip6 juneau` for IPv6 (README.md, "IPv6"): the table family, the
// address length and where addresses sit in the network header, the ICMP
// protocol and its error types, and how an address write fixes checksums.
// The chains, maps and rules are the same in both; every builder takes the
// family and asks it for these.
type family struct {
	name     string // "ip" or "ip6", as nft names the table family
	table    nftables.TableFamily
	nfproto  uint32 // NFPROTO_* of NAT expressions
	addrLen  uint32 // bytes
	addrType nftables.SetDatatype
	// offSrc and offDst locate the addresses in the network header.
	offSrc, offDst uint32
	// icmpProto is the L4 protocol of ICMP (ICMPv6), icmpType its type's set
	// datatype, errorTypes the types that quote the offending packet.
	icmpProto  byte
	icmpType   nftables.SetDatatype
	errorTypes []byte
	// setIDBase keeps the set IDs of the two tables apart in one transaction.
	setIDBase uint32
}

var (
	fam4 = &family{
		name: "ip", table: nftables.TableFamilyIPv4, nfproto: unix.NFPROTO_IPV4, addrLen: 4, addrType: nftables.TypeIPAddr,
		offSrc: offIPSrc, offDst: offIPDst,
		icmpProto: unix.IPPROTO_ICMP, icmpType: nftables.TypeICMPType, errorTypes: ICMPErrorTypes,
	}
	fam6 = &family{
		name: "ip6", table: nftables.TableFamilyIPv6, nfproto: unix.NFPROTO_IPV6, addrLen: 16, addrType: nftables.TypeIP6Addr,
		offSrc: offIP6Src, offDst: offIP6Dst,
		icmpProto: unix.IPPROTO_ICMPV6, icmpType: nftables.TypeICMP6Type, errorTypes: ICMPv6ErrorTypes,
		setIDBase: 100,
	}
	// families are both, in the order their tables are written.
	families = []*family{fam4, fam6}
)

// familyOf is the family of an (unmapped) address.
func familyOf(a netip.Addr) *family {
	if a.Is4() {
		return fam4
	}
	return fam6
}

// index is the family's position in families and familySets.
func (f *family) index() int {
	if f == fam4 {
		return 0
	}
	return 1
}

// reg is the first 32-bit register of address slot n: slots are laid out
// back to back, so two consecutive slots hold the concatenated key
// "address . address" of a map lookup. IPv4 uses registers 0, 1, 2, 3 for
// slots 0 to 3, IPv6 registers 0, 4, 8, 12 (four each): four IPv6
// addresses fill the 64 bytes of registers.
func (f *family) reg(n int) uint32 { return unix.NFT_REG32_00 + uint32(n)*f.addrLen/4 }

func (f *family) loadSrc(reg uint32) *expr.Payload { return f.loadNH(f.offSrc, reg) }
func (f *family) loadDst(reg uint32) *expr.Payload { return f.loadNH(f.offDst, reg) }

func (f *family) loadNH(off, reg uint32) *expr.Payload {
	return &expr.Payload{OperationType: expr.PayloadLoad, DestRegister: reg, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: f.addrLen}
}

// writeNH writes an address into the network header, updating the IPv4
// header checksum and the TCP, UDP or ICMPv6 checksum, whose pseudo-header
// covers the address (the kernel skips the L4 update for ICMP, whose
// checksum does not cover the addresses, and for non-first fragments).
//
// The kernel updates the L4 checksum only for a write that also updates a
// checksum of the header itself (csum_type inet), which IPv6 has not. So over
// IPv6 the write names the flow label's low 16 bits (bytes 2-3) as that
// checksum, which is saved in scratch before and written back after: the
// kernel's own L4 update, which also handles partial checksums of offloaded
// packets, at the price of two 2-byte copies.
func (f *family) writeNH(off, reg, scratch uint32) []expr.Any {
	p := &expr.Payload{
		OperationType: expr.PayloadWrite, SourceRegister: reg, Base: expr.PayloadBaseNetworkHeader,
		Offset: off, Len: f.addrLen, CsumType: expr.CsumTypeInet, CsumOffset: offIPChecksum,
		CsumFlags: unix.NFT_PAYLOAD_L4CSUM_PSEUDOHDR,
	}
	if f == fam4 {
		return []expr.Any{p}
	}
	p.CsumOffset = offIP6FlowLow
	return []expr.Any{
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: scratch, Base: expr.PayloadBaseNetworkHeader, Offset: offIP6FlowLow, Len: 2},
		p,
		&expr.Payload{OperationType: expr.PayloadWrite, SourceRegister: scratch, Base: expr.PayloadBaseNetworkHeader, Offset: offIP6FlowLow, Len: 2},
	}
}

// writeTH writes an address at off from the transport header, folding the
// change into the checksum at csumOff (also from the transport header).
func (f *family) writeTH(off, reg, csumOff uint32) *expr.Payload {
	return &expr.Payload{
		OperationType: expr.PayloadWrite, SourceRegister: reg, Base: expr.PayloadBaseTransportHeader,
		Offset: off, Len: f.addrLen, CsumType: expr.CsumTypeInet, CsumOffset: csumOff,
	}
}

// isICMP matches the family's ICMP protocol.
func (f *family) isICMP(reg uint32) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg, Data: []byte{f.icmpProto}},
	}
}

// notICMP matches anything but the family's ICMP protocol.
func (f *family) notICMP(reg uint32) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: reg, Data: []byte{f.icmpProto}},
	}
}

// Offsets inside an IPv6 header and inside an ICMPv6 error. The quoted packet
// starts 8 bytes into the ICMPv6 message; its header has a fixed length (40
// bytes), so with no extension header the quoted transport header starts at
// +48.
const (
	offIP6FlowLow = 2
	offIP6Src     = 8
	offIP6Dst     = 24

	offQuote6NextHdr = 8 + 6
	offQuote6Src     = 8 + offIP6Src
	offQuote6Dst     = 8 + offIP6Dst
	offQuote6L4      = 8 + 40
	offQuote6UDPCsum = offQuote6L4 + 6
	offQuote6TCPCsum = offQuote6L4 + 16
	offQuote6ICMPSum = offQuote6L4 + 2
)

// ICMPv6ErrorTypes are the ICMPv6 types that quote the packet that caused
// them: destination unreachable, packet too big, time exceeded, parameter
// problem.
var ICMPv6ErrorTypes = []byte{1, 2, 3, 4}

// Neighbor Discovery (router solicitation and advertisement, neighbor
// solicitation and advertisement, redirect) is link-local signalling that
// is never translated (README.md, "IPv6").
const (
	ndpFirstType = 133
	ndpLastType  = 137
)
