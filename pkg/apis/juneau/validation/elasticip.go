package validation

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// Bounds of spec.bandwidthMbps and of the eip-bandwidth Pod annotation, in Mbit/s.
const (
	MinBandwidthMbps = 1
	MaxBandwidthMbps = 100000
)

// ValidateElasticIP checks an ElasticIP on its own.
func ValidateElasticIP(e *v1alpha1.ElasticIP) field.ErrorList {
	spec := field.NewPath("spec")
	errs := ValidateObjectName(spec.Child("externalNetwork"), e.Spec.ExternalNetwork, "ExternalNetwork")
	family, famErrs := validateIPFamily(spec.Child("ipFamily"), e.Spec.IPFamily)
	errs = append(errs, famErrs...)
	if e.Spec.RequestedIP != "" {
		errs = append(errs, validateRequestedIP(spec.Child("requestedIP"), e.Spec.RequestedIP, family, len(famErrs) == 0)...)
	}
	return append(errs, ValidateBandwidth(spec.Child("bandwidthMbps"), e.Spec.BandwidthMbps)...)
}

// Family is the address family of an ElasticIP's spec.ipFamily (IPv4 when unset);
// false for an unknown value.
func Family(f v1alpha1.IPFamily) (iprange.Family, bool) {
	switch f {
	case "", v1alpha1.IPv4:
		return iprange.IPv4, true
	case v1alpha1.IPv6:
		return iprange.IPv6, true
	}
	return 0, false
}

func validateIPFamily(path *field.Path, f v1alpha1.IPFamily) (iprange.Family, field.ErrorList) {
	family, ok := Family(f)
	if !ok {
		return 0, field.ErrorList{field.NotSupported(path, f, []v1alpha1.IPFamily{v1alpha1.IPv4, v1alpha1.IPv6})}
	}
	return family, nil
}

// validateRequestedIP checks a requestedIP: a canonical address of the ElasticIP's
// family (checked only when that family is known).
func validateRequestedIP(path *field.Path, value string, family iprange.Family, known bool) field.ErrorList {
	a, err := iprange.ParseAddr(value)
	if err != nil {
		return field.ErrorList{field.Invalid(path, value, iprange.Reason(err))}
	}
	if got := iprange.FamilyOf(a); known && got != family {
		return field.ErrorList{field.Invalid(path, value, fmt.Sprintf(
			"is an %s address but spec.ipFamily is %s: set spec.ipFamily to %s or request an %s address", got, family, got, family))}
	}
	return nil
}

// ValidateBandwidth checks an optional bandwidth limit in Mbit/s.
func ValidateBandwidth(path *field.Path, mbps *int32) field.ErrorList {
	if mbps == nil || (*mbps >= MinBandwidthMbps && *mbps <= MaxBandwidthMbps) {
		return nil
	}
	return field.ErrorList{field.Invalid(path, *mbps, fmt.Sprintf(
		"must be a whole number of Mbit/s from %d to %d", MinBandwidthMbps, MaxBandwidthMbps))}
}

// ValidateElasticIPUpdate checks an updated ElasticIP: externalNetwork, ipFamily (unset
// counts as IPv4) and requestedIP are immutable; bandwidthMbps may change.
func ValidateElasticIPUpdate(newEIP, oldEIP *v1alpha1.ElasticIP) field.ErrorList {
	spec := field.NewPath("spec")
	errs := ValidateElasticIP(newEIP)
	errs = append(errs, validateImmutable(spec.Child("externalNetwork"), newEIP.Spec.ExternalNetwork, oldEIP.Spec.ExternalNetwork)...)
	if n, o := newEIP.Spec.Family(), oldEIP.Spec.Family(); n != o {
		errs = append(errs, field.Invalid(spec.Child("ipFamily"), newEIP.Spec.IPFamily, fmt.Sprintf("field is immutable: it was %q", o)))
	}
	return append(errs, validateImmutable(spec.Child("requestedIP"), newEIP.Spec.RequestedIP, oldEIP.Spec.RequestedIP)...)
}

// ValidateElasticIPAttachment checks an ElasticIPAttachment on its own.
func ValidateElasticIPAttachment(a *v1alpha1.ElasticIPAttachment) field.ErrorList {
	spec := field.NewPath("spec")
	errs := ValidateLocalName(spec.Child("elasticIPRef", "name"), a.Spec.ElasticIPRef.Name, "ElasticIP")
	return append(errs, validateNICReference(spec.Child("targetRef", "networkInterfaceName"), a.Spec.TargetRef.NetworkInterfaceName)...)
}

// validateNICReference checks the name of a NetworkInterface: an object name of the
// form <pod>.<interface>, as the controller names every NIC.
func validateNICReference(path *field.Path, name string) field.ErrorList {
	if errs := ValidateLocalName(path, name, "NetworkInterface"); len(errs) > 0 {
		return errs
	}
	dot := strings.LastIndexByte(name, '.')
	if dot < 0 {
		return field.ErrorList{field.Invalid(path, name,
			"must name a NetworkInterface, whose name is <pod>.<interface> such as nginx.eth0")}
	}
	if len(name[dot+1:]) > MaxInterfaceNameLength {
		return field.ErrorList{field.Invalid(path, name, fmt.Sprintf(
			"must name a NetworkInterface <pod>.<interface>, and the interface part %q is longer than %d characters",
			name[dot+1:], MaxInterfaceNameLength))}
	}
	return nil
}

// ValidateElasticIPAttachmentUpdate checks an updated ElasticIPAttachment: its spec is
// immutable.
func ValidateElasticIPAttachmentUpdate(newAtt, oldAtt *v1alpha1.ElasticIPAttachment) field.ErrorList {
	spec := field.NewPath("spec")
	errs := ValidateElasticIPAttachment(newAtt)
	errs = append(errs, validateImmutable(spec.Child("elasticIPRef", "name"),
		newAtt.Spec.ElasticIPRef.Name, oldAtt.Spec.ElasticIPRef.Name)...)
	return append(errs, validateImmutable(spec.Child("targetRef", "networkInterfaceName"),
		newAtt.Spec.TargetRef.NetworkInterfaceName, oldAtt.Spec.TargetRef.NetworkInterfaceName)...)
}
