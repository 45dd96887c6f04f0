package validation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// ValidateNetworkInterface checks a NetworkInterface on its own: it is named
// <podRef.name>.<podRef.interface>.
func ValidateNetworkInterface(n *v1alpha1.NetworkInterface) field.ErrorList {
	spec := field.NewPath("spec")
	podRef := spec.Child("podRef")
	errs := ValidateObjectName(podRef.Child("name"), n.Spec.PodRef.Name, "Pod")
	errs = append(errs, validateRequired(podRef.Child("uid"), n.Spec.PodRef.UID, "the UID of the Pod is required")...)
	errs = append(errs, ValidateLabelName(podRef.Child("interface"), n.Spec.PodRef.Interface,
		"interface name", MaxInterfaceNameLength)...)
	if n.Spec.PodRef.Name != "" && n.Spec.PodRef.Interface != "" {
		if want := v1alpha1.NetworkInterfaceName(n.Spec.PodRef.Name, n.Spec.PodRef.Interface); n.Name != want {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), n.Name, fmt.Sprintf(
				"must be %q: a NetworkInterface is named <spec.podRef.name>.<spec.podRef.interface>", want)))
		}
	}
	if n.Spec.NodeName != "" {
		errs = append(errs, ValidateObjectName(spec.Child("nodeName"), n.Spec.NodeName, "Node")...)
	}
	if n.Spec.ElasticIP != "" {
		errs = append(errs, ValidateLocalName(spec.Child("elasticIP"), n.Spec.ElasticIP, "ElasticIP")...)
	}
	return errs
}

// ValidateNetworkInterfaceUpdate checks an updated NetworkInterface: podRef and
// elasticIP are immutable, and nodeName may be set once (a Pod is scheduled once).
func ValidateNetworkInterfaceUpdate(newNIC, oldNIC *v1alpha1.NetworkInterface) field.ErrorList {
	spec := field.NewPath("spec")
	podRef := spec.Child("podRef")
	n, o := newNIC.Spec, oldNIC.Spec
	errs := ValidateNetworkInterface(newNIC)
	errs = append(errs, validateImmutable(podRef.Child("name"), n.PodRef.Name, o.PodRef.Name)...)
	errs = append(errs, validateImmutable(podRef.Child("uid"), n.PodRef.UID, o.PodRef.UID)...)
	errs = append(errs, validateImmutable(podRef.Child("interface"), n.PodRef.Interface, o.PodRef.Interface)...)
	errs = append(errs, validateImmutable(spec.Child("elasticIP"), n.ElasticIP, o.ElasticIP)...)
	if o.NodeName != "" && n.NodeName != o.NodeName {
		errs = append(errs, field.Invalid(spec.Child("nodeName"), n.NodeName, fmt.Sprintf(
			"can only be set once: it is already %q (a Pod never moves to another Node)", o.NodeName)))
	}
	return errs
}

// ValidateARPAdvertisement checks an ARPAdvertisement on its own.
func ValidateARPAdvertisement(a *v1alpha1.ARPAdvertisement) field.ErrorList {
	return validateAdvertisement(a.Spec.ExternalNetwork, a.Spec.Address, a.Spec.NodeName)
}

// ValidateARPAdvertisementUpdate checks an updated ARPAdvertisement: only nodeName may
// change (the controller rewrites it in place when the Pod moves).
func ValidateARPAdvertisementUpdate(newAd, oldAd *v1alpha1.ARPAdvertisement) field.ErrorList {
	n, o := newAd.Spec, oldAd.Spec
	return validateAdvertisementUpdate(n.ExternalNetwork, n.Address, n.NodeName, o.ExternalNetwork, o.Address)
}
