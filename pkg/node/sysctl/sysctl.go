// Package sysctl writes kernel parameters under /proc/sys for the node agent.
//
// /proc/sys/net is resolved against the network namespace of the thread that
// opens the file, so every read and write here happens on a locked OS thread:
// a caller that has switched its (locked) thread into another namespace writes
// that namespace's values, and no other caller is affected.
package sysctl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// DefaultRoot is where the kernel exposes its parameters.
const DefaultRoot = "/proc/sys"

// Setting is one parameter and its value. Key is relative to the root and uses
// slashes, so interface names containing dots (VLANs) stay intact.
type Setting struct {
	Key   string
	Value string
	// OnlyIf, when set, writes Value only while the key holds OnlyIf.
	OnlyIf string
	// Optional settings are skipped where the kernel lacks the key (IPv6
	// disabled).
	Optional bool
}

func (s Setting) String() string {
	if s.OnlyIf != "" {
		return s.Key + "=" + s.Value + " (if " + s.OnlyIf + ")"
	}
	return s.Key + "=" + s.Value
}

// Writer reads and writes parameters under Root.
type Writer struct {
	// Root is DefaultRoot in production; tests point it at a directory.
	Root string
}

// New returns a Writer for /proc/sys.
func New() *Writer { return &Writer{Root: DefaultRoot} }

// Get returns the current value of key, without the trailing newline.
func (w *Writer) Get(key string) (string, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b, err := os.ReadFile(w.path(key))
	if err != nil {
		return "", fmt.Errorf("read sysctl %s: %w", key, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Set writes value to key unless it already holds it.
func (w *Writer) Set(key, value string) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if cur, err := os.ReadFile(w.path(key)); err == nil && strings.TrimSpace(string(cur)) == value {
		return nil
	}
	if err := os.WriteFile(w.path(key), []byte(value), 0o644); err != nil {
		return fmt.Errorf("write sysctl %s=%s: %w", key, value, err)
	}
	return nil
}

// Apply writes every setting in order and stops at the first error.
func (w *Writer) Apply(settings []Setting) error {
	for _, s := range settings {
		if s.Optional || s.OnlyIf != "" {
			cur, err := w.Get(s.Key)
			if errors.Is(err, fs.ErrNotExist) && s.Optional {
				continue
			}
			if err != nil {
				return err
			}
			if s.OnlyIf != "" && cur != s.OnlyIf {
				continue
			}
		}
		if err := w.Set(s.Key, s.Value); err != nil {
			return err
		}
	}
	return nil
}

func (w *Writer) path(key string) string {
	return filepath.Join(w.Root, filepath.Clean("/"+key))
}

// ExternalInterface returns the settings the NAT datapath needs for the
// interface towards the external network:
//   - ip_forward=1: translated traffic is routed between that interface and
//     the Pods;
//   - arp_ignore=1: the kernel answers ARP only for addresses configured on
//     the interface the request came in on, never for an ElasticIP (those
//     are no local address anywhere on the node; the ARP replier answers);
//   - arp_announce=2: ARP requests the node sends use the interface's own
//     address as sender, never an address from another interface;
//   - proxy_arp=0: the kernel never answers for addresses it merely routes,
//     such as ElasticIPs whose traffic it forwards;
//
// and for IPv6, where the kernel has it (ExternalInterfaceFor leaves these out on
// a Node whose external interface has no global IPv6 address):
//   - forwarding=1 (all interfaces): IPv6 ElasticIPs are routed like IPv4
//     ones;
//   - proxy_ndp=0: the kernel never answers neighbor solicitations for
//     addresses it merely routes (pkg/node/ndp does for ElasticIPs);
//   - accept_ra=2 where it is 1: a forwarding interface ignores router
//     advertisements at accept_ra=1, so a Node that configures its external
//     interface from them would lose its IPv6 default route; 2 keeps taking
//     them.
func ExternalInterface(iface string) []Setting {
	conf := func(name string) string { return "net/ipv4/conf/" + iface + "/" + name }
	conf6 := func(name string) string { return "net/ipv6/conf/" + iface + "/" + name }
	return []Setting{
		{Key: "net/ipv4/ip_forward", Value: "1"},
		{Key: conf("arp_ignore"), Value: "1"},
		{Key: conf("arp_announce"), Value: "2"},
		{Key: conf("proxy_arp"), Value: "0"},
		{Key: conf6("accept_ra"), Value: "2", OnlyIf: "1", Optional: true},
		{Key: "net/ipv6/conf/all/forwarding", Value: "1", Optional: true},
		{Key: conf6("proxy_ndp"), Value: "0", Optional: true},
	}
}

// ExternalInterfaceFor is ExternalInterface without the IPv6 settings unless ipv6 is
// set: a Node with no IPv6 on its external network is not made an IPv6 router
// (forwarding=1 applies to every interface, makes those at accept_ra=1 ignore router
// advertisements, and adds the subnet-router anycast addresses), so uninstalling
// juneau leaves its IPv6 as it was.
func ExternalInterfaceFor(iface string, ipv6 bool) []Setting {
	all := ExternalInterface(iface)
	if ipv6 {
		return all
	}
	var v4 []Setting
	for _, s := range all {
		if !strings.HasPrefix(s.Key, "net/ipv6/") {
			v4 = append(v4, s)
		}
	}
	return v4
}
