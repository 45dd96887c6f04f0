package arp

import (
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// requestFilter passes ARP requests that this host did not send, untagged
// (a frame whose VLAN tag the interface took off is no request of this
// network), truncated to the part Decide reads, and drops everything else in
// the kernel, before it wakes the responder. The kernel path counts and
// answers exactly the frames this filter passes.
var requestFilter = []bpf.Instruction{
	bpf.LoadExtension{Num: bpf.ExtType},
	bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.PACKET_OUTGOING, SkipTrue: 7},
	bpf.LoadExtension{Num: bpf.ExtVLANTagPresent},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0, SkipTrue: 5},
	bpf.LoadAbsolute{Off: offEthType, Size: 2},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: etherTypeARP, SkipTrue: 3},
	bpf.LoadAbsolute{Off: offOp, Size: 2},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: opRequest, SkipTrue: 1},
	bpf.RetConstant{Val: ReplyLen},
	bpf.RetConstant{Val: 0},
}

// receiveNothing is the filter of a socket that only sends.
var receiveNothing = []bpf.Instruction{bpf.RetConstant{Val: 0}}
