package arp

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/test/netns"
)

// helperEnv makes the test binary a stand-in for the agent (TestMain): a
// process that answers for the address in the variable from the kernel path on
// ext0 of the namespace it runs in, until it is killed.
const helperEnv = "JUNEAU_ARP_KERNEL_HELPER"

// helperReady is what the stand-in prints once it answers, followed by the path.
const helperReady = "answering from the path "

func TestMain(m *testing.M) {
	if addr := os.Getenv(helperEnv); addr != "" {
		os.Exit(runHelper(addr))
	}
	os.Exit(m.Run())
}

func runHelper(addr string) int {
	r := NewResponder("ext0")
	r.SetAddresses([]netip.Addr{netip.MustParseAddr(addr)})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	go func() { _ = r.Run(ctx) }()
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return r.Path() != "", nil }); err != nil {
		fmt.Fprintln(os.Stderr, "the responder did not start")
		return 1
	}
	fmt.Println(helperReady + r.Path())
	<-ctx.Done()
	return 0
}

// arpExchange counts, on the client's bridge port, the requests the client
// sent for ip and the replies it got for it.
func (l *lan) arpExchange(ip string) (requests, replies int) {
	for _, f := range l.captures["pcli"].Frames() {
		a, ok := netns.ParseARP(f.Data)
		switch {
		case !ok:
		case a.Op == 1 && a.TargetIP.String() == ip && !a.Gratuitous():
			requests++
		case a.Op == 2 && a.SenderIP.String() == ip:
			replies++
		}
	}
	return requests, replies
}

// sendFrames sends raw Ethernet frames from the client's dev.
func (l *lan) sendFrames(t *testing.T, dev string, frames ...[]byte) {
	t.Helper()
	l.client.MustDo(func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		to := &unix.SockaddrLinklayer{Ifindex: ifi.Index, Protocol: htons(etherTypeARP), Halen: macLen}
		for _, f := range frames {
			copy(to.Addr[:], f[:macLen])
			if err := unix.Sendto(fd, f, 0, to); err != nil {
				return err
			}
		}
		return nil
	})
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// tcxPrograms lists the TCX ingress programs on ext0 of ns.
func tcxPrograms(t *testing.T, ns *netns.NS) int {
	t.Helper()
	var n int
	ns.MustDo(func() error {
		ifi, err := net.InterfaceByName("ext0")
		if err != nil {
			return err
		}
		res, err := link.QueryPrograms(link.QueryOptions{Target: ifi.Index, Attach: ebpf.AttachTCXIngress})
		if err != nil {
			return err
		}
		n = len(res.Programs)
		return nil
	})
	return n
}

// TestKernelPathOnTheWire: with the kernel path, a request for an owned address
// gets exactly one reply, from the kernel (the socket path answers nothing);
// what is not to be answered is not; address changes take effect; gratuitous
// ARP still goes out from user space.
func TestKernelPathOnTheWire(t *testing.T) {
	l := newLAN(t)
	r1 := startResponder(t, l.node1, eipA)
	mac1 := l.node1.MAC("ext0")
	if n := tcxPrograms(t, l.node1); n != 1 {
		t.Fatalf("%d TCX ingress programs on node1's ext0, want 1", n)
	}

	t.Run("one reply per request, from the kernel", func(t *testing.T) {
		if macs := l.arpingAnswered(t, eipA); !allEqual(macs, mac1) {
			t.Fatalf("%s answered by %v, want node1 %v", eipA, macs, mac1)
		}
		var requests, replies int
		if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true,
			func(context.Context) (bool, error) {
				requests, replies = l.arpExchange(eipA)
				return requests > 0 && replies >= requests, nil
			}); err != nil {
			t.Fatalf("the client sent %d requests for %s and got %d replies", requests, eipA, replies)
		}
		if k := r1.kernelCounts(); k[slotReplies] == 0 || r1.core.Replies() != 0 {
			t.Errorf("replies: %d from the kernel, %d from the socket; want all from the kernel", k[slotReplies], r1.core.Replies())
		}
		if r1.Replies() < uint64(requests) || r1.Requests() < r1.Replies() {
			t.Errorf("counters: %d requests, %d replies for %d requests sent", r1.Requests(), r1.Replies(), requests)
		}
	})

	t.Run("not owned, probe, announcement: no reply, counted", func(t *testing.T) {
		before := r1.Drops()
		if macs := l.arping(t, eipB); len(macs) != 0 {
			t.Errorf("%s (not owned) answered by %v", eipB, macs)
		}
		// Duplicate address detection (a probe, sender IP 0.0.0.0) and an
		// announcement, sent as raw frames from the client.
		_, repliesBefore := l.arpExchange(eipA)
		cmac, zero := l.client.MAC("eth0"), net.HardwareAddr{0, 0, 0, 0, 0, 0}
		a := netip.MustParseAddr(eipA)
		l.sendFrames(t, "eth0",
			frame(t, ethernet.Broadcast, cmac, arp.OperationRequest, cmac, netip.IPv4Unspecified(), zero, a),
			frame(t, ethernet.Broadcast, cmac, arp.OperationRequest, cmac, a, zero, a))
		if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true,
			func(context.Context) (bool, error) {
				d := r1.Drops()
				return d["probe"] > before["probe"] && d["announcement"] > before["announcement"], nil
			}); err != nil {
			t.Errorf("probe and announcement not counted: %v", r1.Drops())
		}
		if _, replies := l.arpExchange(eipA); replies != repliesBefore {
			t.Errorf("%d replies for %s to a probe or an announcement", replies-repliesBefore, eipA)
		}
		after := r1.Drops()
		if after["not_owned"] <= before["not_owned"] || after["probe"] <= before["probe"] {
			t.Errorf("drops before %v, after %v: want not_owned and probe counted", before, after)
		}
	})

	t.Run("address changes take effect", func(t *testing.T) {
		r1.SetAddresses([]netip.Addr{netip.MustParseAddr(eipB)})
		if macs := l.arpingAnswered(t, eipB); !allEqual(macs, mac1) {
			t.Errorf("%s answered by %v after it was added, want node1 %v", eipB, macs, mac1)
		}
		if macs := l.arping(t, eipA); len(macs) != 0 {
			t.Errorf("%s answered by %v after it was released", eipA, macs)
		}
	})

	t.Run("gratuitous ARP from user space", func(t *testing.T) {
		c := netip.MustParseAddr("10.225.51.7")
		r1.SetGratuitous([]netip.Addr{c})
		r1.SetAddresses([]netip.Addr{netip.MustParseAddr(eipB), c})
		if _, err := l.captures["pcli"].WaitFor(10*time.Second, func(f netns.Frame) bool {
			a, ok := netns.ParseARP(f.Data)
			return ok && a.Gratuitous() && a.Op == 2 && a.SenderIP == c && bytes.Equal(a.SenderMAC, mac1)
		}); err != nil {
			t.Errorf("no gratuitous reply for %s from node1: %v", c, err)
		}
	})

	// Stopping the responder detaches the program.
	l.captures["pcli"].Stop()
	requests, replies := l.arpExchange(eipA)
	if replies > requests {
		t.Errorf("%d replies for %d requests for %s: a request was answered twice", replies, requests, eipA)
	}
}

// TestKernelPathDiesWithTheProcess: the program's link belongs to the process
// that attached it. Once that process is killed (no chance to clean up), the
// kernel answers nothing more, as a dead raw socket would not.
func TestKernelPathDiesWithTheProcess(t *testing.T) {
	l := newLAN(t)
	startResponder(t, l.node2, eipB) // the positive control: a live responder on the same LAN
	mac1, mac2 := l.node1.MAC("ext0"), l.node2.MAC("ext0")
	t.Setenv(helperEnv, eipA)
	agent := l.node1.Start(os.Args[0], "-test.run=^$")
	if err := agent.WaitForOutput(helperReady+PathKernel, 30*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, agent.Output())
	}
	if macs := l.arpingAnswered(t, eipA); !allEqual(macs, mac1) {
		t.Fatalf("%s answered by %v while the process lives, want node1 %v", eipA, macs, mac1)
	}

	if err := agent.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = agent.Wait(10 * time.Second)
	if !agent.Exited() {
		t.Fatal("the process did not die")
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return tcxPrograms(t, l.node1) == 0, nil }); err != nil {
		t.Fatalf("the program is still attached to node1's ext0 after its process died")
	}
	if macs := l.arping(t, eipA); len(macs) != 0 {
		t.Errorf("%s still answered by %v after the process died", eipA, macs)
	}
	if macs := l.arpingAnswered(t, eipB); !allEqual(macs, mac2) {
		t.Errorf("%s answered by %v, want node2 %v (the LAN works)", eipB, macs, mac2)
	}
}

// TestSocketPathFallback: where the kernel path cannot be attached (here:
// turned off), the raw socket answers, exactly once per request.
func TestSocketPathFallback(t *testing.T) {
	l := newLAN(t)
	r1 := startResponderWith(t, l.node1, []Option{WithoutKernelPath()}, eipA)
	mac1 := l.node1.MAC("ext0")
	if n := tcxPrograms(t, l.node1); n != 0 {
		t.Errorf("%d TCX ingress programs on node1's ext0 without the kernel path", n)
	}
	if macs := l.arpingAnswered(t, eipA); !allEqual(macs, mac1) {
		t.Fatalf("%s answered by %v, want node1 %v", eipA, macs, mac1)
	}
	if r1.core.Replies() == 0 || r1.kernelCounts() != [nSlots]uint64{} {
		t.Errorf("replies: %d from the socket, kernel counters %v; want all from the socket", r1.core.Replies(), r1.kernelCounts())
	}
	if macs := l.arping(t, eipB); len(macs) != 0 {
		t.Errorf("%s (not owned) answered by %v", eipB, macs)
	}
	l.captures["pcli"].Stop()
	if requests, replies := l.arpExchange(eipA); replies > requests || replies == 0 {
		t.Errorf("%d replies for %d requests for %s", replies, requests, eipA)
	}
}

// TestKernelPathFullMapFallsBack: more addresses than the kernel path's map
// holds. From the start, the kernel path does not attach and the socket path
// answers; growing past it later, the responder hands over to the socket path,
// which answers for every address.
func TestKernelPathFullMapFallsBack(t *testing.T) {
	many := func(extra ...string) []netip.Addr {
		out := make([]netip.Addr, 0, maxKernelAddresses+1+len(extra))
		for i := range maxKernelAddresses + 1 {
			out = append(out, netip.AddrFrom4([4]byte{10, byte(226 + i>>16), byte(i >> 8), byte(i)}))
		}
		for _, e := range extra {
			out = append(out, netip.MustParseAddr(e))
		}
		return out
	}
	l := newLAN(t)
	mac1, mac2 := l.node1.MAC("ext0"), l.node2.MAC("ext0")

	r1 := NewResponder("ext0")
	r1.SetAddresses(many(eipA))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.node1.Do(func() error { return r1.Run(ctx) }) }()
	t.Cleanup(func() { cancel(); <-done })
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return r1.Path() == PathSocket, nil }); err != nil {
		t.Fatalf("with %d addresses node1 answers from %q, want %q", maxKernelAddresses+2, r1.Path(), PathSocket)
	}
	if macs := l.arpingAnswered(t, eipA); !allEqual(macs, mac1) {
		t.Errorf("%s answered by %v, want node1 %v", eipA, macs, mac1)
	}

	r2 := startResponder(t, l.node2, eipB)
	r2.SetAddresses(many(eipB))
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return r2.Path() == PathSocket, nil }); err != nil {
		t.Fatalf("grown past the map, node2 answers from %q, want %q", r2.Path(), PathSocket)
	}
	if n := tcxPrograms(t, l.node2); n != 0 {
		t.Errorf("%d TCX programs left on node2's ext0", n)
	}
	if macs := l.arpingAnswered(t, eipB); !allEqual(macs, mac2) {
		t.Errorf("%s answered by %v, want node2 %v", eipB, macs, mac2)
	}
}

// TestKernelPathWithoutCapBPF: an agent without CAP_BPF (and CAP_SYS_ADMIN)
// cannot load the program; it says why, once, and answers from its socket.
func TestKernelPathWithoutCapBPF(t *testing.T) {
	l := newLAN(t)
	mac1 := l.node1.MAC("ext0")
	t.Setenv(helperEnv, eipA)
	agent := l.node1.Start("setpriv", "--bounding-set=-bpf,-sys_admin", "--", os.Args[0], "-test.run=^$")
	if err := agent.WaitForOutput(helperReady+PathSocket, 30*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, agent.Output())
	}
	out := agent.Output()
	if n := strings.Count(out, "Cannot answer ARP in the kernel"); n != 1 || !strings.Contains(out, "operation not permitted") {
		t.Errorf("want the reason logged once, with EPERM; the agent logged:\n%s", out)
	}
	if n := tcxPrograms(t, l.node1); n != 0 {
		t.Errorf("%d TCX ingress programs on node1's ext0", n)
	}
	if macs := l.arpingAnswered(t, eipA); !allEqual(macs, mac1) {
		t.Errorf("%s answered by %v, want node1 %v from its socket", eipA, macs, mac1)
	}
}

// TestKernelPathRunsFirst: another TCX ingress program on the interface that
// ends the chain (TCX_PASS, as a CNI's program may for ARP) does not keep
// requests from the kernel path, which puts itself first; it still sees the
// frames the kernel path passes on.
func TestKernelPathRunsFirst(t *testing.T) {
	l := newLAN(t)
	other, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "Apache-2.0",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var otherLink link.Link
	l.node1.MustDo(func() error {
		ifi, err := net.InterfaceByName("ext0")
		if err != nil {
			return err
		}
		otherLink, err = link.AttachTCX(link.TCXOptions{Interface: ifi.Index, Program: other, Attach: ebpf.AttachTCXIngress})
		return err
	})
	defer otherLink.Close()

	r1 := startResponder(t, l.node1, eipA)
	if n := tcxPrograms(t, l.node1); n != 2 {
		t.Fatalf("%d TCX ingress programs on node1's ext0, want 2", n)
	}
	if macs := l.arpingAnswered(t, eipA); !allEqual(macs, l.node1.MAC("ext0")) {
		t.Errorf("%s answered by %v, want node1", eipA, macs)
	}
	if k := r1.kernelCounts(); k[slotReplies] == 0 {
		t.Errorf("no reply from the kernel path: %v", k)
	}
	// The node's own address: the kernel's ARP, behind both programs, answers.
	if macs := l.arpingAnswered(t, node1IP); !allEqual(macs, l.node1.MAC("ext0")) {
		t.Errorf("%s (node1's own) answered by %v", node1IP, macs)
	}
}
