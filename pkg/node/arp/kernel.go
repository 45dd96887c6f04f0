package arp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// The kernel path (docs/arp.md#replies-in-the-kernel): a TCX ingress program on
// the external interface that makes Decide's decisions on each frame in the
// kernel, answers the requests for owned addresses by turning the request into
// the reply and redirecting it out of the same interface, and passes every
// other frame on. The owned addresses are a BPF hash map kept equal to
// SetAddresses's set; counters are a per-CPU array.

// Return codes of a TCX program.
const (
	tcxNext     = -1 // go on with the next program, or pass the frame to the stack
	tcxRedirect = 7  // TC_ACT_REDIRECT, what bpf_redirect returns
)

// maxKernelAddresses is the capacity of the owned-address map. More addresses
// than that on one node turn the kernel path off (the socket path has no limit).
// The map is not preallocated, so the capacity costs nothing until used; at 65,536 a
// Node with 100,000 ElasticIPs answered from user space, 2 ms at p99 instead of 45 µs
// (docs/performance.md#scale).
const maxKernelAddresses = 1 << 18

// Slots of the per-CPU counter array's one value, a row of uint64: the
// requests (as the socket path counts them), the replies, then the drops in the
// order of dropLabels. Only frames the socket path's filter passes (ARP, length
// at least 22, operation 1, untagged) are counted, so the figures mean the same
// whichever path answers.
const (
	slotRequests = 0
	slotReplies  = 1
	slotDrops    = 2
	nSlots       = slotDrops + len(dropLabels)
)

func dropSlot(reason DropReason) int {
	for i := range dropLabels {
		if dropLabels[i].Reason == reason {
			return slotDrops + i
		}
	}
	panic("no drop slot for " + string(reason))
}

// Offsets in struct __sk_buff.
const (
	skbLen         = 0
	skbVLANPresent = 20
	skbIfindex     = 40
	skbData        = 76
	skbDataEnd     = 80
)

// program returns the TCX ingress program answering for interface MAC ours,
// with owned and counters the maps it reads and counts into. It reads the frame
// in place (direct packet access) and turns an answered request into the reply
// in place.
//
// Registers: R6 the context, R7 the frame's start, R8 the end of its linear
// part, R9 the counters (checked for nil at each use).
func program(ours net.HardwareAddr, owned, counters *ebpf.Map) asm.Instructions {
	ne := binary.NativeEndian
	macHi := int32(ne.Uint32(ours[0:4])) // the first four bytes as a native-order load sees them
	macLo := int32(ne.Uint16(ours[4:6]))
	be16 := func(v uint16) int32 { return int32(ne.Uint16(binary.BigEndian.AppendUint16(nil, v))) }

	// count adds one to slot, if the counters were found.
	counted := 0
	count := func(slot int) asm.Instructions {
		counted++
		done := fmt.Sprintf("counted%d", counted)
		return asm.Instructions{
			asm.JEq.Imm(asm.R9, 0, done),
			asm.LoadMem(asm.R1, asm.R9, int16(slot*8), asm.DWord),
			asm.Add.Imm(asm.R1, 1),
			asm.StoreMem(asm.R9, int16(slot*8), asm.R1, asm.DWord),
			asm.Mov.Imm(asm.R0, 0).WithSymbol(done),
		}
	}
	// drop counts reason (and a request, if dropLabels says the frame was one)
	// and passes the frame on.
	drop := func(label string, reason DropReason) asm.Instructions {
		var out asm.Instructions
		slot := dropSlot(reason)
		if dropLabels[slot-slotDrops].Request {
			out = append(out, count(slotRequests)...)
		}
		out = append(out, count(slot)...)
		out = append(out, asm.Ja.Label("next"))
		out[0] = out[0].WithSymbol(label)
		return out
	}
	loadPointers := func() asm.Instructions {
		return asm.Instructions{
			asm.LoadMem(asm.R7, asm.R6, skbData, asm.Word),
			asm.LoadMem(asm.R8, asm.R6, skbDataEnd, asm.Word),
		}
	}

	insns := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.Mov.Imm(asm.R9, 0),
		// requestFilter's rules (DropNotEthernetV4 for a tagged frame,
		// DropMalformed): untagged frames long enough to hold the ARP operation
		// only; everything else passes at once, uncounted.
		asm.LoadMem(asm.R2, asm.R6, skbLen, asm.Word),
		asm.JLT.Imm(asm.R2, offOp+2, "next"),
		asm.LoadMem(asm.R1, asm.R6, skbVLANPresent, asm.Word),
		asm.JNE.Imm(asm.R1, 0, "next"),
	}
	insns = append(insns, loadPointers()...)
	insns = append(insns,
		// Make the ARP packet linear if it is not: bpf_skb_pull_data(skb, min(len, 42)).
		asm.Mov.Reg(asm.R1, asm.R7),
		asm.Add.Imm(asm.R1, arpEnd),
		asm.JLE.Reg(asm.R1, asm.R8, "linear"),
		asm.JLE.Imm(asm.R2, arpEnd, "pull"),
		asm.Mov.Imm(asm.R2, arpEnd),
		asm.Mov.Reg(asm.R1, asm.R6).WithSymbol("pull"),
		asm.FnSkbPullData.Call(),
	)
	insns = append(insns, loadPointers()...)
	insns = append(insns,
		// requestFilter's rules (DropMalformed, DropNotEthernetV4 for another
		// EtherType, DropNotRequest): what is no ARP request passes, uncounted.
		asm.Mov.Reg(asm.R1, asm.R7).WithSymbol("linear"),
		asm.Add.Imm(asm.R1, offOp+2),
		asm.JGT.Reg(asm.R1, asm.R8, "next"),
		asm.LoadMem(asm.R1, asm.R7, offEthType, asm.Half),
		asm.JNE.Imm(asm.R1, be16(etherTypeARP), "next"),
		asm.LoadMem(asm.R1, asm.R7, offOp, asm.Half),
		asm.JNE.Imm(asm.R1, be16(opRequest), "next"),

		// From here on the socket path would have seen the frame: count it.
		asm.StoreImm(asm.RFP, -4, 0, asm.Word), // the key: 0
		asm.LoadMapPtr(asm.R1, counters.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.Mov.Reg(asm.R9, asm.R0),

		// DropNotEthernetV4: not Ethernet/IPv4 ARP.
		asm.LoadMem(asm.R1, asm.R7, offHWType, asm.Half),
		asm.JNE.Imm(asm.R1, be16(hwTypeEther), "notEthernetV4"),
		asm.LoadMem(asm.R1, asm.R7, offProto, asm.Half),
		asm.JNE.Imm(asm.R1, be16(etherTypeIPv4), "notEthernetV4"),
		asm.LoadMem(asm.R1, asm.R7, offHWLen, asm.Byte),
		asm.JNE.Imm(asm.R1, macLen, "notEthernetV4"),
		asm.LoadMem(asm.R1, asm.R7, offProtoLen, asm.Byte),
		asm.JNE.Imm(asm.R1, ipv4Len, "notEthernetV4"),
		// DropMalformed: shorter than a whole ARP packet (the linear part is,
		// after the pull, only if the frame is).
		asm.Mov.Reg(asm.R1, asm.R7),
		asm.Add.Imm(asm.R1, arpEnd),
		asm.JGT.Reg(asm.R1, asm.R8, "malformed"),

		// DropOwnFrame: sent by this interface, Ethernet source or ARP sender is
		// our MAC.
		asm.LoadMem(asm.R1, asm.R7, offEthSrc, asm.Word),
		asm.JNE.Imm32(asm.R1, macHi, "srcNotOurs"),
		asm.LoadMem(asm.R1, asm.R7, offEthSrc+4, asm.Half),
		asm.JEq.Imm(asm.R1, macLo, "ownFrame"),
		asm.LoadMem(asm.R1, asm.R7, offSHA, asm.Word).WithSymbol("srcNotOurs"),
		asm.JNE.Imm32(asm.R1, macHi, "notOwnFrame"),
		asm.LoadMem(asm.R1, asm.R7, offSHA+4, asm.Half),
		asm.JEq.Imm(asm.R1, macLo, "ownFrame"),

		// DropNotForUs: the Ethernet destination is neither broadcast nor us.
		asm.LoadMem(asm.R1, asm.R7, offEthDst, asm.Word).WithSymbol("notOwnFrame"),
		asm.LoadMem(asm.R2, asm.R7, offEthDst+4, asm.Half),
		asm.JNE.Imm32(asm.R1, -1, "dstNotBroadcast"),
		asm.JEq.Imm(asm.R2, 0xffff, "dstOK"),
		asm.JNE.Imm32(asm.R1, macHi, "notForUs").WithSymbol("dstNotBroadcast"),
		asm.JNE.Imm(asm.R2, macLo, "notForUs"),

		// DropBadSender: the sender hardware address is not unicast (group bit
		// clear) or is zero.
		asm.LoadMem(asm.R1, asm.R7, offSHA, asm.Byte).WithSymbol("dstOK"),
		asm.And.Imm(asm.R1, 1),
		asm.JNE.Imm(asm.R1, 0, "badSender"),
		asm.LoadMem(asm.R1, asm.R7, offSHA, asm.Word),
		asm.JNE.Imm(asm.R1, 0, "senderOK"),
		asm.LoadMem(asm.R1, asm.R7, offSHA+4, asm.Half),
		asm.JEq.Imm(asm.R1, 0, "badSender"),

		// DropProbe, DropAnnouncement.
		asm.LoadMem(asm.R1, asm.R7, offSPA, asm.Word).WithSymbol("senderOK"),
		asm.JEq.Imm(asm.R1, 0, "probe"),
		asm.LoadMem(asm.R2, asm.R7, offTPA, asm.Word),
		asm.JEq.Reg(asm.R1, asm.R2, "announcement"),

		// DropNotOwned. The key is the target address, in the frame.
		asm.LoadMapPtr(asm.R1, owned.FD()),
		asm.Mov.Reg(asm.R2, asm.R7),
		asm.Add.Imm(asm.R2, offTPA),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "notOwned"),

		// Answer, with the reply Decide writes. Keep what the reply needs from
		// the request on the stack, make the frame 60 bytes long, write the reply
		// over it; where that fails, dropSendFailed.
		asm.LoadMem(asm.R1, asm.R7, offSHA, asm.Word),
		asm.StoreMem(asm.RFP, -8, asm.R1, asm.Word),
		asm.LoadMem(asm.R1, asm.R7, offSHA+4, asm.Half),
		asm.StoreMem(asm.RFP, -12, asm.R1, asm.Word),
		asm.LoadMem(asm.R1, asm.R7, offSPA, asm.Word),
		asm.StoreMem(asm.RFP, -16, asm.R1, asm.Word),
		asm.LoadMem(asm.R1, asm.R7, offTPA, asm.Word),
		asm.StoreMem(asm.RFP, -20, asm.R1, asm.Word),
		// bpf_skb_change_tail(skb, 60, 0)
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, ReplyLen),
		asm.Mov.Imm(asm.R3, 0),
		asm.FnSkbChangeTail.Call(),
		asm.JNE.Imm(asm.R0, 0, "sendFailed"),
	)
	insns = append(insns, loadPointers()...)
	insns = append(insns,
		asm.Mov.Reg(asm.R1, asm.R7),
		asm.Add.Imm(asm.R1, ReplyLen),
		asm.JGT.Reg(asm.R1, asm.R8, "sendFailed"),
		asm.LoadMem(asm.R1, asm.RFP, -8, asm.Word),
		asm.LoadMem(asm.R2, asm.RFP, -12, asm.Word),
		asm.StoreMem(asm.R7, offEthDst, asm.R1, asm.Word),
		asm.StoreMem(asm.R7, offEthDst+4, asm.R2, asm.Half),
		asm.StoreMem(asm.R7, offTHA, asm.R1, asm.Word),
		asm.StoreMem(asm.R7, offTHA+4, asm.R2, asm.Half),
		asm.StoreImm(asm.R7, offEthSrc, int64(macHi), asm.Word),
		asm.StoreImm(asm.R7, offEthSrc+4, int64(macLo), asm.Half),
		asm.StoreImm(asm.R7, offSHA, int64(macHi), asm.Word),
		asm.StoreImm(asm.R7, offSHA+4, int64(macLo), asm.Half),
		asm.StoreImm(asm.R7, offOp, int64(be16(opReply)), asm.Half),
		asm.LoadMem(asm.R1, asm.RFP, -16, asm.Word),
		asm.StoreMem(asm.R7, offTPA, asm.R1, asm.Word),
		asm.LoadMem(asm.R1, asm.RFP, -20, asm.Word),
		asm.StoreMem(asm.R7, offSPA, asm.R1, asm.Word),
		// The padding, bytes 42 to 59.
		asm.StoreImm(asm.R7, arpEnd, 0, asm.Half),
	)
	for off := arpEnd + 2; off < ReplyLen; off += 4 {
		insns = append(insns, asm.StoreImm(asm.R7, int16(off), 0, asm.Word))
	}
	insns = append(insns, count(slotRequests)...)
	insns = append(insns, count(slotReplies)...)
	insns = append(insns,
		// bpf_redirect(skb->ifindex, 0): out of the interface it came in on.
		asm.LoadMem(asm.R1, asm.R6, skbIfindex, asm.Word),
		asm.Mov.Imm(asm.R2, 0),
		asm.FnRedirect.Call(),
		asm.Return(),
	)
	insns = append(insns, drop("notEthernetV4", DropNotEthernetV4)...)
	insns = append(insns, drop("malformed", DropMalformed)...)
	insns = append(insns, drop("ownFrame", DropOwnFrame)...)
	insns = append(insns, drop("notForUs", DropNotForUs)...)
	insns = append(insns, drop("badSender", DropBadSender)...)
	insns = append(insns, drop("probe", DropProbe)...)
	insns = append(insns, drop("announcement", DropAnnouncement)...)
	insns = append(insns, drop("notOwned", DropNotOwned)...)
	insns = append(insns, drop("sendFailed", dropSendFailed)...)
	insns = append(insns,
		asm.Mov.Imm(asm.R0, tcxNext).WithSymbol("next"),
		asm.Return(),
	)
	return insns
}

// kernelPath is the loaded program with its maps; attached once link is set.
type kernelPath struct {
	prog     *ebpf.Program
	owned    *ebpf.Map
	counters *ebpf.Map
	link     link.Link
}

// loadKernelPath creates the maps and loads the program for interface MAC ours;
// it attaches nothing.
func loadKernelPath(ours net.HardwareAddr) (*kernelPath, error) {
	if len(ours) != macLen {
		return nil, fmt.Errorf("hardware address %v is not Ethernet", ours)
	}
	k := &kernelPath{}
	var err error
	if k.owned, err = ebpf.NewMap(&ebpf.MapSpec{Name: "juneau_arp_own", Type: ebpf.Hash, KeySize: ipv4Len, ValueSize: 1,
		MaxEntries: maxKernelAddresses, Flags: 1 /* BPF_F_NO_PREALLOC: memory grows with the addresses */}); err != nil {
		return nil, fmt.Errorf("owned-address map: %w", err)
	}
	if k.counters, err = ebpf.NewMap(&ebpf.MapSpec{Name: "juneau_arp_cnt", Type: ebpf.PerCPUArray, KeySize: 4,
		ValueSize: uint32(8 * nSlots), MaxEntries: 1}); err != nil {
		k.close()
		return nil, fmt.Errorf("counter map: %w", err)
	}
	if k.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{Name: "juneau_arp", Type: ebpf.SchedCLS, License: "Apache-2.0",
		Instructions: program(ours, k.owned, k.counters)}); err != nil {
		k.close()
		return nil, fmt.Errorf("load program: %w", err)
	}
	return k, nil
}

// attach links the program to ifindex's TCX ingress, first in line: another
// program there (a CNI's, say) that ends the chain with TCX_PASS must not keep
// requests from it, and it passes on everything it does not answer. The link
// belongs to this process: it is gone when the process is, and the kernel
// answers nothing more.
func (k *kernelPath) attach(ifindex int) error {
	l, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: k.prog, Attach: ebpf.AttachTCXIngress, Anchor: link.Head()})
	if err != nil {
		return fmt.Errorf("attach TCX ingress program: %w", err)
	}
	k.link = l
	return nil
}

// set makes the owned-address map hold add and not del. It goes through all of
// them and reports the first failure with the number of failures.
func (k *kernelPath) set(add, del [][4]byte) error {
	var first error
	failed := 0
	fail := func(err error) {
		if first == nil {
			first = err
		}
		failed++
	}
	for _, a := range del {
		if err := k.owned.Delete(a); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			fail(fmt.Errorf("delete %v: %w", netip.AddrFrom4(a), err))
		}
	}
	one := uint8(1)
	for _, a := range add {
		if err := k.owned.Put(a, one); err != nil {
			fail(fmt.Errorf("add %v: %w", netip.AddrFrom4(a), err))
		}
	}
	if failed > 1 {
		return fmt.Errorf("%w (and %d more failures)", first, failed-1)
	}
	return first
}

// counts sums the per-CPU counters.
func (k *kernelPath) counts() ([nSlots]uint64, error) {
	var sum [nSlots]uint64
	var per [][nSlots]uint64
	if err := k.counters.Lookup(uint32(0), &per); err != nil {
		return sum, err
	}
	for _, c := range per {
		for i := range sum {
			sum[i] += c[i]
		}
	}
	return sum, nil
}

func (k *kernelPath) close() {
	if k.link != nil {
		_ = k.link.Close()
	}
	if k.prog != nil {
		_ = k.prog.Close()
	}
	if k.counters != nil {
		_ = k.counters.Close()
	}
	if k.owned != nil {
		_ = k.owned.Close()
	}
}
