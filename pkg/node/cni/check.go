package cni

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/loutres/juneau/pkg/apis/juneau/directnic"
)

// check verifies that a direct NIC is set up as ADD left it; the error lists everything
// missing.
func (d *dataplane) check(s nicState) error {
	p := s.plan()
	var missing []error
	podLink, err := d.pod.LinkByName(p.Interface)
	if err != nil {
		missing = append(missing, fmt.Errorf("interface %q is missing in the Pod: %w", p.Interface, err))
	} else {
		missing = append(missing, d.checkPod(s, p, podLink)...)
	}
	hostLink, err := d.host.LinkByName(p.HostInterface)
	if err != nil {
		missing = append(missing, fmt.Errorf("host interface %q is missing: %w", p.HostInterface, err))
		return errors.Join(missing...)
	}
	if podLink != nil && hostLink.Attrs().ParentIndex != podLink.Attrs().Index {
		missing = append(missing, fmt.Errorf("host interface %q is not the peer of %q", p.HostInterface, p.Interface))
	}
	addrs, err := addrsOf(d.host, hostLink, p.Address.Addr())
	if err != nil {
		return err
	}
	if !slices.Contains(addrs, gatewayPrefix(p.Address.Addr())) {
		missing = append(missing, fmt.Errorf("gateway %s is missing on host interface %q", directnic.Gateway(p.Address.Addr()), p.HostInterface))
	}
	routes, err := routesOf(d.host, hostLink, unix.RT_TABLE_MAIN, p.Address.Addr())
	if err != nil {
		return err
	}
	if !hasRoute(routes, route{Dst: p.Address}) {
		missing = append(missing, fmt.Errorf("node route %s dev %q is missing", p.Address, p.HostInterface))
	}
	return errors.Join(missing...)
}

func (d *dataplane) checkPod(s nicState, p nicPlan, podLink netlink.Link) []error {
	var missing []error
	addrs, err := addrsOf(d.pod, podLink, p.Address.Addr())
	if err != nil {
		return []error{err}
	}
	if !slices.Contains(addrs, p.Address) {
		missing = append(missing, fmt.Errorf("address %s is missing on %q in the Pod", p.Address, p.Interface))
	}
	for _, a := range s.ReplacedAddresses {
		if slices.Contains(addrs, a) {
			missing = append(missing, fmt.Errorf("%q in the Pod still carries the primary address %s", p.Interface, a))
		}
	}
	for _, r := range p.Routes {
		routes, err := routesOf(d.pod, podLink, r.kernelTable(), r.Dst.Addr())
		if err != nil {
			return append(missing, err)
		}
		if !hasRoute(routes, r) {
			missing = append(missing, fmt.Errorf("route %s via %s dev %q table %d is missing in the Pod", r.Dst, r.Gw, p.Interface, r.kernelTable()))
		}
	}
	if len(p.Rules) > 0 {
		rules, err := dump(func() ([]netlink.Rule, error) { return d.pod.RuleList(family(p.Address.Addr())) })
		if err != nil {
			return append(missing, fmt.Errorf("list rules in the Pod: %w", err))
		}
		for _, r := range p.Rules {
			if !hasRule(rules, r) {
				missing = append(missing, fmt.Errorf("rule from %s lookup %d priority %d is missing in the Pod", r.From, r.Table, r.Priority))
			}
		}
	}
	return missing
}

// addrsOf lists the addresses of l of the family of like.
func addrsOf(h *netlink.Handle, l netlink.Link, like netip.Addr) ([]netip.Prefix, error) {
	list, err := dump(func() ([]netlink.Addr, error) { return h.AddrList(l, family(like)) })
	if err != nil {
		return nil, fmt.Errorf("list addresses of %q: %w", l.Attrs().Name, err)
	}
	out := make([]netip.Prefix, 0, len(list))
	for _, a := range list {
		if p, ok := prefixOf(a.IPNet); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// routesOf lists the routes of l in table of the family of like.
func routesOf(h *netlink.Handle, l netlink.Link, table int, like netip.Addr) ([]netlink.Route, error) {
	routes, err := dump(func() ([]netlink.Route, error) {
		return h.RouteListFiltered(family(like), &netlink.Route{LinkIndex: l.Attrs().Index, Table: table},
			netlink.RT_FILTER_OIF|netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return nil, fmt.Errorf("list routes of %q table %d: %w", l.Attrs().Name, table, err)
	}
	return routes, nil
}

// hasRoute reports whether routes (already filtered by link and table) hold r.
func hasRoute(routes []netlink.Route, r route) bool {
	for _, k := range routes {
		dst := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		if r.Dst.Addr().Is6() {
			dst = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		}
		if k.Dst != nil {
			var ok bool
			if dst, ok = prefixOf(k.Dst); !ok {
				continue
			}
		}
		if dst != r.Dst {
			continue
		}
		gw, _ := netip.AddrFromSlice(k.Gw)
		if r.Gw.IsValid() != (k.Gw != nil) || (r.Gw.IsValid() && gw.Unmap() != r.Gw) {
			continue
		}
		if r.OnLink && k.Flags&int(netlink.FLAG_ONLINK) == 0 {
			continue
		}
		return true
	}
	return false
}

func hasRule(rules []netlink.Rule, r rule) bool {
	for _, k := range rules {
		if k.Src == nil || k.Table != r.Table || k.Priority != r.Priority {
			continue
		}
		if src, ok := prefixOf(k.Src); ok && src == r.From {
			return true
		}
	}
	return false
}
