package admission

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loutres/juneau/pkg/apis/juneau/messages"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/apis/juneau/validation"
)

// externalNetworkRules: the spec rules (append-only addressPools, immutable type), every
// added pool exists, matches spec.type and belongs to no other network; deletion is
// refused while a non-deleting ElasticIP names the network.
func (v *Validators) externalNetworkRules() rules[*v1alpha1.ExternalNetwork] {
	return rules[*v1alpha1.ExternalNetwork]{
		create: func(ctx context.Context, n *v1alpha1.ExternalNetwork) (field.ErrorList, error) {
			if errs := validation.ValidateExternalNetwork(n); len(errs) > 0 {
				return errs, nil
			}
			return v.networkPools(ctx, n, 0)
		},
		update: func(ctx context.Context, n, old *v1alpha1.ExternalNetwork) (field.ErrorList, error) {
			if errs := validation.ValidateExternalNetworkUpdate(n, old); len(errs) > 0 {
				return errs, nil
			}
			return v.networkPools(ctx, n, len(old.Spec.AddressPools))
		},
		remove:    v.networkReferrers,
		unchanged: func(n, old *v1alpha1.ExternalNetwork) bool { return equality.Semantic.DeepEqual(n.Spec, old.Spec) },
	}
}

// networkPools checks spec.addressPools from index from on.
func (v *Validators) networkPools(ctx context.Context, n *v1alpha1.ExternalNetwork, from int) (field.ErrorList, error) {
	path := field.NewPath("spec", "addressPools")
	var errs field.ErrorList
	for i := from; i < len(n.Spec.AddressPools); i++ {
		name := n.Spec.AddressPools[i]
		pool, err := v.r.pool(ctx, name)
		if err != nil {
			return nil, err
		}
		switch {
		case pool == nil:
			errs = append(errs, field.Invalid(path.Index(i), name, fmt.Sprintf("AddressPool %q does not exist", name)))
		case pool.DeletionTimestamp != nil:
			errs = append(errs, field.Invalid(path.Index(i), name, fmt.Sprintf("AddressPool %q is being deleted", name)))
		case pool.Spec.AdvertiseMode != n.Spec.Type:
			errs = append(errs, field.Invalid(path.Index(i), name, fmt.Sprintf(
				"AddressPool %q has advertiseMode %q, which does not match this network's type %q",
				name, pool.Spec.AdvertiseMode, n.Spec.Type)))
		}
	}
	owned, err := confirmed(ctx, noErrors, func(ctx context.Context, live bool) (field.ErrorList, error) {
		nets, err := v.r.allNetworks(ctx, live)
		if err != nil {
			return nil, err
		}
		return poolOwners(n, from, nets), nil
	})
	return append(errs, owned...), err
}

// poolOwners reports the pools of n, from index from on, that another network already
// lists, naming that network.
func poolOwners(n *v1alpha1.ExternalNetwork, from int, nets []*v1alpha1.ExternalNetwork) field.ErrorList {
	path := field.NewPath("spec", "addressPools")
	var errs field.ErrorList
	for i := from; i < len(n.Spec.AddressPools); i++ {
		name := n.Spec.AddressPools[i]
		var owners []string
		for _, other := range nets {
			if other.Name != n.Name && slices.Contains(other.Spec.AddressPools, name) {
				owners = append(owners, other.Name)
			}
		}
		if len(owners) > 0 {
			errs = append(errs, field.Invalid(path.Index(i), name, fmt.Sprintf(
				"AddressPool %q already belongs to %s %s: a pool belongs to one network only",
				name, messages.Plural(len(owners), "ExternalNetwork"), messages.Names(owners))))
		}
	}
	return errs
}

// networkReferrers says why a network may not be deleted: the non-deleting ElasticIPs
// that name it.
func (v *Validators) networkReferrers(ctx context.Context, n *v1alpha1.ExternalNetwork) (string, error) {
	refs, err := confirmed(ctx, func(r []string) bool { return len(r) == 0 },
		func(ctx context.Context, live bool) ([]string, error) {
			eips, err := v.r.elasticIPsOn(ctx, n.Name, live)
			if err != nil {
				return nil, err
			}
			var refs []string
			for _, e := range eips {
				if e.DeletionTimestamp == nil {
					refs = append(refs, nsName(e.Namespace, e.Name))
				}
			}
			return refs, nil
		})
	if err != nil || len(refs) == 0 {
		return "", err
	}
	return fmt.Sprintf("%s %s still %s it in spec.externalNetwork; delete %s first",
		messages.Plural(len(refs), "ElasticIP"), messages.Names(refs), messages.Verb(len(refs), "names", "name"), messages.Verb(len(refs), "it", "them")), nil
}
