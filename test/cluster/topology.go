package cluster

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"

	"github.com/loutres/juneau/test/netns"
)

// The cluster's addresses. They exist only inside the namespaces a run creates; no
// namespace gets a default route, so nothing can leave the machine.
const (
	SegmentPrefix  = "10.225.51.0/24" // the external segment: Nodes, control plane, client
	ControlPlaneIP = "10.225.51.250"  // kube-apiserver, etcd, kcm, scheduler; outside the example pool
	ClientIP       = "10.225.51.100"  // the external client
	ClusterCIDR    = "10.244.0.0/16"  // Pods; Node i has 10.244.<i+1>.0/24
	ServiceCIDR    = "10.96.0.0/16"
	KubernetesIP   = "10.96.0.1" // the kubernetes Service
	APIServerPort  = 6443
	RegistryPort   = 5000
	bridgeName     = "br0"
	segmentIface   = "eth0" // every namespace's interface on the segment
)

func nodeIP(i int) string      { return fmt.Sprintf("10.225.51.%d", 2+i) }
func nodePodCIDR(i int) string { return fmt.Sprintf("10.244.%d.0/24", 1+i) }

// withHandle runs fn with a netlink handle inside the namespace file path.
func withHandle(path string, fn func(*netlink.Handle) error) error {
	ns, err := vnetns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", path, err)
	}
	defer h.Close()
	return fn(h)
}

// newNamespace creates the network namespace file ns/<name> of the run (recorded
// first, so a teardown finds it whatever happens next) with its loopback up.
func (r *run) newNamespace(name string) (string, error) {
	p := r.path("ns", name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	if err := r.record(recNetns, p); err != nil {
		return "", err
	}
	if err := netns.Create(p); err != nil {
		return "", fmt.Errorf("network namespace %s: %w", name, err)
	}
	return p, withHandle(p, func(h *netlink.Handle) error {
		lo, err := h.LinkByName("lo")
		if err != nil {
			return err
		}
		return h.LinkSetUp(lo)
	})
}

// segment creates the namespace holding the segment's bridge.
func segment(path string) error {
	return withHandle(path, func(h *netlink.Handle) error {
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: bridgeName}}
		if err := h.LinkAdd(br); err != nil {
			return fmt.Errorf("bridge: %w", err)
		}
		return h.LinkSetUp(br)
	})
}

// plug connects the namespace at path to the segment with a veth whose end inside is
// eth0 with address cidr. The veth is created inside the segment's namespace with its
// peer placed straight into the other one: no interface ever appears in the root
// namespace.
func plug(segPath, path, port, cidr string) error {
	target, err := vnetns.GetFromPath(path)
	if err != nil {
		return err
	}
	defer target.Close()
	err = withHandle(segPath, func(h *netlink.Handle) error {
		br, err := h.LinkByName(bridgeName)
		if err != nil {
			return err
		}
		veth := &netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: port, MasterIndex: br.Attrs().Index},
			PeerName:      segmentIface,
			PeerNamespace: netlink.NsFd(int(target)),
		}
		if err := h.LinkAdd(veth); err != nil {
			return fmt.Errorf("veth %s: %w", port, err)
		}
		return h.LinkSetUp(veth)
	})
	if err != nil {
		return err
	}
	return withHandle(path, func(h *netlink.Handle) error {
		link, err := h.LinkByName(segmentIface)
		if err != nil {
			return err
		}
		addr, err := netlink.ParseAddr(cidr)
		if err != nil {
			return err
		}
		if err := h.AddrAdd(link, addr); err != nil {
			return fmt.Errorf("address %s: %w", cidr, err)
		}
		return h.LinkSetUp(link)
	})
}

// route adds a route to dst via gw inside the namespace at path.
func route(path, dst, gw string) error {
	_, ipnet, err := net.ParseCIDR(dst)
	if err != nil {
		return err
	}
	return withHandle(path, func(h *netlink.Handle) error {
		if err := h.RouteAdd(&netlink.Route{Dst: ipnet, Gw: net.ParseIP(gw)}); err != nil {
			return fmt.Errorf("route %s via %s: %w", dst, gw, err)
		}
		return nil
	})
}

// sysctl writes a network sysctl inside the namespace at path.
func sysctl(path, key, value string) error {
	return netns.DoPath(path, func() error {
		return os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644)
	})
}

// inNamespace runs open (a dial, a listen) on a thread inside the network namespace file
// ns; the socket it returns stays in that namespace.
func inNamespace[T any](ns string, open func() (T, error)) (T, error) {
	var v T
	err := netns.DoPath(ns, func() error {
		var err error
		v, err = open()
		return err
	})
	return v, err
}
