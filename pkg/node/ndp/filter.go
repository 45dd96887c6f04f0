package ndp

import (
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/loutres/juneau/pkg/node/responder"
)

// nsFilter passes IPv6 neighbor solicitations that this host did not send,
// without extension headers, with hop limit 255, and drops everything else
// in the kernel, before it wakes the responder.
var nsFilter = []bpf.Instruction{
	bpf.LoadExtension{Num: bpf.ExtType},
	bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.PACKET_OUTGOING, SkipTrue: 9},
	bpf.LoadAbsolute{Off: offEthType, Size: 2},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: etherTypeIPv6, SkipTrue: 7},
	bpf.LoadAbsolute{Off: offNextHdr, Size: 1},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: protoICMPv6, SkipTrue: 5},
	bpf.LoadAbsolute{Off: offHopLimit, Size: 1},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: hopLimitNDP, SkipTrue: 3},
	bpf.LoadAbsolute{Off: offICMP, Size: 1},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: typeNS, SkipTrue: 1},
	bpf.RetConstant{Val: responder.MaxFrame},
	bpf.RetConstant{Val: 0},
}
