package arp

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"

	"github.com/loutres/juneau/test/require"
)

// kernelOwns is the owned set of the differential tests: 10.225.51.x for odd x
// (as fuzzOwns) and nothing else, so that it fits in the program's map.
func kernelOwned() []netip.Addr {
	var out []netip.Addr
	for x := 1; x < 256; x += 2 {
		out = append(out, netip.AddrFrom4([4]byte{10, 225, 51, byte(x)}))
	}
	return out
}

func kernelOwns(a netip.Addr) bool {
	b := a.As4()
	return a.Is4() && b[0] == 10 && b[1] == 225 && b[2] == 51 && b[3]%2 == 1
}

// loadDifferential loads the program for ourMAC owning kernelOwned. It needs
// root (CAP_BPF) but no interface: frames go through BPF_PROG_TEST_RUN.
func loadDifferential(t testing.TB) *kernelPath {
	t.Helper()
	require.Root(t)
	k, err := loadKernelPath(ourMAC)
	if err != nil {
		t.Fatalf("load the kernel path: %v", err)
	}
	t.Cleanup(k.close)
	var add [][4]byte
	for _, a := range kernelOwned() {
		add = append(add, a.As4())
	}
	if err := k.set(add, nil); err != nil {
		t.Fatal(err)
	}
	return k
}

// socketFilterPasses says whether the socket path's filter hands the frame to
// Decide: untagged ARP with operation 1. Only those frames are counted.
func socketFilterPasses(f []byte) bool {
	return len(f) >= offOp+2 && binary.BigEndian.Uint16(f[offEthType:]) == etherTypeARP && binary.BigEndian.Uint16(f[offOp:]) == opRequest
}

// checkSameAsDecide runs in through the loaded program and through Decide and
// fails unless both decide alike: the same reason counted (or nothing counted
// for a frame the socket path never sees, which Decide does not answer), the
// same byte-for-byte reply redirected out of the interface, or the frame passed
// on untouched.
func checkSameAsDecide(t testing.TB, k *kernelPath, in []byte) {
	t.Helper()
	if len(in) < offEthType+2 || len(in) > 1514 {
		return // the kernel delivers no frame shorter than an Ethernet header; Decide reads 60 bytes at most
	}
	if et := binary.BigEndian.Uint16(in[offEthType:]); et == 0x0800 && len(in) < 14+20 || et == 0x86dd && len(in) < 14+40 {
		return // BPF_PROG_TEST_RUN refuses an IP frame without a whole IP header; no ARP anyway
	}
	before, err := k.counts()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, len(in)+256)
	opts := &ebpf.RunOptions{Data: in, DataOut: out}
	ret, err := k.prog.Run(opts)
	if err != nil {
		t.Fatalf("run the program on % x: %v", in, err)
	}
	out = opts.DataOut
	after, err := k.counts()
	if err != nil {
		t.Fatal(err)
	}
	var delta [nSlots]uint64
	for i := range delta {
		delta[i] = after[i] - before[i]
	}

	reply := NewReplyBuffer(ourMAC)
	want := Decide(in, ourMAC, kernelOwns, reply)
	var wantDelta [nSlots]uint64
	if socketFilterPasses(in) {
		switch want {
		case Answer:
			wantDelta[slotReplies] = 1
			wantDelta[slotRequests] = 1
		case DropMalformed, DropNotEthernetV4, DropNotRequest, DropOwnFrame:
			wantDelta[dropSlot(want)] = 1
		default:
			wantDelta[dropSlot(want)] = 1
			wantDelta[slotRequests] = 1
		}
	} else if want == Answer {
		t.Fatalf("Decide answers % x, which the socket filter drops", in)
	}
	if delta != wantDelta {
		t.Fatalf("frame % x: the program counted %v, Decide says %q (want counts %v)", in, delta, want, wantDelta)
	}
	if want == Answer {
		if int32(ret) != tcxRedirect || !bytes.Equal(out, reply) {
			t.Fatalf("frame % x: the program returned %d with\n% x\nDecide answers\n% x", in, int32(ret), out, reply)
		}
		return
	}
	if int32(ret) != tcxNext || !bytes.Equal(out, in) {
		t.Fatalf("frame % x (%q): the program returned %d with % x, want the frame passed on untouched", in, want, int32(ret), out)
	}
}

// fuzzCorpus reads the committed inputs of FuzzDecide.
func fuzzCorpus(t testing.TB) [][]byte {
	t.Helper()
	files, err := filepath.Glob("testdata/fuzz/FuzzDecide/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no FuzzDecide corpus: %v", err)
	}
	var out [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if s, ok := strings.CutPrefix(line, "[]byte("); ok {
				v, err := strconv.Unquote(strings.TrimSuffix(s, ")"))
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				out = append(out, []byte(v))
			}
		}
	}
	return out
}

// kernelTable are frames of every kind Decide tells apart.
func kernelTable(t testing.TB) [][]byte {
	zero := net.HardwareAddr{0, 0, 0, 0, 0, 0}
	owned, other := netip.MustParseAddr("10.225.51.5"), netip.MustParseAddr("10.225.51.6")
	req := frame(t, ethernet.Broadcast, peerMAC, arp.OperationRequest, peerMAC, client, zero, owned)
	ipFrame, _ := (&ethernet.Frame{Destination: ourMAC, Source: peerMAC, EtherType: ethernet.EtherTypeIPv4, Payload: make([]byte, 46)}).MarshalBinary()
	tagged, _ := (&ethernet.Frame{Destination: ethernet.Broadcast, Source: peerMAC, VLAN: &ethernet.VLAN{ID: 10},
		EtherType: ethernet.EtherTypeARP, Payload: req[14:]}).MarshalBinary()
	out := [][]byte{
		req,
		append(bytes.Clone(req), make([]byte, 18)...), // padded to 60 bytes
		append(bytes.Clone(req), bytes.Repeat([]byte{0xee}, 100)...),
		req[:41], req[:22], req[:21], req[:14],
		frame(t, ourMAC, peerMAC, arp.OperationRequest, peerMAC, client, ourMAC, owned),
		frame(t, ethernet.Broadcast, peerMAC, arp.OperationRequest, peerMAC, client, zero, other),
		frame(t, ourMAC, peerMAC, arp.OperationReply, peerMAC, client, ourMAC, owned),
		frame(t, ethernet.Broadcast, peerMAC, arp.OperationRequest, peerMAC, owned, zero, owned),
		frame(t, ethernet.Broadcast, peerMAC, arp.OperationRequest, peerMAC, netip.IPv4Unspecified(), zero, owned),
		frame(t, ethernet.Broadcast, ourMAC, arp.OperationRequest, ourMAC, client, zero, owned),
		frame(t, ethernet.Broadcast, peerMAC, arp.OperationRequest, ourMAC, client, zero, owned),
		frame(t, ethernet.Broadcast, ourMAC, arp.OperationRequest, peerMAC, client, zero, owned),
		frame(t, otherMAC, peerMAC, arp.OperationRequest, peerMAC, client, otherMAC, owned),
		frame(t, ethernet.Broadcast, peerMAC, arp.OperationRequest, net.HardwareAddr{1, 0, 0x5e, 0, 0, 1}, client, zero, owned),
		frame(t, ethernet.Broadcast, peerMAC, arp.OperationRequest, zero, client, zero, owned),
		frame(t, ethernet.Broadcast, peerMAC, arp.OperationRequest, net.HardwareAddr{0, 0, 0, 0, 0, 1}, client, zero, owned),
		frame(t, ethernet.Broadcast, peerMAC, arp.OperationRequest, net.HardwareAddr{0, 0, 0, 1, 0, 0}, client, zero, owned),
		ipFrame, tagged,
	}
	for _, off := range []int{offHWType + 1, offProto, offHWLen, offProtoLen, offOp} {
		b := bytes.Clone(req)
		b[off]++
		out = append(out, b)
	}
	return out
}

// randomFrame starts from a request the program answers and, field by field,
// puts in something else one time in six, so that every check of Decide is
// taken often, alone and together.
func randomFrame(rng *rand.Rand) []byte {
	field := func(valid []byte, others ...[]byte) []byte {
		if rng.IntN(6) != 0 {
			return valid
		}
		return others[rng.IntN(len(others))]
	}
	multicast, zero := []byte{1, 0, 0x5e, 0, 0, 1}, []byte{0, 0, 0, 0, 0, 0}
	randomIP := func() []byte {
		return []byte{byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256))}
	}
	spa := field([]byte{10, 225, 51, 100}, []byte{0, 0, 0, 0}, randomIP())
	tpa := field([]byte{10, 225, 51, byte(2*rng.IntN(128) + 1)}, randomIP(), []byte{10, 225, 51, byte(2 * rng.IntN(128))}, spa)
	f := slices.Concat(
		field(ethernet.Broadcast, ourMAC, otherMAC, multicast, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xfe}, []byte{0xff, 0xff, 0xff, 0xff, 0, 0x01}),
		field(peerMAC, ourMAC, otherMAC),
		field([]byte{0x08, 0x06}, []byte{0x08, 0x00}, []byte{0x81, 0x00}),
		field([]byte{0, 1}, []byte{0, 6}, []byte{1, 1}),
		field([]byte{0x08, 0}, []byte{0x86, 0xdd}),
		field([]byte{6}, []byte{5}),
		field([]byte{4}, []byte{16}),
		field([]byte{0, 1}, []byte{0, 2}, []byte{1, 1}, []byte{0, 3}),
		field(peerMAC, ourMAC, multicast, zero, []byte{0x02, 0, 0, 0, 0x01, 0x01}, []byte{0, 0, 0, 1, 0, 0}),
		spa,
		field(zero, ourMAC, peerMAC),
		tpa,
	)
	switch rng.IntN(6) {
	case 0:
		f = f[:14+rng.IntN(len(f)-13)]
	case 1:
		for range rng.IntN(40) {
			f = append(f, byte(rng.IntN(256)))
		}
	}
	return f
}

func TestKernelDecidesAsDecide(t *testing.T) {
	k := loadDifferential(t)
	t.Run("table", func(t *testing.T) {
		for _, f := range kernelTable(t) {
			checkSameAsDecide(t, k, f)
		}
	})
	t.Run("fuzz corpus", func(t *testing.T) {
		for _, f := range fuzzCorpus(t) {
			checkSameAsDecide(t, k, f)
		}
	})
	t.Run("random", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(16, 5))
		answered := 0
		for range 5000 {
			f := randomFrame(rng)
			checkSameAsDecide(t, k, f)
			if Decide(f, ourMAC, kernelOwns, NewReplyBuffer(ourMAC)) == Answer {
				answered++
			}
		}
		if answered < 50 {
			t.Errorf("only %d of the random frames were answered: the generator misses the answering branch", answered)
		}
	})
	t.Run("set changes", func(t *testing.T) {
		zero := net.HardwareAddr{0, 0, 0, 0, 0, 0}
		eipOdd := netip.MustParseAddr("10.225.51.7")
		req := frame(t, ethernet.Broadcast, peerMAC, arp.OperationRequest, peerMAC, client, zero, eipOdd)
		if err := k.set(nil, [][4]byte{eipOdd.As4()}); err != nil {
			t.Fatal(err)
		}
		if ret, _, err := k.prog.Test(req); err != nil || int32(ret) != tcxNext {
			t.Errorf("after deleting %s the program returned %d (%v), want it passed on", eipOdd, int32(ret), err)
		}
		if err := k.set([][4]byte{eipOdd.As4()}, nil); err != nil {
			t.Fatal(err)
		}
		if ret, _, err := k.prog.Test(req); err != nil || int32(ret) != tcxRedirect {
			t.Errorf("after adding %s back the program returned %d (%v), want an answer", eipOdd, int32(ret), err)
		}
	})
}

// FuzzKernelDecide checks the kernel program against Decide on arbitrary frames
// (BPF_PROG_TEST_RUN; needs root).
func FuzzKernelDecide(f *testing.F) {
	for _, b := range kernelTable(f) {
		f.Add(b)
	}
	k := loadDifferential(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		checkSameAsDecide(t, k, in)
	})
}

// BenchmarkKernelProgram times the program in the kernel (BPF_PROG_TEST_RUN with
// a repeat count) on what crosses the external interface, against a program that
// only returns (the cost of running any program there): an IPv4 packet, which it
// passes on after reading the EtherType, and a request for another address,
// which costs two map lookups. (An answered request cannot be repeated: the first
// run turns the frame into the reply.)
func BenchmarkKernelProgram(b *testing.B) {
	k := loadDifferential(b)
	empty, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "Apache-2.0",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, tcxNext), asm.Return()}})
	if err != nil {
		b.Fatal(err)
	}
	defer empty.Close()
	zero := net.HardwareAddr{0, 0, 0, 0, 0, 0}
	ipFrame, _ := (&ethernet.Frame{Destination: ourMAC, Source: peerMAC, EtherType: ethernet.EtherTypeIPv4, Payload: make([]byte, 46)}).MarshalBinary()
	ipFrame[14] = 0x45 // a valid IPv4 header length
	for _, c := range []struct {
		name  string
		prog  *ebpf.Program
		frame []byte
	}{
		{"empty-program", empty, ipFrame},
		{"ipv4", k.prog, ipFrame},
		{"not-owned", k.prog, frame(b, ethernet.Broadcast, peerMAC, arp.OperationRequest, peerMAC, client, zero, netip.MustParseAddr("10.225.51.6"))},
	} {
		b.Run(c.name, func(b *testing.B) {
			_, per, err := c.prog.Benchmark(c.frame, b.N, b.ResetTimer)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(per.Nanoseconds()), "ns/frame")
		})
	}
}
