package admission

import (
	"context"
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
	"github.com/loutres/juneau/pkg/apis/juneau/quote"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/apis/juneau/validation"
)

// advertisementRules: the spec rules (only nodeName may change), the network exists and
// is of type arp, the address lies in its pools and is no Node's address, the Node
// exists, and no other non-deleting advertisement has the address.
func (v *Validators) advertisementRules() rules[*v1alpha1.ARPAdvertisement] {
	return rules[*v1alpha1.ARPAdvertisement]{
		create: func(ctx context.Context, a *v1alpha1.ARPAdvertisement) (field.ErrorList, error) {
			if errs := validation.ValidateARPAdvertisement(a); len(errs) > 0 {
				return errs, nil
			}
			errs, err := v.advertisementNetwork(ctx, a)
			if err != nil {
				return nil, err
			}
			nodeErrs, err := v.advertisementNode(ctx, a)
			if err != nil {
				return nil, err
			}
			errs = append(errs, nodeErrs...)
			dups, err := confirmed(ctx, noErrors, func(ctx context.Context, live bool) (field.ErrorList, error) {
				ads, err := v.r.allAdvertisements(ctx, live)
				if err != nil {
					return nil, err
				}
				return duplicateAdvertisements(a, ads), nil
			})
			return append(errs, dups...), err
		},
		update: func(ctx context.Context, a, old *v1alpha1.ARPAdvertisement) (field.ErrorList, error) {
			if errs := validation.ValidateARPAdvertisementUpdate(a, old); len(errs) > 0 || a.Spec.NodeName == old.Spec.NodeName {
				return errs, nil
			}
			return v.advertisementNode(ctx, a)
		},
		unchanged: func(a, old *v1alpha1.ARPAdvertisement) bool { return equality.Semantic.DeepEqual(a.Spec, old.Spec) },
	}
}

// advertisementNetwork checks spec.externalNetwork and that spec.address is in its pools.
func (v *Validators) advertisementNetwork(ctx context.Context, a *v1alpha1.ARPAdvertisement) (field.ErrorList, error) {
	spec := field.NewPath("spec")
	name := a.Spec.ExternalNetwork
	net, err := v.r.network(ctx, name)
	switch {
	case err != nil:
		return nil, err
	case net == nil:
		return field.ErrorList{field.Invalid(spec.Child("externalNetwork"), name, fmt.Sprintf("ExternalNetwork %q does not exist", name))}, nil
	case net.Spec.Type != v1alpha1.AdvertiseARP:
		return field.ErrorList{field.Invalid(spec.Child("externalNetwork"), name, fmt.Sprintf(
			"ExternalNetwork %q has type %q: only networks of type %q are advertised by ARP", name, net.Spec.Type, v1alpha1.AdvertiseARP))}, nil
	}
	addr, err := iprange.ParseAddr(a.Spec.Address)
	if err != nil {
		return field.ErrorList{field.Invalid(spec.Child("address"), a.Spec.Address, err.Error())}, nil
	}
	detail, err := v.outsideNetwork(ctx, net, addr)
	if err != nil {
		return nil, err
	}
	if detail != "" {
		return field.ErrorList{field.Invalid(spec.Child("address"), a.Spec.Address, detail)}, nil
	}
	return nil, nil
}

// advertisementNode checks that spec.nodeName exists and that spec.address is not the
// address of a Node. Nodes are read from the cache for the second check: listing every
// Node for each advertisement would be costly, and the pool rules already keep Node
// addresses out of pools.
func (v *Validators) advertisementNode(ctx context.Context, a *v1alpha1.ARPAdvertisement) (field.ErrorList, error) {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	node, err := v.r.node(ctx, a.Spec.NodeName)
	if err != nil {
		return nil, err
	}
	if node == nil {
		errs = append(errs, field.Invalid(spec.Child("nodeName"), a.Spec.NodeName, fmt.Sprintf("Node %q does not exist", a.Spec.NodeName)))
	}
	nodes, err := v.r.allNodes(ctx, false)
	if err != nil {
		return nil, err
	}
	var owners []string
	for _, n := range nodes {
		if len(nodeAddressesIn(n, func(ip netip.Addr) bool { return ip.String() == a.Spec.Address })) > 0 {
			owners = append(owners, n.Name)
		}
	}
	if len(owners) > 0 {
		errs = append(errs, field.Invalid(spec.Child("address"), a.Spec.Address, fmt.Sprintf(
			"is an address of %s %s: a Node's own address is never advertised for an ElasticIP", quote.Plural(len(owners), "Node"), quote.List(owners))))
	}
	return errs, nil
}

// duplicateAdvertisements reports another non-deleting advertisement of the address.
func duplicateAdvertisements(a *v1alpha1.ARPAdvertisement, ads []*v1alpha1.ARPAdvertisement) field.ErrorList {
	var others []string
	for _, o := range ads {
		if o.Name != a.Name && o.DeletionTimestamp == nil && o.Spec.Address == a.Spec.Address {
			others = append(others, o.Name)
		}
	}
	if len(others) == 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("spec", "address"), a.Spec.Address, fmt.Sprintf(
		"is already advertised by %s %s: one address has at most one ARPAdvertisement",
		quote.Plural(len(others), "ARPAdvertisement"), quote.List(others)))}
}
