package cni

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/loutres/juneau/pkg/apis/juneau/directnic"
)

// unplumbPrimary undoes plumbPrimary as far as anything is left. Inside the Pod it takes
// the ElasticIP and the direct routes off and gives the primary plugin's addresses back,
// so the primary plugin's DEL (which runs after juneau's) finds the link as it left it.
// It does not restore the primary plugin's routes: that DEL deletes the link anyway.
func (d *dataplane) unplumbPrimary(s nicState) error {
	p := s.plan()
	var errs []error
	var podLink netlink.Link
	if d.pod != nil {
		l, err := d.pod.LinkByName(p.Interface)
		switch {
		case err == nil:
			podLink = l
		case !isNotFound(err):
			errs = append(errs, fmt.Errorf("interface %q in the Pod: %w", p.Interface, err))
		}
	}
	if podLink != nil {
		errs = append(errs, d.unplumbPod(p, podLink)...)
		for _, a := range s.ReplacedAddresses {
			if err := d.pod.AddrAdd(podLink, podAddr(a)); !exists(err) {
				errs = append(errs, fmt.Errorf("give %s back to %q in the Pod: %w", a, p.Interface, err))
			}
		}
	}

	hostLink, err := d.host.LinkByName(p.HostInterface)
	if err != nil {
		if !isNotFound(err) {
			errs = append(errs, fmt.Errorf("host interface %q: %w", p.HostInterface, err))
		}
		return errors.Join(errs...)
	}
	// The route names the link, so it never removes the route of another Pod that took
	// the same ElasticIP over on this node.
	if err := d.host.RouteDel(hostRoute(p.Address, hostLink)); !gone(err) {
		errs = append(errs, fmt.Errorf("remove route %s dev %q: %w", p.Address, p.HostInterface, err))
	}
	// The gateway address comes off only while the link provably is still this Pod's
	// veth (its peer is the Pod's NIC); a link of the same name could be another Pod's.
	if podLink != nil && hostLink.Attrs().ParentIndex == podLink.Attrs().Index {
		if err := d.host.AddrDel(hostLink, gatewayAddr(p.Address.Addr())); !gone(err) {
			errs = append(errs, fmt.Errorf("remove %s from %q: %w", directnic.Gateway(p.Address.Addr()), p.HostInterface, err))
		}
	}
	return errors.Join(errs...)
}

// unplumbExtra removes the extra NIC: its rules in the Pod and its veth pair (the host
// end's name is derived from this attachment alone, so it is always ours).
func (d *dataplane) unplumbExtra(s nicState) error {
	p := s.plan()
	var errs []error
	if d.pod != nil {
		for _, r := range p.Rules {
			if err := d.pod.RuleDel(podRule(r)); !gone(err) {
				errs = append(errs, fmt.Errorf("remove rule from %s lookup %d in the Pod: %w", r.From, r.Table, err))
			}
		}
		if l, err := d.pod.LinkByName(p.Interface); err == nil {
			// Deleting the Pod end deletes the pair; only a veth can be juneau's.
			if _, ok := l.(*netlink.Veth); ok {
				if err := d.pod.LinkDel(l); !gone(err) {
					errs = append(errs, fmt.Errorf("remove %q from the Pod: %w", p.Interface, err))
				}
			}
		} else if !isNotFound(err) {
			errs = append(errs, fmt.Errorf("interface %q in the Pod: %w", p.Interface, err))
		}
	}
	if l, err := d.host.LinkByName(p.HostInterface); err == nil {
		if err := d.host.LinkDel(l); !gone(err) {
			errs = append(errs, fmt.Errorf("remove host interface %q: %w", p.HostInterface, err))
		}
	} else if !isNotFound(err) {
		errs = append(errs, fmt.Errorf("host interface %q: %w", p.HostInterface, err))
	}
	return errors.Join(errs...)
}

// unplumbPod removes the direct routes, rules and the ElasticIP from a Pod link.
func (d *dataplane) unplumbPod(p nicPlan, podLink netlink.Link) []error {
	var errs []error
	for _, r := range p.Rules {
		if err := d.pod.RuleDel(podRule(r)); !gone(err) {
			errs = append(errs, fmt.Errorf("remove rule from %s lookup %d in the Pod: %w", r.From, r.Table, err))
		}
	}
	for _, r := range p.Routes {
		if err := d.pod.RouteDel(podRoute(r, podLink)); !gone(err) {
			errs = append(errs, fmt.Errorf("remove route %s table %d in the Pod: %w", r.Dst, r.kernelTable(), err))
		}
	}
	if err := d.pod.AddrDel(podLink, &netlink.Addr{IPNet: ipNet(p.Address)}); !gone(err) {
		errs = append(errs, fmt.Errorf("remove %s from %q in the Pod: %w", p.Address, p.Interface, err))
	}
	return errs
}
