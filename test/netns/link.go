package netns

import (
	"errors"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Veth creates a veth pair with end aName in a and end bName in b and sets
// both ends up. The pair is created from inside a, so nothing ever appears in
// the host's namespace; it disappears with either namespace.
func Veth(a *NS, aName string, b *NS, bName string) {
	a.t.Helper()
	v := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: aName},
		PeerName:      bName,
		PeerNamespace: netlink.NsFd(b.FD()),
	}
	if err := a.nl.LinkAdd(v); err != nil {
		a.t.Fatalf("veth %s/%s <-> %s/%s: %v", a.Name, aName, b.Name, bName, err)
	}
	a.Up(aName)
	b.Up(bName)
}

// Bridge creates a bridge named name and sets it up.
func (n *NS) Bridge(name string) {
	n.t.Helper()
	if err := n.nl.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}); err != nil {
		n.t.Fatalf("bridge %s in %s: %v", name, n.Name, err)
	}
	n.Up(name)
}

// SetMaster enslaves dev to the bridge named bridge.
func (n *NS) SetMaster(dev, bridge string) {
	n.t.Helper()
	if err := n.nl.LinkSetMaster(n.Link(dev), n.Link(bridge)); err != nil {
		n.t.Fatalf("%s: set master of %s to %s: %v", n.Name, dev, bridge, err)
	}
}

// Link returns the link named dev or fails the test.
func (n *NS) Link(dev string) netlink.Link {
	n.t.Helper()
	l, err := n.nl.LinkByName(dev)
	if err != nil {
		n.t.Fatalf("%s: link %s: %v", n.Name, dev, err)
	}
	return l
}

// Up sets dev up.
func (n *NS) Up(dev string) {
	n.t.Helper()
	if err := n.nl.LinkSetUp(n.Link(dev)); err != nil {
		n.t.Fatalf("%s: set %s up: %v", n.Name, dev, err)
	}
}

// SetMTU sets the MTU of dev.
func (n *NS) SetMTU(dev string, mtu int) {
	n.t.Helper()
	if err := n.nl.LinkSetMTU(n.Link(dev), mtu); err != nil {
		n.t.Fatalf("%s: set MTU of %s to %d: %v", n.Name, dev, mtu, err)
	}
}

// MAC returns the hardware address of dev.
func (n *NS) MAC(dev string) net.HardwareAddr {
	n.t.Helper()
	return n.Link(dev).Attrs().HardwareAddr
}

// Addr adds an address in CIDR form ("10.225.51.2/24", "2001:db8::2/64") to
// dev. An IPv6 address skips duplicate address detection, so it is usable at
// once rather than tentative for a second.
func (n *NS) Addr(dev, cidr string) {
	n.t.Helper()
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		n.t.Fatalf("parse address %q: %v", cidr, err)
	}
	if a.IP.To4() == nil {
		a.Flags |= unix.IFA_F_NODAD
	}
	if err := n.nl.AddrAdd(n.Link(dev), a); err != nil {
		n.t.Fatalf("%s: add %s to %s: %v", n.Name, cidr, dev, err)
	}
}

// Route adds a route. dst is "default" or a prefix; via is a gateway or empty;
// dev is an interface name or empty. A gateway together with a device is
// added onlink, the way CNI plugins point Pods at a link-local gateway.
func (n *NS) Route(dst, via, dev string) {
	n.t.Helper()
	r := &netlink.Route{}
	if dst != "default" {
		p, err := netip.ParsePrefix(dst)
		if err != nil {
			n.t.Fatalf("parse route destination %q: %v", dst, err)
		}
		r.Dst = &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
	}
	if via != "" {
		r.Gw = net.ParseIP(via)
		if r.Gw == nil {
			n.t.Fatalf("parse gateway %q", via)
		}
	}
	if dev != "" {
		r.LinkIndex = n.Link(dev).Attrs().Index
		if via != "" {
			r.Flags = int(netlink.FLAG_ONLINK)
		} else {
			r.Scope = netlink.SCOPE_LINK
		}
	}
	if err := n.nl.RouteAdd(r); err != nil {
		n.t.Fatalf("%s: route %s via %q dev %q: %v", n.Name, dst, via, dev, err)
	}
}

// Neigh adds a permanent neighbour entry for ip on dev.
func (n *NS) Neigh(dev, ip string, mac net.HardwareAddr) {
	n.t.Helper()
	err := n.nl.NeighSet(&netlink.Neigh{
		LinkIndex:    n.Link(dev).Attrs().Index,
		Family:       family(ip),
		State:        netlink.NUD_PERMANENT,
		IP:           net.ParseIP(ip),
		HardwareAddr: mac,
	})
	if err != nil {
		n.t.Fatalf("%s: neighbour %s %s on %s: %v", n.Name, ip, mac, dev, err)
	}
}

// Neighbour returns the hardware address the namespace holds for ip on dev,
// and whether the entry is usable (reachable, stale, delay, probe or
// permanent).
func (n *NS) Neighbour(dev, ip string) (net.HardwareAddr, bool) {
	n.t.Helper()
	neighs, err := n.nl.NeighList(n.Link(dev).Attrs().Index, family(ip))
	if err != nil {
		n.t.Fatalf("%s: list neighbours on %s: %v", n.Name, dev, err)
	}
	want := net.ParseIP(ip)
	const usable = netlink.NUD_REACHABLE | netlink.NUD_STALE | netlink.NUD_DELAY |
		netlink.NUD_PROBE | netlink.NUD_PERMANENT | netlink.NUD_NOARP
	for _, e := range neighs {
		if e.IP.Equal(want) {
			return e.HardwareAddr, e.State&usable != 0 && len(e.HardwareAddr) > 0
		}
	}
	return nil, false
}

// FlushNeighbour deletes the neighbour entry for ip on dev, if any.
func (n *NS) FlushNeighbour(dev, ip string) {
	n.t.Helper()
	err := n.nl.NeighDel(&netlink.Neigh{
		LinkIndex: n.Link(dev).Attrs().Index,
		Family:    family(ip),
		IP:        net.ParseIP(ip),
	})
	if err != nil && !errors.Is(err, unix.ENOENT) {
		n.t.Fatalf("%s: delete neighbour %s on %s: %v", n.Name, ip, dev, err)
	}
}

// DisableOffload turns transmit checksum offload off on dev, so that packets
// leave with real checksums and a broken checksum is visible to the receiver
// (with offload on, veth passes CHECKSUM_PARTIAL packets that nobody checks).
func (n *NS) DisableOffload(dev string) {
	n.t.Helper()
	n.MustRun("ethtool", "-K", dev, "tx", "off")
}

// family is the address family of a textual address.
func family(ip string) int {
	if a, err := netip.ParseAddr(ip); err == nil && a.Unmap().Is6() {
		return unix.AF_INET6
	}
	return unix.AF_INET
}
