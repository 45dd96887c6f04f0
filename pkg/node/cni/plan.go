package cni

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/loutres/juneau/pkg/apis/juneau/directnic"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/node/cniserver"
)

// maxIfNameLen is IFNAMSIZ-1.
const maxIfNameLen = 15

// hostVethPrefix starts the names of the host ends of extra NICs' veths.
const hostVethPrefix = "jn"

// nicPlan is what ADD sets up for one direct NIC.
type nicPlan struct {
	// Interface is the NIC's name inside the Pod.
	Interface string
	ElasticIP string
	// Address is <EIP>/32, or <EIP>/128 for IPv6.
	Address netip.Prefix
	// Primary: the NIC is the interface the primary plugin made (CNI_IFNAME, eth0):
	// its address is replaced. Otherwise juneau makes a veth pair for it.
	Primary bool
	// HostInterface is the node-side end of the NIC's veth: derived for an extra NIC,
	// found at run time for the primary one.
	HostInterface string
	Routes        []route
	Rules         []rule
}

// route is a Pod route in kernel terms.
type route struct {
	Dst    netip.Prefix
	Gw     netip.Addr
	OnLink bool
	Table  int // 0: main
}

// rule is a Pod policy routing rule in kernel terms.
type rule struct {
	From     netip.Prefix
	Table    int
	Priority int
}

// kernelTable maps table 0 (main, in the API) to RT_TABLE_MAIN.
func (r route) kernelTable() int {
	if r.Table == 0 {
		return unix.RT_TABLE_MAIN
	}
	return r.Table
}

// HostVethName is the name of the host end of an extra NIC's veth: "jn" and ten hex
// digits of a hash of container ID and interface, so it is unique per attachment,
// stable across ADD/DEL/CHECK, and within IFNAMSIZ.
func HostVethName(containerID, ifName string) string {
	sum := sha256.Sum256([]byte(containerID + "/" + ifName))
	return hostVethPrefix + hex.EncodeToString(sum[:])[:10]
}

// buildPlan turns the agent's answer into what to set up. ifName is CNI_IFNAME: the
// NIC of that name is the primary one. Every NIC must hold its address.
func buildPlan(containerID, ifName string, nics []cniserver.Interface) ([]nicPlan, error) {
	plans := make([]nicPlan, 0, len(nics))
	seen := map[string]bool{}
	var primary []nicPlan
	// The tables of extra NICs, settled over the Pod's addresses (IPv6 ones are hashed).
	var extra []netip.Addr
	for _, n := range nics {
		if a, err := parseHostPrefix(n.Address); err == nil && n.Interface != ifName {
			extra = append(extra, a.Addr())
		}
	}
	tables := directnic.RouteTables(extra)
	for _, n := range nics {
		if seen[n.Interface] {
			return nil, fmt.Errorf("the node agent named interface %q twice", n.Interface)
		}
		seen[n.Interface] = true
		p, err := planNIC(containerID, ifName, n, tables)
		if err != nil {
			return nil, fmt.Errorf("NIC %q (ElasticIP %q): %w", n.Interface, n.ElasticIP, err)
		}
		if p.Primary {
			primary = append(primary, p)
		} else {
			plans = append(plans, p)
		}
	}
	// The primary NIC first: the Pod keeps working through it while extras are added.
	return append(primary, plans...), nil
}

func planNIC(containerID, ifName string, n cniserver.Interface, tables map[netip.Addr]int64) (nicPlan, error) {
	if !n.Holds {
		return nicPlan{}, fmt.Errorf("does not hold its ElasticIP")
	}
	if err := validIfName(n.Interface); err != nil {
		return nicPlan{}, err
	}
	addr, err := parseHostPrefix(n.Address)
	if err != nil {
		return nicPlan{}, fmt.Errorf("address: %w", err)
	}
	p := nicPlan{
		Interface: n.Interface,
		ElasticIP: n.ElasticIP,
		Address:   addr,
		Primary:   n.Interface == ifName,
	}
	if !p.Primary {
		p.HostInterface = HostVethName(containerID, n.Interface)
	}
	routes, rules := n.Routes, n.Rules
	if len(routes) == 0 && len(rules) == 0 {
		routes, rules = directnic.Routing(p.Primary, addr.Addr(), tables[addr.Addr()])
	}
	for _, r := range routes {
		kr, err := parseRoute(r)
		if err != nil {
			return nicPlan{}, err
		}
		if kr.Dst.Addr().Is4() != addr.Addr().Is4() {
			return nicPlan{}, fmt.Errorf("route to %s is not of the family of the NIC's address %s", kr.Dst, addr)
		}
		p.Routes = append(p.Routes, kr)
	}
	for _, r := range rules {
		kr, err := parseRule(r)
		if err != nil {
			return nicPlan{}, err
		}
		if kr.From.Addr().Is4() != addr.Addr().Is4() {
			return nicPlan{}, fmt.Errorf("rule from %s is not of the family of the NIC's address %s", kr.From, addr)
		}
		p.Rules = append(p.Rules, kr)
	}
	return p, nil
}

func validIfName(name string) error {
	if name == "" || len(name) > maxIfNameLen || name == "." || name == ".." ||
		strings.ContainsAny(name, "/: \t\n") {
		return fmt.Errorf("invalid interface name %q", name)
	}
	return nil
}

// parseHostPrefix accepts "a.b.c.d/32", "<IPv6>/128" or a bare address.
func parseHostPrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		s = netip.PrefixFrom(a, a.BitLen()).String()
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if p.Addr().Is4In6() || p.Addr().Zone() != "" || p.Bits() != p.Addr().BitLen() {
		return netip.Prefix{}, fmt.Errorf("%q is not an IPv4 /32 or an IPv6 /128", s)
	}
	return p, nil
}

func parseRoute(r v1alpha1.Route) (route, error) {
	dst, err := netip.ParsePrefix(r.Destination)
	if err != nil || dst.Addr().Is4In6() || dst.Addr().Zone() != "" {
		return route{}, fmt.Errorf("route destination %q is not an IPv4 or IPv6 prefix", r.Destination)
	}
	out := route{Dst: dst.Masked(), OnLink: r.OnLink}
	if r.Gateway != "" {
		gw, err := netip.ParseAddr(r.Gateway)
		if err != nil || gw.Is4() != dst.Addr().Is4() || gw.Zone() != "" {
			return route{}, fmt.Errorf("route gateway %q is not an address of the family of %s", r.Gateway, r.Destination)
		}
		out.Gw = gw
	}
	t, err := parseTable(r.Table)
	if err != nil {
		return route{}, err
	}
	out.Table = t
	return out, nil
}

func parseRule(r v1alpha1.RoutingRule) (rule, error) {
	from, err := netip.ParsePrefix(r.From)
	if err != nil || from.Addr().Is4In6() || from.Addr().Zone() != "" {
		return rule{}, fmt.Errorf("rule source %q is not an IPv4 or IPv6 prefix", r.From)
	}
	t, err := parseTable(r.Table)
	if err != nil {
		return rule{}, err
	}
	if t == 0 {
		return rule{}, fmt.Errorf("rule from %s needs a table", r.From)
	}
	if r.Priority < 0 {
		return rule{}, fmt.Errorf("rule from %s has negative priority %d", r.From, r.Priority)
	}
	return rule{From: from.Masked(), Table: t, Priority: int(r.Priority)}, nil
}

// parseTable checks a table number fits the kernel's u32 and is not one of the
// tables the kernel reserves (local, default, unspec besides main=0).
func parseTable(t int64) (int, error) {
	switch {
	case t < 0 || t > 0xffffffff:
		return 0, fmt.Errorf("routing table %d out of range", t)
	case t == unix.RT_TABLE_LOCAL || t == unix.RT_TABLE_DEFAULT:
		return 0, fmt.Errorf("routing table %d is reserved by the kernel", t)
	case t == unix.RT_TABLE_MAIN:
		return 0, nil
	}
	return int(t), nil
}
