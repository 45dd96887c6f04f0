package sysctl

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loutres/juneau/test/netns"
	"github.com/loutres/juneau/test/require"
)

func TestExternalInterfaceSettings(t *testing.T) {
	got := ExternalInterface("eth0.100")
	want := []string{
		"net/ipv4/ip_forward=1",
		"net/ipv4/conf/eth0.100/arp_ignore=1",
		"net/ipv4/conf/eth0.100/arp_announce=2",
		"net/ipv4/conf/eth0.100/proxy_arp=0",
		"net/ipv6/conf/eth0.100/accept_ra=2 (if 1)",
		"net/ipv6/conf/all/forwarding=1",
		"net/ipv6/conf/eth0.100/proxy_ndp=0",
	}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("setting %d = %s, want %s", i, got[i], want[i])
		}
	}
}

func TestWriterOnDirectory(t *testing.T) {
	root := t.TempDir()
	for _, s := range ExternalInterface("eth0.100") {
		p := filepath.Join(root, s.Key)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("7\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w := &Writer{Root: root}
	if err := w.Apply(ExternalInterface("eth0.100")); err != nil {
		t.Fatal(err)
	}
	for _, s := range ExternalInterface("eth0.100") {
		want := s.Value
		if s.OnlyIf != "" {
			want = "7" // set only from OnlyIf
		}
		got, err := w.Get(s.Key)
		if err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", s.Key, got, err, want)
		}
	}
	// accept_ra goes from 1 to 2, and IPv6 keys the kernel lacks are skipped.
	if err := w.Set("net/ipv6/conf/eth0.100/accept_ra", "1"); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(root, "net/ipv6/conf/all")); err != nil {
		t.Fatal(err)
	}
	if err := w.Apply(ExternalInterface("eth0.100")); err != nil {
		t.Fatal(err)
	}
	if got, _ := w.Get("net/ipv6/conf/eth0.100/accept_ra"); got != "2" {
		t.Errorf("accept_ra = %q after 1, want 2", got)
	}
	// The key cannot escape the root.
	if p := w.path("../../etc/passwd"); !strings.HasPrefix(p, root) {
		t.Errorf("path escapes root: %s", p)
	}
	if err := w.Set("net/ipv4/conf/missing/arp_ignore", "1"); err == nil {
		t.Error("writing a missing key succeeded")
	}
}

// TestPerNamespace proves a write lands in the namespace of the calling
// thread and nowhere else.
func TestPerNamespace(t *testing.T) {
	require.Root(t)
	a, b := netns.New(t, "sysa"), netns.New(t, "sysb")
	netns.Veth(a, "ext0", b, "ext0")
	// New namespaces copy some of the host's IPv4 settings (ip_forward is on on most
	// container hosts), so b starts from values set here rather than the host's.
	b.Sysctl("net/ipv4/conf/ext0/arp_ignore", "0")
	b.Sysctl("net/ipv4/ip_forward", "0")
	a.MustDo(func() error { return New().Apply(ExternalInterface("ext0")) })
	for _, s := range ExternalInterface("ext0") {
		if got := a.ReadSysctl(s.Key); got != s.Value && s.OnlyIf == "" {
			t.Errorf("in a: %s = %q, want %q", s.Key, got, s.Value)
		}
	}
	if got := b.ReadSysctl("net/ipv4/conf/ext0/arp_ignore"); got != "0" {
		t.Errorf("arp_ignore leaked into b: %q", got)
	}
	if got := b.ReadSysctl("net/ipv4/ip_forward"); got != "0" {
		t.Errorf("ip_forward leaked into b: %q", got)
	}
}

// TestExternalInterfaceFor: without IPv6 on the external network no IPv6 key is set;
// with it, all of ExternalInterface.
func TestExternalInterfaceFor(t *testing.T) {
	for _, s := range ExternalInterfaceFor("eth0", false) {
		if strings.HasPrefix(s.Key, "net/ipv6/") {
			t.Errorf("IPv6 setting %s without IPv6", s)
		}
	}
	if got, all := len(ExternalInterfaceFor("eth0", false)), len(ExternalInterface("eth0")); got != 4 || all != 7 {
		t.Errorf("%d settings without IPv6, %d in all; want 4 and 7", got, all)
	}
	if got, want := fmt.Sprint(ExternalInterfaceFor("eth0", true)), fmt.Sprint(ExternalInterface("eth0")); got != want {
		t.Errorf("with IPv6: %s, want %s", got, want)
	}
}
