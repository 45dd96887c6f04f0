package cluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/loutres/juneau/test/netns"
)

// The cluster's addresses, in both families: the cluster is dual-stack (IPv4 first).
// They exist only inside the namespaces a run creates; no namespace gets a default
// route, IPv4 or IPv6, and none accepts router advertisements, so nothing can leave
// the machine. The IPv6 ones are unique local addresses, the same scheme as the
// simulated Nodes of test/e2e/harness.
const (
	SegmentPrefix   = "10.225.51.0/24"   // the external segment: Nodes, control plane, client
	SegmentPrefix6  = "fd00:225:51::/64" // its IPv6 prefix
	ControlPlaneIP  = "10.225.51.250"    // kube-apiserver, etcd, kcm, scheduler; outside the example pool
	ControlPlaneIP6 = "fd00:225:51::250"
	ClientIP        = "10.225.51.100" // the external client
	ClientIP6       = "fd00:225:51::100"
	ClusterCIDR     = "10.244.0.0/16" // Pods; Node i has 10.244.<i+1>.0/24
	ClusterCIDR6    = "fd00:244::/56" // Node i has fd00:244:0:<i+1>::/64
	ServiceCIDR     = "10.96.0.0/16"
	ServiceCIDR6    = "fd00:96::/112"
	KubernetesIP    = "10.96.0.1" // the kubernetes Service (the first family's)
	APIServerPort   = 6443
	RegistryPort    = 5000
	bridgeName      = "br0"
	segmentIface    = "eth0" // every namespace's interface on the segment
)

func nodeIP(i int) string       { return fmt.Sprintf("10.225.51.%d", 2+i) }
func nodeIP6(i int) string      { return fmt.Sprintf("fd00:225:51::%d", 2+i) }
func nodePodCIDR(i int) string  { return fmt.Sprintf("10.244.%d.0/24", 1+i) }
func nodePodCIDR6(i int) string { return fmt.Sprintf("fd00:244:0:%d::/64", 1+i) }

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

// ipv6Defaults are the IPv6 settings of every namespace a run creates, written for
// "all" and for "default" (which interfaces created later start from) before any
// interface is plugged in: no router advertisement is accepted and no address is made
// from one, so no namespace ever learns a default route; addresses are usable at once
// (no duplicate address detection: every address on the segment is assigned here).
var ipv6Defaults = map[string]string{"accept_ra": "0", "autoconf": "0", "accept_dad": "0"}

// newNamespace creates the network namespace file ns/<name> of the run (recorded
// first, so a teardown finds it whatever happens next) with its loopback up and the
// IPv6 settings of ipv6Defaults.
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
	for _, conf := range []string{"all", "default"} {
		for key, value := range ipv6Defaults {
			if err := sysctl(p, "net/ipv6/conf/"+conf+"/"+key, value); err != nil {
				return "", err
			}
		}
	}
	return p, withHandle(p, func(h *netlink.Handle) error {
		lo, err := h.LinkByName("lo")
		if err != nil {
			return err
		}
		return h.LinkSetUp(lo)
	})
}

// segment creates the bridge of the segment in its namespace, which has no address of
// its own in either family (IPv6 is off there: the bridge forwards it all the same).
func segment(path string) error {
	for _, conf := range []string{"all", "default"} {
		if err := sysctl(path, "net/ipv6/conf/"+conf+"/disable_ipv6", "1"); err != nil {
			return err
		}
	}
	return withHandle(path, func(h *netlink.Handle) error {
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: bridgeName}}
		if err := h.LinkAdd(br); err != nil {
			return fmt.Errorf("bridge: %w", err)
		}
		return h.LinkSetUp(br)
	})
}

// plug connects the namespace at path to the segment with a veth whose end inside is
// eth0 with the addresses cidrs (an IPv6 one without duplicate address detection). The
// veth is created inside the segment's namespace with its peer placed straight into the
// other one: no interface ever appears in the root namespace.
func plug(segPath, path, port string, cidrs ...string) error {
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
		for _, cidr := range cidrs {
			addr, err := netlink.ParseAddr(cidr)
			if err != nil {
				return err
			}
			if addr.IP.To4() == nil {
				addr.Flags |= unix.IFA_F_NODAD
			}
			if err := h.AddrAdd(link, addr); err != nil {
				return fmt.Errorf("address %s: %w", cidr, err)
			}
		}
		return h.LinkSetUp(link)
	})
}

// PlugIntoSegment connects the network namespace at path, which the caller made and
// removes (the veth goes with it), to the segment as eth0 with the addresses cidrs
// and the bridge's end port: a host a test adds, such as a router.
func (c *Cluster) PlugIntoSegment(path, port string, cidrs ...string) error {
	return plug(c.SegmentNS, path, port, cidrs...)
}

// UnplugFromSegment removes the bridge's end port of a host PlugIntoSegment connected,
// and with it the host's eth0, at once: the namespace's removal takes the veth along
// only some time later, so a test that plugs a host again under the same port name
// unplugs the first one itself. A port that is gone already is no error.
func (c *Cluster) UnplugFromSegment(port string) error {
	return withHandle(c.SegmentNS, func(h *netlink.Handle) error {
		link, err := h.LinkByName(port)
		if errors.As(err, new(netlink.LinkNotFoundError)) {
			return nil
		}
		if err != nil {
			return err
		}
		return h.LinkDel(link)
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

// network creates the namespaces, the segment and the routes between them, in both
// families.
func (c *Cluster) network() error {
	var err error
	if c.SegmentNS, err = c.run.newNamespace("segment"); err != nil {
		return err
	}
	if err := segment(c.SegmentNS); err != nil {
		return err
	}
	if c.CPNS, err = c.run.newNamespace("control-plane"); err != nil {
		return err
	}
	if err := plug(c.SegmentNS, c.CPNS, "cp", ControlPlaneIP+"/24", ControlPlaneIP6+"/64"); err != nil {
		return err
	}
	if c.ClientNS, err = c.run.newNamespace("client"); err != nil {
		return err
	}
	if err := plug(c.SegmentNS, c.ClientNS, "client", ClientIP+"/24", ClientIP6+"/64"); err != nil {
		return err
	}
	for i, name := range c.opts.Nodes {
		n, err := c.nodeNetwork(i, name)
		if err != nil {
			return err
		}
		if err := c.routeNode(n, c.Nodes); err != nil {
			return err
		}
		c.Nodes = append(c.Nodes, n)
	}
	return nil
}

// nodeNetwork makes the network namespace of Node i on the segment, forwarding in both
// families.
func (c *Cluster) nodeNetwork(i int, name string) (*Node, error) {
	id := strings.TrimPrefix(filepath.Base(c.Dir), runPrefix)
	n := &Node{Name: name, IP: nodeIP(i), IP6: nodeIP6(i), PodCIDR: nodePodCIDR(i), PodCIDR6: nodePodCIDR6(i),
		Dir: c.run.path("nodes", name), index: i, cgroup: "juneau-" + id + "-" + name, c: c}
	var err error
	if n.NS, err = c.run.newNamespace(name); err != nil {
		return nil, err
	}
	if err := plug(c.SegmentNS, n.NS, n.port(), n.IP+"/24", n.IP6+"/64"); err != nil {
		return nil, err
	}
	for _, key := range []string{"net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding"} {
		if err := sysctl(n.NS, key, "1"); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// routeNode adds the routes of Node n, whose peers are others: the API server reaches
// webhook Pods, and every Node the others' Pods, through the Node owning the Pod CIDR
// (with flannel, the Nodes reach each other's Pods through its VXLAN devices and routes
// instead). The external client knows only the segment.
func (c *Cluster) routeNode(n *Node, others []*Node) error {
	for _, r := range [][2]string{{n.PodCIDR, n.IP}, {n.PodCIDR6, n.IP6}} {
		if err := route(c.CPNS, r[0], r[1]); err != nil {
			return err
		}
	}
	// Connections a Node itself opens to a Service (a hostNetwork Pod reaching the API
	// server at 10.96.0.1) need a route before kube-proxy's DNAT rewrites their
	// destination; where real Nodes use their default route, these use one for the
	// Service ranges only.
	for _, r := range [][2]string{{ServiceCIDR, ControlPlaneIP}, {ServiceCIDR6, ControlPlaneIP6}} {
		if err := route(n.NS, r[0], r[1]); err != nil {
			return err
		}
	}
	if c.opts.CNI == CNIFlannel {
		return nil
	}
	for _, m := range others {
		for _, pair := range [][2]*Node{{n, m}, {m, n}} {
			from, to := pair[0], pair[1]
			for _, r := range [][2]string{{to.PodCIDR, to.IP}, {to.PodCIDR6, to.IP6}} {
				if err := route(from.NS, r[0], r[1]); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
