// Package sysctl writes kernel parameters under /proc/sys for the node agent.
//
// /proc/sys/net is resolved against the network namespace of the thread that
// opens the file, so every read and write here happens on a locked OS thread:
// a caller that has switched its (locked) thread into another namespace writes
// that namespace's values, and no other caller is affected.
package sysctl

import (
	"fmt"
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
}

func (s Setting) String() string { return s.Key + "=" + s.Value }

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
//     such as ElasticIPs whose traffic it forwards.
func ExternalInterface(iface string) []Setting {
	conf := func(name string) string { return "net/ipv4/conf/" + iface + "/" + name }
	return []Setting{
		{Key: "net/ipv4/ip_forward", Value: "1"},
		{Key: conf("arp_ignore"), Value: "1"},
		{Key: conf("arp_announce"), Value: "2"},
		{Key: conf("proxy_arp"), Value: "0"},
	}
}
