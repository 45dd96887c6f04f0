package cni

import (
	"fmt"
	"net"
	"net/netip"

	cnitypes "github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"golang.org/x/sys/unix"

	"github.com/loutres/juneau/pkg/apis/juneau/directnic"
)

// plumbed is a direct NIC after ADD set it up.
type plumbed struct {
	nicPlan
	// PodMAC and HostMAC are the veth ends' hardware addresses (extra NICs).
	PodMAC, HostMAC string
}

// rewriteResult returns the result ADD prints: the primary plugin's result with the
// primary NIC's addresses of the ElasticIP's family replaced by its ElasticIP (which
// thus becomes the Pod IP of that family) and its routes of that family by the direct
// ones, and every extra NIC added as a host and a Pod interface. prev is not modified.
func rewriteResult(prev *current.Result, ifName, sandbox string, nics []plumbed) (*current.Result, error) {
	res := copyResult(prev)
	for _, n := range nics {
		if n.Primary {
			if err := rewritePrimary(res, ifName, n); err != nil {
				return nil, err
			}
			continue
		}
		// An extra NIC is listed as interfaces only. Its address stays out of ips:
		// runtimes take the Pod IPs from ips (the Pod IP must stay the primary NIC's),
		// and primary plugins' CHECK validates every listed IP on their own interface
		// (ptp does). The address is published in the NetworkInterface's status.
		res.Interfaces = append(res.Interfaces, &current.Interface{Name: n.HostInterface, Mac: n.HostMAC})
		res.Interfaces = append(res.Interfaces, &current.Interface{Name: n.Interface, Mac: n.PodMAC, Sandbox: sandbox})
	}
	return res, nil
}

// primaryAddresses are the addresses the primary plugin gave the Pod's interface ifName
// (those naming no interface included, as runtimes read them): what the runtime reports
// as the Pod's IPs, which the node agent writes into its NetworkInterface before the
// kubelet reports them (docs/reference.md#networkinterface).
func primaryAddresses(prev *current.Result, ifName string) []string {
	var out []string
	for _, ip := range prev.IPs {
		i := ip.Interface
		if i != nil && (*i < 0 || *i >= len(prev.Interfaces) || prev.Interfaces[*i].Name != ifName || prev.Interfaces[*i].Sandbox == "") {
			continue
		}
		out = append(out, ip.Address.IP.String())
	}
	return out
}

func rewritePrimary(res *current.Result, ifName string, n plumbed) error {
	idx := -1
	for i, iface := range res.Interfaces {
		if iface.Name == ifName && iface.Sandbox != "" {
			idx = i
			break
		}
	}
	if idx < 0 {
		return fmt.Errorf("the primary plugin's result lists no interface %s inside the Pod", quote(ifName))
	}
	v4 := n.Address.Addr().Is4()
	eip := &current.IPConfig{
		Interface: current.Int(idx),
		Address:   *ipNet(n.Address),
		Gateway:   directnic.Gateway(n.Address.Addr()).AsSlice(),
	}
	// The ElasticIP takes the place of the first address it replaces, so the Pod's
	// first IP keeps its family (runtimes report the first as status.podIP); with
	// nothing replaced it comes first for IPv4, last for IPv6.
	var ips []*current.IPConfig
	placed := false
	for _, ip := range res.IPs {
		onNIC := ip.Interface == nil || *ip.Interface == idx
		if onNIC && (ip.Address.IP.To4() != nil) == v4 {
			if !placed {
				ips, placed = append(ips, eip), true
			}
			continue // replaced by the ElasticIP
		}
		ips = append(ips, ip)
	}
	switch {
	case placed:
	case v4:
		ips = append([]*current.IPConfig{eip}, ips...)
	default:
		ips = append(ips, eip)
	}
	res.IPs = ips

	var routes []*cnitypes.Route
	for _, r := range res.Routes {
		if (r.Dst.IP.To4() != nil) == v4 && (r.Table == nil || *r.Table == 0 || *r.Table == unix.RT_TABLE_MAIN) {
			continue // the primary plugin's routes of this family no longer exist in the Pod
		}
		routes = append(routes, r)
	}
	res.Routes = append(routes, resultRoutes(n.Routes)...)
	return nil
}

func resultRoutes(rs []route) []*cnitypes.Route {
	out := make([]*cnitypes.Route, 0, len(rs))
	for _, r := range rs {
		cr := &cnitypes.Route{Dst: *ipNet(r.Dst)}
		if r.Gw.IsValid() {
			cr.GW = r.Gw.AsSlice()
		}
		if r.Table != 0 {
			cr.Table = current.Int(r.Table)
		}
		out = append(out, cr)
	}
	return out
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// copyResult deep-copies what rewriteResult changes.
func copyResult(r *current.Result) *current.Result {
	out := &current.Result{CNIVersion: r.CNIVersion, DNS: r.DNS}
	for _, i := range r.Interfaces {
		out.Interfaces = append(out.Interfaces, i.Copy())
	}
	for _, ip := range r.IPs {
		out.IPs = append(out.IPs, ip.Copy())
	}
	for _, rt := range r.Routes {
		out.Routes = append(out.Routes, rt.Copy())
	}
	return out
}
