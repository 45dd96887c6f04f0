package nft

import (
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// 32-bit registers. A concatenated key of two addresses occupies two
// consecutive registers.
const (
	reg0 = unix.NFT_REG32_00 + iota
	reg1
	reg2
	reg3
	// regAfterName follows the interface name: an address loaded there
	// after a name in regName is the key "ifname . address" of a
	// concatenated set.
	regAfterName
	// regName is the 16-byte register for interface names. It is the same
	// storage as reg0..reg3.
	regName = unix.NFT_REG_1
	// regVerdict receives the verdict of a verdict map lookup.
	regVerdict = unix.NFT_REG_VERDICT
)

func loadTH(off, length, reg uint32) *expr.Payload {
	return &expr.Payload{OperationType: expr.PayloadLoad, DestRegister: reg, Base: expr.PayloadBaseTransportHeader, Offset: off, Len: length}
}

func in(s *nftables.Set, reg uint32) *expr.Lookup {
	return &expr.Lookup{SourceRegister: reg, SetName: s.Name, SetID: s.ID}
}

func notIn(s *nftables.Set, reg uint32) *expr.Lookup {
	return &expr.Lookup{SourceRegister: reg, SetName: s.Name, SetID: s.ID, Invert: true}
}

func lookupMap(s *nftables.Set, sreg, dreg uint32) *expr.Lookup {
	return &expr.Lookup{SourceRegister: sreg, DestRegister: dreg, IsDestRegSet: true, SetName: s.Name, SetID: s.ID}
}

func eq(reg uint32, data []byte) *expr.Cmp {
	return &expr.Cmp{Op: expr.CmpOpEq, Register: reg, Data: data}
}

func gotoChain(name string) *expr.Verdict { return &expr.Verdict{Kind: expr.VerdictGoto, Chain: name} }

func jumpChain(name string) *expr.Verdict { return &expr.Verdict{Kind: expr.VerdictJump, Chain: name} }

// ifname pads an interface name to IFNAMSIZ, as the kernel compares it.
func ifname(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}
