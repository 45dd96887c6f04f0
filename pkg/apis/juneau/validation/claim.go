package validation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
	"github.com/loutres/juneau/pkg/apis/juneau/messages"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// ValidateAllocationClaim checks an AllocationClaim on its own. Its name must be its
// address in canonical form (iprange.ClaimName: an IPv6 address with '-' for ':'): that
// is what makes the API server refuse a second reservation of the same address.
func ValidateAllocationClaim(c *v1alpha1.AllocationClaim) field.ErrorList {
	spec := field.NewPath("spec")
	errs := validateIP(spec.Child("address"), c.Spec.Address)
	if addr, err := iprange.ParseAddr(c.Spec.Address); err == nil {
		if want := iprange.ClaimName(addr); c.Name != want {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), c.Name, fmt.Sprintf(
				"must be %q for spec.address %q: a claim is named after the address it reserves", want, c.Spec.Address)))
		}
	}
	errs = append(errs, ValidateObjectName(spec.Child("addressPool"), c.Spec.AddressPool, "AddressPool")...)
	return append(errs, validateConsumer(spec.Child("consumer"), c.Spec.Consumer)...)
}

func validateConsumer(path *field.Path, c v1alpha1.ConsumerReference) field.ErrorList {
	errs := validateRequired(path.Child("kind"), c.Kind, "the kind of the consumer, such as ElasticIP, is required")
	if c.Namespace != "" {
		errs = append(errs, ValidateLabelName(path.Child("namespace"), c.Namespace, "namespace name", 63)...)
	}
	errs = append(errs, validateRequired(path.Child("name"), c.Name, "the name of the consumer is required")...)
	return append(errs, validateRequired(path.Child("uid"), c.UID,
		"the UID of the consumer is required: it tells a live reservation from an orphan")...)
}

// ValidateAllocationClaimUpdate checks an updated AllocationClaim: its spec is immutable.
func ValidateAllocationClaimUpdate(newClaim, oldClaim *v1alpha1.AllocationClaim) field.ErrorList {
	spec := field.NewPath("spec")
	consumer := spec.Child("consumer")
	n, o := newClaim.Spec, oldClaim.Spec
	errs := ValidateAllocationClaim(newClaim)
	errs = append(errs, validateImmutable(spec.Child("addressPool"), n.AddressPool, o.AddressPool)...)
	errs = append(errs, validateImmutable(spec.Child("address"), n.Address, o.Address)...)
	errs = append(errs, validateImmutable(consumer.Child("kind"), n.Consumer.Kind, o.Consumer.Kind)...)
	errs = append(errs, validateImmutable(consumer.Child("namespace"), n.Consumer.Namespace, o.Consumer.Namespace)...)
	errs = append(errs, validateImmutable(consumer.Child("name"), n.Consumer.Name, o.Consumer.Name)...)
	return append(errs, validateImmutable(consumer.Child("uid"), n.Consumer.UID, o.Consumer.UID)...)
}

// ValidateClaimInPool checks that the claim belongs to pool: spec.addressPool names it
// and spec.address lies inside one of its entries. Unparsable pool entries are skipped
// (ValidateAddressPool reports them); an unparsable address is reported again here so
// the function is complete on its own.
func ValidateClaimInPool(c *v1alpha1.AllocationClaim, pool *v1alpha1.AddressPool) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if c.Spec.AddressPool != pool.Name {
		errs = append(errs, field.Invalid(spec.Child("addressPool"), c.Spec.AddressPool,
			fmt.Sprintf("the claim is checked against AddressPool %q but names another pool", pool.Name)))
	}
	addr, err := iprange.ParseAddr(c.Spec.Address)
	if err != nil {
		return append(errs, field.Invalid(spec.Child("address"), c.Spec.Address, iprange.Reason(err)))
	}
	for _, s := range pool.Spec.Addresses {
		if r, err := iprange.Parse(s); err == nil && r.Contains(addr) {
			return errs
		}
	}
	return append(errs, field.Invalid(spec.Child("address"), c.Spec.Address,
		fmt.Sprintf("is not inside AddressPool %q (%s)", pool.Name, messages.Names(pool.Spec.Addresses))))
}
