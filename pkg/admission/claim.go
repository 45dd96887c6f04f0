package admission

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/apis/juneau/validation"
)

// claimRules: the spec rules (name == address, immutable spec), the pool exists and
// the address lies inside it.
func (v *Validators) claimRules() rules[*v1alpha1.AllocationClaim] {
	return rules[*v1alpha1.AllocationClaim]{
		create: func(ctx context.Context, c *v1alpha1.AllocationClaim) (field.ErrorList, error) {
			if errs := validation.ValidateAllocationClaim(c); len(errs) > 0 {
				return errs, nil
			}
			name := c.Spec.AddressPool
			pool, err := v.r.pool(ctx, name)
			switch {
			case err != nil:
				return nil, err
			case pool == nil:
				return field.ErrorList{field.Invalid(field.NewPath("spec", "addressPool"), name,
					fmt.Sprintf("AddressPool %q does not exist", name))}, nil
			}
			return validation.ValidateClaimInPool(c, pool), nil
		},
		update: func(_ context.Context, c, old *v1alpha1.AllocationClaim) (field.ErrorList, error) {
			return validation.ValidateAllocationClaimUpdate(c, old), nil
		},
		unchanged: func(c, old *v1alpha1.AllocationClaim) bool { return equality.Semantic.DeepEqual(c.Spec, old.Spec) },
	}
}
