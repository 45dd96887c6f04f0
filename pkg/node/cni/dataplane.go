package cni

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	cnins "github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/loutres/juneau/pkg/apis/juneau/directnic"
	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
)

// dataplane changes links, addresses, routes and rules on the node (the namespace the
// plugin runs in) and inside the Pod, through one netlink handle bound to each, so no
// thread ever switches namespace.
type dataplane struct {
	host *netlink.Handle
	// pod is nil when the Pod's namespace no longer exists (DEL after teardown).
	pod   *netlink.Handle
	podNS cnins.NetNS
}

// openDataplane opens the node's and the Pod's namespaces. With mustExist false a
// missing Pod namespace is not an error (pod stays nil).
func openDataplane(netnsPath string, mustExist bool) (*dataplane, error) {
	host, err := netlink.NewHandle()
	if err != nil {
		return nil, fmt.Errorf("netlink handle on the node: %w", err)
	}
	d := &dataplane{host: host}
	if netnsPath == "" {
		if mustExist {
			d.close()
			return nil, errors.New("CNI_NETNS is empty")
		}
		return d, nil
	}
	podNS, err := cnins.GetNS(netnsPath)
	if err != nil {
		var notExist cnins.NSPathNotExistErr
		if !mustExist && errors.As(err, &notExist) {
			return d, nil
		}
		d.close()
		return nil, fmt.Errorf("open the Pod's network namespace %s: %w", netnsPath, err)
	}
	d.podNS = podNS
	d.pod, err = netlink.NewHandleAt(netns.NsHandle(podNS.Fd()))
	if err != nil {
		d.close()
		return nil, fmt.Errorf("netlink handle in the Pod's network namespace %s: %w", netnsPath, err)
	}
	return d, nil
}

func (d *dataplane) close() {
	if d.pod != nil {
		d.pod.Close()
	}
	if d.podNS != nil {
		d.podNS.Close()
	}
	d.host.Close()
}

// maxDumpAttempts bounds retries of netlink dumps the kernel interrupted because the
// table changed meanwhile (NLM_F_DUMP_INTR).
const maxDumpAttempts = 5

func dump[T any](f func() ([]T, error)) ([]T, error) {
	var out []T
	var err error
	for range maxDumpAttempts {
		out, err = f()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return out, err
		}
	}
	return out, err
}

func isNotFound(err error) bool {
	var lnf netlink.LinkNotFoundError
	return errors.As(err, &lnf) || errors.Is(err, unix.ENODEV)
}

// gone reports errors that mean "already absent" when deleting.
func gone(err error) bool {
	return err == nil || isNotFound(err) || errors.Is(err, unix.ESRCH) ||
		errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EADDRNOTAVAIL)
}

func exists(err error) bool { return err == nil || errors.Is(err, unix.EEXIST) }

// gatewayAddr is the gateway a host end holds for a NIC carrying addr. IPv4:
// 169.254.0.1/32 with host scope: the node answers ARP for it towards the Pod (it is a
// local address), while host scope keeps it out of source address selection, so the
// node never sends from it (README: "The gateway"). IPv6: fe80::1/64, link-local and so
// never a source beyond the link, answered by the node's NDP towards the Pod, without
// duplicate address detection (every host end holds it; each link is its own).
func gatewayAddr(addr netip.Addr) *netlink.Addr {
	if addr.Is4() {
		return &netlink.Addr{IPNet: ipNet(iprange.HostPrefix(directnic.Gateway(addr))), Scope: int(netlink.SCOPE_HOST)}
	}
	return &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(directnic.Gateway(addr), 64)), Scope: int(netlink.SCOPE_LINK), Flags: unix.IFA_F_NODAD}
}

// gatewayPrefix is the prefix of gatewayAddr.
func gatewayPrefix(addr netip.Addr) netip.Prefix {
	g := gatewayAddr(addr)
	p, _ := prefixOf(g.IPNet)
	return p
}

// podAddr is an address inside the Pod: an IPv6 one without duplicate address
// detection, so it is usable at once (the ElasticIP is reserved for this NIC).
func podAddr(p netip.Prefix) *netlink.Addr {
	a := &netlink.Addr{IPNet: ipNet(p)}
	if p.Addr().Is6() {
		a.Flags = unix.IFA_F_NODAD
	}
	return a
}

// family is the netlink address family of addr.
func family(addr netip.Addr) int {
	if addr.Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

func hostRoute(addr netip.Prefix, link netlink.Link) *netlink.Route {
	return &netlink.Route{Dst: ipNet(addr), LinkIndex: link.Attrs().Index, Scope: netlink.SCOPE_LINK}
}

func podRoute(r route, link netlink.Link) *netlink.Route {
	nr := &netlink.Route{Dst: ipNet(r.Dst), LinkIndex: link.Attrs().Index, Table: r.kernelTable()}
	if r.Gw.IsValid() {
		nr.Gw = r.Gw.AsSlice()
		if r.OnLink {
			nr.Flags = int(netlink.FLAG_ONLINK)
		}
	} else {
		nr.Scope = netlink.SCOPE_LINK
	}
	return nr
}

func podRule(r rule) *netlink.Rule {
	nr := netlink.NewRule()
	nr.Family = family(r.From.Addr())
	nr.Src = ipNet(r.From)
	nr.Table = r.Table
	nr.Priority = r.Priority
	return nr
}

// primaryHostEnd finds the node-side end of the Pod's primary NIC through the veth peer
// index, and refuses NICs juneau cannot route to directly: non-veth links (macvlan,
// ipvlan, SR-IOV) and host ends enslaved to a bridge (bridge, flannel), where the Pod
// shares an L2 segment and a /32 route to one port is not how traffic reaches it.
func (d *dataplane) primaryHostEnd(ifName string) (podLink, hostLink netlink.Link, err error) {
	podLink, err = d.pod.LinkByName(ifName)
	if err != nil {
		return nil, nil, fmt.Errorf("interface %q in the Pod: %w", ifName, err)
	}
	if _, ok := podLink.(*netlink.Veth); !ok {
		return nil, nil, fmt.Errorf("interface %q in the Pod is a %s link, not a veth: a direct ElasticIP on it needs a routed-veth primary CNI", ifName, podLink.Type())
	}
	peer := podLink.Attrs().ParentIndex
	if peer <= 0 {
		return nil, nil, fmt.Errorf("interface %q in the Pod reports no veth peer", ifName)
	}
	hostLink, err = d.host.LinkByIndex(peer)
	if err != nil {
		return nil, nil, fmt.Errorf("host end (ifindex %d) of %q: %w", peer, ifName, err)
	}
	if _, ok := hostLink.(*netlink.Veth); !ok || hostLink.Attrs().ParentIndex != podLink.Attrs().Index {
		return nil, nil, fmt.Errorf("the peer of %q is not on this node's namespace (ifindex %d is %q)", ifName, peer, hostLink.Attrs().Name)
	}
	if m := hostLink.Attrs().MasterIndex; m != 0 {
		master := fmt.Sprintf("ifindex %d", m)
		if ml, err := d.host.LinkByIndex(m); err == nil {
			master = fmt.Sprintf("%q", ml.Attrs().Name)
		}
		return nil, nil, fmt.Errorf("host end %q of %q is a port of %s (bridged primary CNI): a direct ElasticIP on eth0 needs a routed-veth primary CNI", hostLink.Attrs().Name, ifName, master)
	}
	return podLink, hostLink, nil
}

// replacedAddresses are the addresses on the primary NIC that the ElasticIP replaces:
// every global one of its family but the ElasticIP itself. The other family's
// addresses stay (a dual-stack Pod keeps its IPv4 Pod IP beside an IPv6 ElasticIP).
func (d *dataplane) replacedAddresses(podLink netlink.Link, eip netip.Prefix) ([]netip.Prefix, error) {
	addrs, err := dump(func() ([]netlink.Addr, error) { return d.pod.AddrList(podLink, family(eip.Addr())) })
	if err != nil {
		return nil, fmt.Errorf("list addresses of %q in the Pod: %w", podLink.Attrs().Name, err)
	}
	var out []netip.Prefix
	for _, a := range addrs {
		p, ok := prefixOf(a.IPNet)
		if !ok || a.Scope != int(netlink.SCOPE_UNIVERSE) || p == eip {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones), true
}

// plumbPrimary moves the Pod's primary NIC from the primary plugin's addresses of the
// ElasticIP's family to the ElasticIP: those addresses and main-table routes off (IPv6
// link-local ones stay: the link needs them), <EIP>/32 (/128) and the direct routes
// on; the node routes the ElasticIP to the host end, which answers for the gateway.
func (d *dataplane) plumbPrimary(p nicPlan, replaced []netip.Prefix, podLink, hostLink netlink.Link) error {
	for _, a := range replaced {
		if err := d.pod.AddrDel(podLink, &netlink.Addr{IPNet: ipNet(a)}); !gone(err) {
			return fmt.Errorf("remove %s from %q in the Pod: %w", a, p.Interface, err)
		}
	}
	// Routes without a preferred source (the primary plugin's default route) survive
	// the address removal; they point at the old gateway, which no longer applies.
	routes, err := dump(func() ([]netlink.Route, error) {
		return d.pod.RouteListFiltered(family(p.Address.Addr()), &netlink.Route{LinkIndex: podLink.Attrs().Index, Table: unix.RT_TABLE_MAIN},
			netlink.RT_FILTER_OIF|netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return fmt.Errorf("list routes of %q in the Pod: %w", p.Interface, err)
	}
	for i := range routes {
		if dst, ok := prefixOf(routes[i].Dst); ok && (dst.Addr().IsLinkLocalUnicast() || dst.Addr().IsMulticast()) {
			continue
		}
		if err := d.pod.RouteDel(&routes[i]); !gone(err) {
			return fmt.Errorf("remove route %s from the Pod: %w", routes[i], err)
		}
	}
	if err := d.plumbCommon(p, podLink, hostLink); err != nil {
		return err
	}
	// The kernel adds a prefix route for every address but a /32. Adding the /32's own
	// changes no forwarding (the local table answers for the address first), and it is
	// what primary plugins' CHECK expects for every IP of the result (ptp looks up a
	// main-table route to each address's prefix). It goes away with the address.
	self := &netlink.Route{Dst: ipNet(p.Address), LinkIndex: podLink.Attrs().Index, Scope: netlink.SCOPE_LINK,
		Src: p.Address.Addr().AsSlice()}
	if err := d.pod.RouteReplace(self); err != nil {
		return fmt.Errorf("add route %s dev %q in the Pod: %w", p.Address, p.Interface, err)
	}
	return nil
}

// plumbExtra creates the extra NIC's veth pair (Pod end named as requested, host end
// p.HostInterface) and configures both ends.
func (d *dataplane) plumbExtra(p nicPlan, mtu int) (podLink, hostLink netlink.Link, err error) {
	if _, err := d.pod.LinkByName(p.Interface); err == nil {
		return nil, nil, fmt.Errorf("interface %q already exists in the Pod", p.Interface)
	}
	// A host end of this name can only be left over by an ADD of this same attachment.
	if stale, err := d.host.LinkByName(p.HostInterface); err == nil {
		if err := d.host.LinkDel(stale); !gone(err) {
			return nil, nil, fmt.Errorf("remove stale host interface %q: %w", p.HostInterface, err)
		}
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name = p.HostInterface
	attrs.MTU = mtu
	veth := &netlink.Veth{LinkAttrs: attrs, PeerName: p.Interface, PeerNamespace: netlink.NsFd(int(d.podNS.Fd())), PeerTxQLen: -1}
	if err := d.host.LinkAdd(veth); err != nil {
		return nil, nil, fmt.Errorf("create veth %q (node) / %q (Pod): %w", p.HostInterface, p.Interface, err)
	}
	if hostLink, err = d.host.LinkByName(p.HostInterface); err != nil {
		return nil, nil, fmt.Errorf("host interface %q: %w", p.HostInterface, err)
	}
	if podLink, err = d.pod.LinkByName(p.Interface); err != nil {
		return nil, nil, fmt.Errorf("interface %q in the Pod: %w", p.Interface, err)
	}
	if err := d.host.LinkSetUp(hostLink); err != nil {
		return nil, nil, fmt.Errorf("set %q up: %w", p.HostInterface, err)
	}
	if err := d.pod.LinkSetUp(podLink); err != nil {
		return nil, nil, fmt.Errorf("set %q up in the Pod: %w", p.Interface, err)
	}
	return podLink, hostLink, d.plumbCommon(p, podLink, hostLink)
}

// plumbCommon sets what both kinds of direct NIC get: <EIP>/32, the routes and rules in
// the Pod; the gateway address, strict reverse-path filtering and the /32 route on the
// host end.
func (d *dataplane) plumbCommon(p nicPlan, podLink, hostLink netlink.Link) error {
	if err := d.pod.AddrAdd(podLink, podAddr(p.Address)); !exists(err) {
		return fmt.Errorf("add %s to %q in the Pod: %w", p.Address, p.Interface, err)
	}
	for _, r := range p.Routes {
		if err := d.pod.RouteReplace(podRoute(r, podLink)); err != nil {
			return fmt.Errorf("add route %s via %s table %d in the Pod: %w", r.Dst, r.Gw, r.kernelTable(), err)
		}
	}
	for _, r := range p.Rules {
		if err := d.pod.RuleAdd(podRule(r)); !exists(err) {
			return fmt.Errorf("add rule from %s lookup %d priority %d in the Pod: %w", r.From, r.Table, r.Priority, err)
		}
	}
	host := hostLink.Attrs().Name
	if err := d.host.AddrAdd(hostLink, gatewayAddr(p.Address.Addr())); !exists(err) {
		return fmt.Errorf("add %s to host interface %q: %w", directnic.Gateway(p.Address.Addr()), host, err)
	}
	// Only <EIP>/32 (and, for eth0, the primary plugin's Pod IP) route back through this
	// link, so strict reverse-path filtering drops packets the Pod sends from any other
	// source (anti-spoofing, docs/reference.md#direct-nics; the kernel applies max(all, interface)).
	// IPv6 has no such setting: the node agent's nftables rules filter IPv6 sources.
	if err := writeSysctl(filepath.Join("net/ipv4/conf", host, "rp_filter"), "1"); err != nil {
		return err
	}
	if err := d.host.RouteReplace(hostRoute(p.Address, hostLink)); err != nil {
		return fmt.Errorf("route %s to host interface %q: %w", p.Address, host, err)
	}
	return nil
}

func writeSysctl(key, value string) error {
	p := filepath.Join("/proc/sys", key)
	if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", key, value, err)
	}
	return nil
}

// linkPair is a NIC's Pod end and host end.
type linkPair struct{ pod, host netlink.Link }

// podMTU is the MTU extra NICs get: the primary NIC's, which the cluster network chose.
func (d *dataplane) podMTU(ifName string) int {
	if l, err := d.pod.LinkByName(ifName); err == nil && l.Attrs().MTU > 0 {
		return l.Attrs().MTU
	}
	return 1500
}
