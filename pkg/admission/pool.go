package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
	"github.com/loutres/juneau/pkg/apis/juneau/messages"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/apis/juneau/validation"
)

// addressPoolRules: the spec rules (formats, ranges, append-only addresses, immutable
// advertiseMode), then no overlap with another pool and no Node address inside. Only
// entries added by the request are checked against other objects, so a pool that
// predates a conflicting object can still be extended or relabelled. Deletion is
// refused while addresses are reserved from the pool (poolReservations).
func (v *Validators) addressPoolRules() rules[*v1alpha1.AddressPool] {
	return rules[*v1alpha1.AddressPool]{
		create: func(ctx context.Context, p *v1alpha1.AddressPool) (field.ErrorList, error) {
			if errs := validation.ValidateAddressPool(p); len(errs) > 0 {
				return errs, nil
			}
			return v.poolNeighbours(ctx, p, 0)
		},
		update: func(ctx context.Context, p, old *v1alpha1.AddressPool) (field.ErrorList, error) {
			if errs := validation.ValidateAddressPoolUpdate(p, old); len(errs) > 0 {
				return errs, nil
			}
			return v.poolNeighbours(ctx, p, len(old.Spec.Addresses))
		},
		remove:    v.poolReservations,
		unchanged: func(p, old *v1alpha1.AddressPool) bool { return equality.Semantic.DeepEqual(p.Spec, old.Spec) },
	}
}

// poolReservationsShown is how many reservations a refused deletion names.
const poolReservationsShown = 5

// poolReservations says why a pool may not be deleted: addresses are reserved from it
// (docs/resources.md#addresspool). Its ElasticIPs keep those addresses and their
// traffic; deleting the pool under them would leave ElasticIPs whose reservation names
// a pool that no longer exists. Claims are not cached here, so this asks the API server
// for a few claims of the pool by the selectable field spec.addressPool.
func (v *Validators) poolReservations(ctx context.Context, p *v1alpha1.AddressPool) (string, error) {
	claims, more, err := v.r.claimsOfPool(ctx, p.Name, poolReservationsShown)
	if err != nil || len(claims) == 0 {
		return "", err
	}
	var held []string
	for _, c := range claims {
		held = append(held, fmt.Sprintf("%s (%s)", c.Spec.Address, c.Spec.Consumer.Describe()))
	}
	slices.Sort(held)
	list := strings.Join(held, ", ")
	if more {
		list += " and more"
	}
	return fmt.Sprintf("addresses are still reserved from it: %s; release them first (delete the ElasticIPs that hold them, or the Pods of automatic ElasticIPs), then delete the pool",
		list), nil
}

// poolNeighbours checks the entries of p from index from on against the other pools and
// the Nodes, in the cache and then live: pools and Nodes change rarely, and a pool is
// written more rarely still, so the live lists cost little.
func (v *Validators) poolNeighbours(ctx context.Context, p *v1alpha1.AddressPool, from int) (field.ErrorList, error) {
	return confirmed(ctx, noErrors, func(ctx context.Context, live bool) (field.ErrorList, error) {
		pools, err := v.r.allPools(ctx, live)
		if err != nil {
			return nil, err
		}
		nodes, err := v.r.allNodes(ctx, live)
		if err != nil {
			return nil, err
		}
		return poolConflicts(p, from, pools, nodes), nil
	})
}

// poolConflicts reports the entries of p, from index from on, that overlap another pool
// (naming it) or contain a Node's address (naming the Node and the address).
func poolConflicts(p *v1alpha1.AddressPool, from int, pools []*v1alpha1.AddressPool, nodes []*corev1.Node) field.ErrorList {
	path := field.NewPath("spec", "addresses")
	nodes = slices.Clone(nodes)
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	var errs field.ErrorList
	for i := from; i < len(p.Spec.Addresses); i++ {
		entry := p.Spec.Addresses[i]
		one := &v1alpha1.AddressPool{Spec: v1alpha1.AddressPoolSpec{Addresses: []string{entry}}}
		one.Name = p.Name
		for _, e := range validation.ValidatePoolsDisjoint(one, pools) {
			e.Field = path.Index(i).String()
			errs = append(errs, e)
		}
		r, err := iprange.Parse(entry)
		if err != nil {
			continue
		}
		var hits []string
		for _, n := range nodes {
			for _, a := range nodeAddressesIn(n, r.Contains) {
				hits = append(hits, fmt.Sprintf("%s of Node %q", a, n.Name))
			}
		}
		if len(hits) > 0 {
			shown := hits[:min(len(hits), messages.MaxNamed)]
			detail := "contains " + strings.Join(shown, ", ")
			if len(hits) > len(shown) {
				detail += fmt.Sprintf(" and %d more Node addresses", len(hits)-len(shown))
			}
			errs = append(errs, field.Invalid(path.Index(i), entry,
				detail+": a Node's address can never be handed out as an ElasticIP"))
		}
	}
	return errs
}

func noErrors(errs field.ErrorList) bool { return len(errs) == 0 }
