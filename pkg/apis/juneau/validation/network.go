package validation

import (
	"fmt"

	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// ValidateExternalNetwork checks an ExternalNetwork on its own. Whether the named pools
// exist and match spec.type is a cross-object check left to the caller. namespaceSelector
// may change at any time; it must be a valid label selector (tenancy.Refusal admits no
// namespace through one that is not).
func ValidateExternalNetwork(n *v1alpha1.ExternalNetwork) field.ErrorList {
	spec := field.NewPath("spec")
	errs := validateAdvertiseMode(spec.Child("type"), n.Spec.Type)
	errs = append(errs, validatePoolNames(spec.Child("addressPools"), n.Spec.AddressPools)...)
	if n.Spec.NamespaceSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(n.Spec.NamespaceSelector,
			metav1validation.LabelSelectorValidationOptions{}, spec.Child("namespaceSelector"))...)
	}
	return errs
}

// ValidateExternalNetworkUpdate checks an updated ExternalNetwork: type is immutable and
// addressPools is append-only.
func ValidateExternalNetworkUpdate(newNet, oldNet *v1alpha1.ExternalNetwork) field.ErrorList {
	spec := field.NewPath("spec")
	errs := ValidateExternalNetwork(newNet)
	errs = append(errs, validateImmutable(spec.Child("type"), string(newNet.Spec.Type), string(oldNet.Spec.Type))...)
	return append(errs, validateAppendOnly(spec.Child("addressPools"), newNet.Spec.AddressPools, oldNet.Spec.AddressPools)...)
}

func validatePoolNames(path *field.Path, names []string) field.ErrorList {
	if len(names) == 0 {
		return field.ErrorList{field.Required(path, "at least one AddressPool name is required")}
	}
	var errs field.ErrorList
	seen := make(map[string]int, len(names))
	for i, name := range names {
		if j, dup := seen[name]; dup {
			errs = append(errs, duplicate(path.Index(i), name, fmt.Sprintf("already listed at %s", path.Index(j))))
			continue
		}
		seen[name] = i
		errs = append(errs, ValidateObjectName(path.Index(i), name, "AddressPool")...)
	}
	return errs
}
