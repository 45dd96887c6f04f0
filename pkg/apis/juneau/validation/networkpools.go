package validation

import (
	"cmp"
	"slices"
	"strings"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// NetworkPools is the verdict on the AddressPools an ExternalNetwork names: which of them
// it may allocate from, and why each other one is refused (docs/reference.md#externalnetwork).
// The ElasticIP controller allocates from Usable only when nothing is refused, the
// ExternalNetwork controller reports the refusals in the network's Ready condition, and
// the webhook searches only Usable for a requested address.
type NetworkPools struct {
	// Usable are the pools that exist, advertise the way the network does and belong to
	// it, in the order spec.addressPools lists them.
	Usable []*v1alpha1.AddressPool
	// Missing names the pools that do not exist, sorted.
	Missing []string
	// WrongMode are the pools whose advertiseMode differs from the network's type, in
	// spec order.
	WrongMode []*v1alpha1.AddressPool
	// Taken are the pools another ExternalNetwork owns (see PoolOwner), in spec order.
	Taken []TakenPool
}

// TakenPool is a pool a network names but another network owns.
type TakenPool struct {
	Pool, Owner string
}

// Refused reports whether the network names a pool it may not use.
func (np NetworkPools) Refused() bool {
	return len(np.Missing)+len(np.WrongMode)+len(np.Taken) > 0
}

// PoolsOfNetwork decides which pools net may use. pool looks an AddressPool up by name
// (nil when it does not exist); networks are the ExternalNetworks that may also name
// the pools (net itself may be among them).
func PoolsOfNetwork(net *v1alpha1.ExternalNetwork, pool func(name string) *v1alpha1.AddressPool, networks []*v1alpha1.ExternalNetwork) NetworkPools {
	var out NetworkPools
	all := append([]*v1alpha1.ExternalNetwork{net}, networks...)
	for _, name := range net.Spec.AddressPools {
		refused := false
		if owner := PoolOwner(name, all); owner != nil && owner.Name != net.Name {
			out.Taken = append(out.Taken, TakenPool{Pool: name, Owner: owner.Name})
			refused = true
		}
		p := pool(name)
		switch {
		case p == nil:
			out.Missing = append(out.Missing, name)
		case p.Spec.AdvertiseMode != net.Spec.Type:
			out.WrongMode = append(out.WrongMode, p)
		case !refused:
			out.Usable = append(out.Usable, p)
		}
	}
	slices.Sort(out.Missing)
	return out
}

// PoolOwner is the ExternalNetwork a pool belongs to, nil when no network names it.
// A pool belongs to at most one network; should two name it (the webhook refuses the
// second, but one may slip through, e.g. when both are created at once), the oldest
// network (creationTimestamp; a network not created yet counts as the newest) owns it,
// ties broken by name.
func PoolOwner(pool string, networks []*v1alpha1.ExternalNetwork) *v1alpha1.ExternalNetwork {
	var owner *v1alpha1.ExternalNetwork
	for _, n := range networks {
		if slices.Contains(n.Spec.AddressPools, pool) && (owner == nil || olderNetwork(n, owner)) {
			owner = n
		}
	}
	return owner
}

// olderNetwork orders networks by creationTimestamp (unset last), then name.
func olderNetwork(a, b *v1alpha1.ExternalNetwork) bool {
	at, bt := a.CreationTimestamp, b.CreationTimestamp
	if at.IsZero() != bt.IsZero() {
		return bt.IsZero()
	}
	return cmp.Or(at.Compare(bt.Time), strings.Compare(a.Name, b.Name)) < 0
}
