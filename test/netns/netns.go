// Package netns builds throw-away network topologies for tests: named network
// namespaces, veth pairs, bridges, addresses, routes and neighbours, running Go
// code or commands inside a namespace, and capturing frames on an interface.
//
// Everything a test creates is removed by t.Cleanup, also when the test fails.
// Names carry a random suffix so that test packages running in parallel never
// clash. Traffic between these namespaces never leaves the machine.
package netns

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/loutres/juneau/test/require"
)

// NS is a network namespace owned by one test.
type NS struct {
	// Name identifies the namespace in messages; it is also the name of its file.
	Name string

	t      testing.TB
	path   string
	handle netns.NsHandle
	nl     *netlink.Handle

	destroyOnce sync.Once
}

// New creates a fresh network namespace whose name starts with prefix, brings
// its loopback up and removes it (with everything inside) when the test ends.
// It needs root.
//
// The namespace is kept alive by a bind mount on a file in the test's own
// temporary directory, never under /run/netns: another program's `ip netns add`
// may bind-mount /run/netns over itself when it is not yet a mount point, which
// hides (and makes undeletable) every namespace mounted there before.
func New(t testing.TB, prefix string) *NS {
	t.Helper()
	require.Root(t)
	name := UniqueName("jn" + prefix)
	n := &NS{Name: name, t: t, path: filepath.Join(t.TempDir(), name), handle: netns.None()}
	if err := Create(n.path); err != nil {
		t.Fatalf("create network namespace %s: %v", name, err)
	}
	t.Cleanup(n.Destroy)

	h, err := netns.GetFromPath(n.path)
	if err != nil {
		t.Fatalf("open network namespace %s: %v", name, err)
	}
	n.handle = h
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatalf("netlink handle in %s: %v", name, err)
	}
	n.nl = nl
	n.Up("lo")
	// IPv6 addresses, link-local ones included, are usable at once: no
	// duplicate address detection holds them tentative.
	for _, c := range []string{"all", "default"} {
		n.sysctlIfPresent("net/ipv6/conf/" + c + "/accept_dad")
	}
	return n
}

// sysctlIfPresent writes 0 to key where the kernel has it (IPv6 may be
// disabled).
func (n *NS) sysctlIfPresent(key string) {
	n.t.Helper()
	n.MustDo(func() error {
		err := os.WriteFile(filepath.Join("/proc/sys", key), []byte("0"), 0o644)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	})
}

// Attach wraps a namespace something else created and will delete (a real
// cluster's external client, for example) so a test can use the helpers on it.
// Only the handles opened here are closed when the test ends.
func Attach(t testing.TB, name, path string) *NS {
	t.Helper()
	require.Root(t)
	h, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatalf("open network namespace %s: %v", path, err)
	}
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		h.Close()
		t.Fatalf("netlink handle in %s: %v", path, err)
	}
	n := &NS{Name: name, t: t, path: path, handle: h, nl: nl}
	t.Cleanup(func() {
		nl.Close()
		h.Close()
	})
	return n
}

// UniqueName returns prefix followed by a dash and six random hex digits.
func UniqueName(prefix string) string {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return prefix + "-" + hex.EncodeToString(b)
}

// Create makes a new network namespace and keeps it alive as a bind mount on the
// file path (created here): unshare on a locked thread, bind-mount the thread's
// namespace, switch back. If switching back fails the thread stays locked and
// dies with its goroutine, so no goroutine ever runs in the wrong namespace.
// Remove it with Delete.
func Create(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return err
	}
	f.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("current namespace: %w", err)
			return
		}
		defer orig.Close()
		created, err := netns.New()
		if err == nil {
			src := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
			if merr := unix.Mount(src, path, "none", unix.MS_BIND, ""); merr != nil {
				err = fmt.Errorf("bind-mount %s on %s: %w", src, path, merr)
			}
			created.Close()
		}
		if serr := netns.Set(orig); serr != nil {
			errc <- errors.Join(err, fmt.Errorf("switch back to the original namespace: %w", serr))
			return // thread stays locked and is discarded
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	if err := <-errc; err != nil {
		_ = os.Remove(path)
		return err
	}
	return nil
}

// Delete unmounts a namespace made by Create and removes its file; the namespace
// goes away once no process or open descriptor holds it any more.
func Delete(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// Destroy deletes the namespace now rather than when the test ends (a machine
// powered off, say): the handles are closed and the bind mount removed, and the
// kernel frees the namespace, with its interfaces, once no process or socket
// holds it any more. The NS must not be used afterwards; calling Destroy again
// does nothing.
func (n *NS) Destroy() {
	n.destroyOnce.Do(n.destroy)
}

func (n *NS) destroy() {
	if n.nl != nil {
		n.nl.Close()
		n.nl = nil
	}
	if n.handle.IsOpen() {
		n.handle.Close()
		n.handle = netns.None()
	}
	if err := Delete(n.path); err != nil {
		n.t.Errorf("delete network namespace %s: %v", n.Name, err)
	}
}

// Path is the namespace's bind mount, usable with nsenter --net= or setns(2).
func (n *NS) Path() string { return n.path }

// FD is an open file descriptor of the namespace, valid until the test ends.
func (n *NS) FD() int { return int(n.handle) }

// Netlink is a netlink handle bound to the namespace.
func (n *NS) Netlink() *netlink.Handle { return n.nl }

// Do runs fn on an OS thread switched into the namespace and returns its
// error. Sockets fn opens stay in the namespace after fn returns; goroutines fn
// starts do not run in it.
func (n *NS) Do(fn func() error) error { return doIn(n.handle, n.Name, fn) }

// DoPath is Do for the namespace kept alive at path (see Create), for code
// that holds no NS: fn runs on an OS thread switched into it.
func DoPath(path string, fn func() error) error {
	h, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("open network namespace %s: %w", path, err)
	}
	defer h.Close()
	return doIn(h, path, fn)
}

func doIn(h netns.NsHandle, name string, fn func() error) error {
	type result struct{ err, switchErr error }
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{switchErr: fmt.Errorf("current namespace: %w", err)}
			return
		}
		defer orig.Close()
		if err := netns.Set(h); err != nil {
			runtime.UnlockOSThread()
			done <- result{switchErr: fmt.Errorf("enter %s: %w", name, err)}
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			// Leave the thread locked: it is discarded when this goroutine ends.
			done <- result{err: ferr, switchErr: fmt.Errorf("leave %s: %w", name, err)}
			return
		}
		runtime.UnlockOSThread()
		done <- result{err: ferr}
	}()
	r := <-done
	if r.switchErr != nil {
		return r.switchErr
	}
	return r.err
}

// MustDo is Do that fails the test on error.
func (n *NS) MustDo(fn func() error) {
	n.t.Helper()
	if err := n.Do(fn); err != nil {
		n.t.Fatalf("in %s: %v", n.Name, err)
	}
}

// Sysctl writes a value under /proc/sys in the namespace; key uses slashes
// ("net/ipv4/ip_forward") so interface names with dots stay intact.
func (n *NS) Sysctl(key, value string) {
	n.t.Helper()
	// /proc/sys/net resolves against the namespace of the opening thread,
	// which Do has locked into this namespace.
	n.MustDo(func() error {
		p := filepath.Join("/proc/sys", key)
		if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
			return fmt.Errorf("sysctl %s=%s: %w", key, value, err)
		}
		return nil
	})
}

// ReadSysctl reads a value under /proc/sys in the namespace.
func (n *NS) ReadSysctl(key string) string {
	n.t.Helper()
	var out string
	n.MustDo(func() error {
		b, err := os.ReadFile(filepath.Join("/proc/sys", key))
		out = strings.TrimSpace(string(b))
		return err
	})
	return out
}
