package ndp

import (
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/loutres/juneau/pkg/node/responder"
)

// nsFilter is the socket's filter, a pre-filter of Decide's rules: it passes IPv6
// neighbor solicitations that this host did not send, without extension headers,
// with hop limit 255, and drops everything else in the kernel, before it wakes
// the responder. Each block names the rule of Decide it applies early; a frame
// too short for a load is dropped too (DropMalformed).
var nsFilter = []bpf.Instruction{
	// DropOwnFrame: sent by this host.
	bpf.LoadExtension{Num: bpf.ExtType},
	bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.PACKET_OUTGOING, SkipTrue: 9},
	// DropNotNS: not IPv6.
	bpf.LoadAbsolute{Off: offEthType, Size: 2},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: etherTypeIPv6, SkipTrue: 7},
	// DropNotNS: not ICMPv6 right behind the IPv6 header.
	bpf.LoadAbsolute{Off: offNextHdr, Size: 1},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: protoICMPv6, SkipTrue: 5},
	// DropHopLimit.
	bpf.LoadAbsolute{Off: offHopLimit, Size: 1},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: hopLimitNDP, SkipTrue: 3},
	// DropNotNS: not a neighbor solicitation.
	bpf.LoadAbsolute{Off: offICMP, Size: 1},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: typeNS, SkipTrue: 1},
	// The rest of Decide's rules read the whole solicitation.
	bpf.RetConstant{Val: responder.MaxFrame},
	bpf.RetConstant{Val: 0},
}
