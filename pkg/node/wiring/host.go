package wiring

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/loutres/juneau/pkg/node/bgp"
)

// externalInterface is --external-interface, or the interface holding the Node's InternalIP.
func (o Options) externalInterface(ctx context.Context, kube kubernetes.Interface) (string, error) {
	if o.ExternalInterface != "" {
		return o.ExternalInterface, nil
	}
	node, err := kube.CoreV1().Nodes().Get(ctx, o.NodeName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading Node %q to find the external interface: %w", o.NodeName, err)
	}
	for _, a := range node.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		ip := net.ParseIP(a.Address)
		links, err := netlink.LinkList()
		if err != nil {
			return "", err
		}
		for _, l := range links {
			addrs, err := netlink.AddrList(l, netlink.FAMILY_ALL)
			if err != nil {
				continue
			}
			for _, ad := range addrs {
				if ad.IP.Equal(ip) {
					return l.Attrs().Name, nil
				}
			}
		}
	}
	return "", fmt.Errorf("no interface holds an InternalIP of Node %q; set --external-interface", o.NodeName)
}

// bgpNextHop6 is --bgp-ipv6-next-hop, or the lowest global IPv6 address of the external
// interface (bgp.NextHop6); invalid when there is none.
func (o Options) bgpNextHop6(iface string) (netip.Addr, error) {
	if o.IPv6NextHop != "" {
		return netip.ParseAddr(o.IPv6NextHop) // checked by Validate
	}
	list, err := interfaceAddrs(iface, netlink.FAMILY_V6)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("reading the IPv6 addresses of %s for the BGP next hop: %w", iface, err)
	}
	addrs := make([]netip.Prefix, 0, len(list))
	flags := map[netip.Prefix]int{}
	for _, a := range list {
		addrs = append(addrs, a.Prefix)
		flags[a.Prefix] = a.Flags
	}
	usable := func(p netip.Prefix) bool {
		return flags[p]&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED|unix.IFA_F_DEPRECATED) == 0
	}
	return bgp.NextHop6(addrs, usable), nil
}

// addrOrNone is a's text, or "none" when a is invalid.
func addrOrNone(a netip.Addr) string {
	if !a.IsValid() {
		return "none"
	}
	return a.String()
}

// ifaceAddr is one address of an interface with its IFA_F_* flags.
type ifaceAddr struct {
	Prefix netip.Prefix
	Flags  int
}

// interfaceAddrs lists the addresses of one family (netlink.FAMILY_V4 or FAMILY_V6)
// of the named interface, IPv4 ones unmapped.
func interfaceAddrs(iface string, family int) ([]ifaceAddr, error) {
	link, err := netlink.LinkByName(iface)
	if err != nil {
		return nil, err
	}
	list, err := netlink.AddrList(link, family)
	if err != nil {
		return nil, err
	}
	out := make([]ifaceAddr, 0, len(list))
	for _, a := range list {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || a.IPNet == nil {
			continue
		}
		ones, _ := a.Mask.Size()
		out = append(out, ifaceAddr{Prefix: netip.PrefixFrom(ip.Unmap(), ones), Flags: a.Flags})
	}
	return out, nil
}

// subnetsOf lists the IPv4 prefixes of the interface's addresses.
func subnetsOf(iface string) []netip.Prefix {
	addrs, _ := interfaceAddrs(iface, netlink.FAMILY_V4)
	out := make([]netip.Prefix, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, a.Prefix)
	}
	return out
}

// hostInterface names the interface of the node's host route for addr: the /32 (/128)
// the CNI plugin adds towards a direct NIC's host end.
func hostInterface(addr netip.Addr) (string, bool) {
	addr = addr.Unmap()
	family := netlink.FAMILY_V4
	if addr.Is6() {
		family = netlink.FAMILY_V6
	}
	dst := &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(addr.BitLen(), addr.BitLen())}
	routes, err := netlink.RouteListFiltered(family, &netlink.Route{Dst: dst}, netlink.RT_FILTER_DST)
	if err != nil || len(routes) == 0 || routes[0].LinkIndex == 0 {
		return "", false
	}
	link, err := netlink.LinkByIndex(routes[0].LinkIndex)
	if err != nil {
		return "", false
	}
	return link.Attrs().Name, true
}

// hasGlobalIPv6 tells whether the interface carries a global IPv6 address (ULAs
// included), i.e. whether this Node's external network has IPv6 at all; the IPv6
// kernel settings are made only then (docs/datapath.md).
func hasGlobalIPv6(iface string) bool {
	addrs, _ := interfaceAddrs(iface, netlink.FAMILY_V6)
	for _, a := range addrs {
		if a.Prefix.Addr().IsGlobalUnicast() {
			return true
		}
	}
	return false
}
