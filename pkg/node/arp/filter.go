package arp

import (
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// requestFilter is the socket's filter, a pre-filter of Decide's rules: it passes
// ARP requests that this host did not send, untagged (a frame whose VLAN tag the
// interface took off is no request of this network), truncated to the part
// Decide reads, and drops everything else in the kernel, before it wakes the
// responder. Each block names the rule of Decide it applies early; a frame too
// short for a load is dropped too (DropMalformed). The kernel path counts and
// answers exactly the frames this filter passes.
var requestFilter = []bpf.Instruction{
	// DropOwnFrame: sent by this host.
	bpf.LoadExtension{Num: bpf.ExtType},
	bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.PACKET_OUTGOING, SkipTrue: 7},
	// DropNotEthernetV4: tagged. Decide sees a tag left in the frame (an
	// 802.1Q EtherType), not one the interface took off: the filter does.
	bpf.LoadExtension{Num: bpf.ExtVLANTagPresent},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0, SkipTrue: 5},
	// DropNotEthernetV4: not ARP.
	bpf.LoadAbsolute{Off: offEthType, Size: 2},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: etherTypeARP, SkipTrue: 3},
	// DropNotRequest.
	bpf.LoadAbsolute{Off: offOp, Size: 2},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: opRequest, SkipTrue: 1},
	// The rest of Decide's rules read no further than a reply's length.
	bpf.RetConstant{Val: ReplyLen},
	bpf.RetConstant{Val: 0},
}

// receiveNothing is the filter of a socket that only sends.
var receiveNothing = []bpf.Instruction{bpf.RetConstant{Val: 0}}
