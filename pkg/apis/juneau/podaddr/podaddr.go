// Package podaddr reads the Pod addresses a NetworkInterface records (its Vpc
// addresses, status.addresses, or status.address as written before NICs had several),
// in both families: the attachment controller, the webhook and the node agent ask it
// which address of the Pod an ElasticIP of one family is translated to
// (docs/reference.md#networkinterface).
package podaddr

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// Of returns the NIC's recorded addresses without their prefix length, in the order
// recorded; entries that are no address are skipped.
func Of(nic *v1alpha1.NetworkInterface) []netip.Addr {
	recorded := nic.Status.Addresses
	if len(recorded) == 0 && nic.Status.Address != "" {
		recorded = []string{nic.Status.Address}
	}
	out := make([]netip.Addr, 0, len(recorded))
	for _, s := range recorded {
		a, err := netip.ParseAddr(s)
		if p, perr := netip.ParsePrefix(s); perr == nil {
			a, err = p.Addr(), nil
		}
		if err == nil && a.Zone() == "" {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// OfFamily returns the NIC's first address of the family, and whether it has one.
func OfFamily(nic *v1alpha1.NetworkInterface, family v1alpha1.IPFamily) (netip.Addr, bool) {
	for _, a := range Of(nic) {
		if iprange.FamilyOf(a) == Family(family) {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// Family is the iprange family of an API family (IPv4 when unset).
func Family(f v1alpha1.IPFamily) iprange.Family {
	if f == v1alpha1.IPv6 {
		return iprange.IPv6
	}
	return iprange.IPv4
}

// FirstPerFamily are the first valid address of each family among candidates (unmapped,
// without a zone; anything else skipped), IPv4 first: how the runtimes and the kubelet
// pick a Pod's IPs from what its CNI plugin gave it, and how juneau reads them back.
func FirstPerFamily(candidates []string) []netip.Addr {
	var v4, v6 netip.Addr
	for _, s := range candidates {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			continue
		}
		switch a = a.Unmap(); {
		case a.Is4() && !v4.IsValid():
			v4 = a
		case a.Is6() && !v6.IsValid():
			v6 = a
		}
	}
	var out []netip.Addr
	for _, a := range []netip.Addr{v4, v6} {
		if a.IsValid() {
			out = append(out, a)
		}
	}
	return out
}

// OfPod are the IPs the kubelet reported for the Pod (status.podIPs, then status.podIP),
// one per family, IPv4 first (FirstPerFamily); none for a nil Pod or one without.
func OfPod(pod *corev1.Pod) []netip.Addr {
	if pod == nil {
		return nil
	}
	candidates := make([]string, 0, len(pod.Status.PodIPs)+1)
	for _, ip := range pod.Status.PodIPs {
		candidates = append(candidates, ip.IP)
	}
	return FirstPerFamily(append(candidates, pod.Status.PodIP))
}
