package netns

import (
	"bytes"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/loutres/juneau/test/require"
)

func TestNamespaceLifecycle(t *testing.T) {
	require.Root(t)
	var path string
	t.Run("create", func(t *testing.T) {
		n := New(t, "life")
		path = n.Path()
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("namespace mount missing: %v", err)
		}
		if !strings.HasPrefix(n.Name, "jnlife-") {
			t.Errorf("name %q lacks its prefix", n.Name)
		}
	})
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("namespace %s still present after the test ended (err=%v)", path, err)
	}
}

func TestVethTrafficAndCapture(t *testing.T) {
	require.Root(t)
	a, b := New(t, "a"), New(t, "b")
	Veth(a, "va", b, "vb")
	a.Addr("va", "10.225.51.1/24")
	b.Addr("vb", "10.225.51.2/24")
	a.DisableOffload("va")
	b.DisableOffload("vb")
	capture := b.Capture("vb")

	// A listener opened inside b stays in b; a dial made inside a leaves from a.
	var ln net.Listener
	b.MustDo(func() (err error) {
		ln, err = net.Listen("tcp4", "10.225.51.2:0")
		return err
	})
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		defer c.Close()
		data, _ := io.ReadAll(c)
		got <- c.RemoteAddr().(*net.TCPAddr).IP.String() + " " + string(data)
	}()
	a.MustDo(func() error {
		c, err := net.DialTimeout("tcp4", ln.Addr().String(), 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("hello"))
		return err
	})
	select {
	case s := <-got:
		if s != "10.225.51.1 hello" {
			t.Fatalf("server got %q", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no connection")
	}

	out := a.MustRun("ping", "-c", "1", "-W", "2", "10.225.51.2")
	if !strings.Contains(out, "1 received") {
		t.Fatalf("ping: %s", out)
	}
	f, err := capture.WaitFor(5*time.Second, func(f Frame) bool {
		p, ok := ParseFrame(f.Data)
		return ok && p.Proto == ProtoICMP && !f.Outgoing && p.Src == netip.MustParseAddr("10.225.51.1")
	})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := ParseFrame(f.Data)
	if ok, checked := p.L4ChecksumOK(); !ok || !checked || !p.HeaderChecksumOK {
		t.Errorf("captured echo request has bad checksums: ip=%v icmp=%v/%v", p.HeaderChecksumOK, ok, checked)
	}
	if mac, ok := a.Neighbour("va", "10.225.51.2"); !ok || !bytes.Equal(mac, b.MAC("vb")) {
		t.Errorf("neighbour of 10.225.51.2 = %v (usable %v), want %v", mac, ok, b.MAC("vb"))
	}
}

func TestDoRestoresNamespace(t *testing.T) {
	require.Root(t)
	n := New(t, "do")
	n.Addr("lo", "10.225.51.9/32")
	seen := func() bool {
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			if strings.HasPrefix(a.String(), "10.225.51.9/") {
				return true
			}
		}
		return false
	}
	var inside bool
	n.MustDo(func() error { inside = seen(); return nil })
	if !inside {
		t.Error("address added in the namespace not visible inside Do")
	}
	if seen() {
		t.Error("namespace address visible outside Do")
	}
}

func TestBridgeAndProcess(t *testing.T) {
	require.Root(t)
	lan, x, y := New(t, "lan"), New(t, "x"), New(t, "y")
	lan.Bridge("br0")
	Veth(lan, "px", x, "eth0")
	Veth(lan, "py", y, "eth0")
	lan.SetMaster("px", "br0")
	lan.SetMaster("py", "br0")
	x.Addr("eth0", "10.225.51.10/24")
	y.Addr("eth0", "10.225.51.11/24")
	p := x.Start("ping", "-c", "3", "-i", "0.2", "-W", "2", "10.225.51.11")
	if err := p.Wait(30 * time.Second); err != nil {
		t.Fatalf("ping across the bridge: %v\n%s", err, p.Output())
	}
	if !strings.Contains(p.Output(), "3 received") {
		t.Fatalf("ping output: %s", p.Output())
	}
	// New namespaces copy the host's ip_forward, which is on on most container hosts:
	// start y from a known value rather than the host's.
	y.Sysctl("net/ipv4/ip_forward", "0")
	x.Sysctl("net/ipv4/ip_forward", "1")
	if got := x.ReadSysctl("net/ipv4/ip_forward"); got != "1" {
		t.Errorf("ip_forward in x = %q", got)
	}
	if got := y.ReadSysctl("net/ipv4/ip_forward"); got != "0" {
		t.Errorf("ip_forward leaked into y: %q", got)
	}
}
