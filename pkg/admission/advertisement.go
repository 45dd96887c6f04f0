package admission

import (
	"context"
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
	"github.com/loutres/juneau/pkg/apis/juneau/messages"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/apis/juneau/validation"
)

// adSpec is the spec both advertisement kinds share.
type adSpec struct {
	ExternalNetwork, Address, NodeName string
}

// adKind is what differs between the two advertisement kinds for their rules.
type adKind struct {
	kind string
	// network is the only network type whose addresses this kind advertises; how says
	// how, for the message.
	network v1alpha1.AdvertiseMode
	how     string
	// others lists the advertisements of the kind with an address (cache, or live).
	others func(ctx context.Context, address string, live bool) ([]adSpecOf, error)
}

// adSpecOf is an advertisement as the duplicate check sees it.
type adSpecOf struct {
	name     string
	deleting bool
	spec     adSpec
}

// advertisementRules: the spec rules (only nodeName may change), the network exists and
// is of the kind's type, the address lies in its pools and is no Node's address, the
// Node exists, and no other non-deleting advertisement of the kind has the address.
// ARPAdvertisements (arp networks) and BGPAdvertisements (bgp networks) follow them alike.
func advertisementRules[T any, PT interface {
	*T
	object
}](v *Validators, k adKind, spec func(PT) adSpec, fullSpec func(PT) any, validate func(PT) field.ErrorList, validateUpdate func(PT, PT) field.ErrorList) rules[PT] {
	return rules[PT]{
		create: func(ctx context.Context, a PT) (field.ErrorList, error) {
			if errs := validate(a); len(errs) > 0 {
				return errs, nil
			}
			s := spec(a)
			errs, err := v.advertisementNetwork(ctx, k, s)
			if err != nil {
				return nil, err
			}
			nodeErrs, err := v.advertisementNode(ctx, s)
			if err != nil {
				return nil, err
			}
			errs = append(errs, nodeErrs...)
			dups, err := confirmed(ctx, noErrors, func(ctx context.Context, live bool) (field.ErrorList, error) {
				ads, err := k.others(ctx, s.Address, live)
				if err != nil {
					return nil, err
				}
				return duplicateAdvertisements(k, a.GetName(), s, ads), nil
			})
			return append(errs, dups...), err
		},
		update: func(ctx context.Context, a, old PT) (field.ErrorList, error) {
			if errs := validateUpdate(a, old); len(errs) > 0 || spec(a).NodeName == spec(old).NodeName {
				return errs, nil
			}
			return v.advertisementNode(ctx, spec(a))
		},
		unchanged: func(a, old PT) bool { return equality.Semantic.DeepEqual(fullSpec(a), fullSpec(old)) },
	}
}

func (v *Validators) arpAdvertisementRules() rules[*v1alpha1.ARPAdvertisement] {
	k := adKind{kind: "ARPAdvertisement", network: v1alpha1.AdvertiseARP, how: "advertised by ARP",
		others: func(ctx context.Context, address string, live bool) ([]adSpecOf, error) {
			ads, err := v.r.advertisementsAt(ctx, address, live)
			out := make([]adSpecOf, len(ads))
			for i, a := range ads {
				out[i] = adSpecOf{a.Name, a.DeletionTimestamp != nil, arpSpec(a)}
			}
			return out, err
		}}
	return advertisementRules(v, k, arpSpec, func(a *v1alpha1.ARPAdvertisement) any { return a.Spec },
		validation.ValidateARPAdvertisement, validation.ValidateARPAdvertisementUpdate)
}

func (v *Validators) bgpAdvertisementRules() rules[*v1alpha1.BGPAdvertisement] {
	k := adKind{kind: "BGPAdvertisement", network: v1alpha1.AdvertiseBGP, how: "announced by BGP",
		others: func(ctx context.Context, address string, live bool) ([]adSpecOf, error) {
			ads, err := v.r.bgpAdvertisementsAt(ctx, address, live)
			out := make([]adSpecOf, len(ads))
			for i, a := range ads {
				out[i] = adSpecOf{a.Name, a.DeletionTimestamp != nil, bgpSpec(a)}
			}
			return out, err
		}}
	return advertisementRules(v, k, bgpSpec, func(a *v1alpha1.BGPAdvertisement) any { return a.Spec },
		validation.ValidateBGPAdvertisement, validation.ValidateBGPAdvertisementUpdate)
}

func arpSpec(a *v1alpha1.ARPAdvertisement) adSpec {
	return adSpec{a.Spec.ExternalNetwork, a.Spec.Address, a.Spec.NodeName}
}

func bgpSpec(a *v1alpha1.BGPAdvertisement) adSpec {
	return adSpec{a.Spec.ExternalNetwork, a.Spec.Address, a.Spec.NodeName}
}

// advertisementNetwork checks spec.externalNetwork and that spec.address is in its pools.
func (v *Validators) advertisementNetwork(ctx context.Context, k adKind, a adSpec) (field.ErrorList, error) {
	spec := field.NewPath("spec")
	name := a.ExternalNetwork
	net, err := v.r.network(ctx, name)
	switch {
	case err != nil:
		return nil, err
	case net == nil:
		return field.ErrorList{field.Invalid(spec.Child("externalNetwork"), name, fmt.Sprintf("ExternalNetwork %q does not exist", name))}, nil
	case net.Spec.Type != k.network:
		return field.ErrorList{field.Invalid(spec.Child("externalNetwork"), name, fmt.Sprintf(
			"ExternalNetwork %q has type %q: only networks of type %q are %s", name, net.Spec.Type, k.network, k.how))}, nil
	}
	addr, err := iprange.ParseAddr(a.Address)
	if err != nil {
		return field.ErrorList{field.Invalid(spec.Child("address"), a.Address, err.Error())}, nil
	}
	detail, err := v.outsideNetwork(ctx, net, addr)
	if err != nil {
		return nil, err
	}
	if detail != "" {
		return field.ErrorList{field.Invalid(spec.Child("address"), a.Address, detail)}, nil
	}
	return nil, nil
}

// advertisementNode checks that spec.nodeName exists and that spec.address is not the
// address of a Node. Nodes are read from the cache for the second check: listing every
// Node for each advertisement would be costly, and the pool rules already keep Node
// addresses out of pools.
func (v *Validators) advertisementNode(ctx context.Context, a adSpec) (field.ErrorList, error) {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	node, err := v.r.node(ctx, a.NodeName)
	if err != nil {
		return nil, err
	}
	if node == nil {
		errs = append(errs, field.Invalid(spec.Child("nodeName"), a.NodeName, fmt.Sprintf("Node %q does not exist", a.NodeName)))
	}
	nodes, err := v.r.allNodes(ctx, false)
	if err != nil {
		return nil, err
	}
	var owners []string
	for _, n := range nodes {
		if len(nodeAddressesIn(n, func(ip netip.Addr) bool { return ip.String() == a.Address })) > 0 {
			owners = append(owners, n.Name)
		}
	}
	if len(owners) > 0 {
		errs = append(errs, field.Invalid(spec.Child("address"), a.Address, fmt.Sprintf(
			"is an address of %s %s: a Node's own address is never advertised for an ElasticIP", messages.Plural(len(owners), "Node"), messages.Names(owners))))
	}
	return errs, nil
}

// duplicateAdvertisements reports another non-deleting advertisement of the kind with
// the address.
func duplicateAdvertisements(k adKind, name string, a adSpec, ads []adSpecOf) field.ErrorList {
	var others []string
	for _, o := range ads {
		if o.name != name && !o.deleting && o.spec.Address == a.Address {
			others = append(others, o.name)
		}
	}
	if len(others) == 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("spec", "address"), a.Address, fmt.Sprintf(
		"is already advertised by %s %s: one address has at most one %s",
		messages.Plural(len(others), k.kind), messages.Names(others), k.kind))}
}
