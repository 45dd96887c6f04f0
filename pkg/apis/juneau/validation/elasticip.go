package validation

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

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
	if e.Spec.RequestedIP != "" {
		errs = append(errs, validateIPv4(spec.Child("requestedIP"), e.Spec.RequestedIP)...)
	}
	return append(errs, ValidateBandwidth(spec.Child("bandwidthMbps"), e.Spec.BandwidthMbps)...)
}

// ValidateBandwidth checks an optional bandwidth limit in Mbit/s.
func ValidateBandwidth(path *field.Path, mbps *int32) field.ErrorList {
	if mbps == nil || (*mbps >= MinBandwidthMbps && *mbps <= MaxBandwidthMbps) {
		return nil
	}
	return field.ErrorList{field.Invalid(path, *mbps, fmt.Sprintf(
		"must be a whole number of Mbit/s from %d to %d", MinBandwidthMbps, MaxBandwidthMbps))}
}

// ValidateElasticIPUpdate checks an updated ElasticIP: externalNetwork and requestedIP
// are immutable; bandwidthMbps may change.
func ValidateElasticIPUpdate(newEIP, oldEIP *v1alpha1.ElasticIP) field.ErrorList {
	spec := field.NewPath("spec")
	errs := ValidateElasticIP(newEIP)
	errs = append(errs, validateImmutable(spec.Child("externalNetwork"), newEIP.Spec.ExternalNetwork, oldEIP.Spec.ExternalNetwork)...)
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
