package annotations

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// Prefix starts every juneau annotation key.
const Prefix = v1alpha1.GroupName + "/"

// CompatibilityKeys are the managed-cloud annotation keys juneau also reads.
func CompatibilityKeys() []string {
	return []string{
		v1alpha1.AliasPodWithEIP,
		v1alpha1.AliasEIPBandwidth,
		v1alpha1.AliasReleaseStrategy,
		v1alpha1.AliasPodEIPInstance,
	}
}

// WrittenBack are the annotations the controller writes back on a Pod that asks for
// automatic ElasticIPs (docs/automatic.md#annotations): what it holds, per family, and
// the managed-cloud names of the IPv4 one. They are the controller's, never a request.
func WrittenBack() []string {
	return []string{
		v1alpha1.AnnotationAllocatedEIPName, v1alpha1.AnnotationAllocatedEIPAddr,
		v1alpha1.AnnotationAllocatedEIPName6, v1alpha1.AnnotationAllocatedEIPAddr6,
		v1alpha1.AliasAllocatedEIPID, v1alpha1.AliasAllocatedEIPAddress, v1alpha1.AliasAllocatedENIID,
	}
}

// WrittenBackKeys are the annotations naming the ElasticIP of the family a Pod holds and
// its address.
func WrittenBackKeys(f v1alpha1.IPFamily) (name, address string) {
	if f == v1alpha1.IPv6 {
		return v1alpha1.AnnotationAllocatedEIPName6, v1alpha1.AnnotationAllocatedEIPAddr6
	}
	return v1alpha1.AnnotationAllocatedEIPName, v1alpha1.AnnotationAllocatedEIPAddr
}

// UsesManagedCloudKeys reports whether the Pod asks with any of the CompatibilityKeys:
// such a Pod also gets the managed service's written-back annotations
// (docs/reference.md#automatic).
func UsesManagedCloudKeys(annotations map[string]string) bool {
	for _, k := range CompatibilityKeys() {
		if _, ok := annotations[k]; ok {
			return true
		}
	}
	return false
}

// HasJuneauAnnotations reports whether any key is a juneau annotation or one of the
// CompatibilityKeys: only such Pods need the Pod webhook.
func HasJuneauAnnotations(annotations map[string]string) bool {
	aliases := CompatibilityKeys()
	for k := range annotations {
		if strings.HasPrefix(k, Prefix) || slices.Contains(aliases, k) {
			return true
		}
	}
	return false
}

// ValidatePod checks all ElasticIP annotations of a Pod: each parser's rules, then the
// rules between direct and automatic use, which apply only once both parse cleanly:
//   - eth0 carrying an ElasticIP directly cannot also get one by NAT
//     (pod-with-eip: "true" or pod-eip-name);
//   - the ElasticIP named by pod-eip-name cannot also be used directly by another NIC.
func ValidatePod(annotations map[string]string) field.ErrorList {
	nics, errs := ParseDirect(annotations)
	auto, autoErrs := ParseAuto(annotations)
	errs = append(errs, autoErrs...)
	if len(errs) > 0 || !auto.Wanted() {
		return errs
	}
	path := AutoPath(annotations, auto)
	for _, n := range nics {
		switch {
		case n.Interface == v1alpha1.DefaultInterface:
			return field.ErrorList{field.Forbidden(path, fmt.Sprintf(
				"eth0 already carries ElasticIP %q directly: eth0 uses an ElasticIP either directly or by NAT, not both",
				n.ElasticIP))}
		case auto.ElasticIPName != "" && n.ElasticIP == auto.ElasticIPName:
			return field.ErrorList{field.Invalid(path, auto.ElasticIPName, fmt.Sprintf(
				"ElasticIP %q is already used directly by interface %q: an ElasticIP is used either by NAT or directly, not both",
				n.ElasticIP, n.Interface))}
		}
	}
	return nil
}

// AutoPath is the path of the annotation that asked for the automatic ElasticIP:
// pod-with-eip or pod-eip-name, juneau's key or its managed-cloud alias, whichever the
// Pod carries.
func AutoPath(annotations map[string]string, auto AutoEIP) *field.Path {
	keys := []string{v1alpha1.AnnotationPodWithEIP, v1alpha1.AliasPodWithEIP}
	if !auto.Enabled {
		keys = []string{v1alpha1.AnnotationPodEIPName, v1alpha1.AliasPodEIPInstance}
	}
	key := keys[1]
	if _, ok := annotations[keys[0]]; ok {
		key = keys[0]
	}
	return annotationsPath().Key(key)
}
