package annotations

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/apis/juneau/validation"
)

// ReleaseKind says when an automatic ElasticIP is released after its Pod is gone.
type ReleaseKind string

const (
	// ReleaseFollow releases the ElasticIP together with the Pod.
	ReleaseFollow ReleaseKind = v1alpha1.ReleaseFollow
	// ReleaseNever keeps the ElasticIP until someone deletes it.
	ReleaseNever ReleaseKind = v1alpha1.ReleaseNever
	// ReleaseAfter releases the ElasticIP a while (ReleaseStrategy.After) after the Pod
	// is gone, so a re-created Pod of the same name gets it back.
	ReleaseAfter ReleaseKind = "After"
)

// DefaultStatefulRelease is how long the ElasticIP of a stateful workload's Pod
// outlives the Pod unless the Pod says otherwise (docs/reference.md#automatic).
const DefaultStatefulRelease = 10 * time.Minute

// ReleaseStrategy is the parsed pod-eip-release-strategy annotation.
type ReleaseStrategy struct {
	Kind ReleaseKind
	// After is the delay of ReleaseAfter, > 0; zero for the other kinds.
	After time.Duration
	// Set says the Pod gave the strategy explicitly; otherwise Kind is empty and the
	// default depends on the workload (see AutoEIP.EffectiveRelease).
	Set bool
}

// AutoEIP is what the automatic-ElasticIP annotations of docs/reference.md#automatic ask for. The Pod
// wants a NAT-attached ElasticIP on eth0 when Enabled (allocate one) or when
// ElasticIPName is set (attach that existing one); never both.
type AutoEIP struct {
	// Enabled: pod-with-eip is "true".
	Enabled bool
	// ElasticIPName: pod-eip-name (or pod-eip-instanceid), an ElasticIP in the Pod's
	// namespace to attach instead of allocating one.
	ElasticIPName string
	// ExternalNetwork to allocate from; "" means the default network.
	ExternalNetwork string
	// BandwidthMbps for the ElasticIP created for the Pod; nil means no limit.
	BandwidthMbps *int32
	// Release of the ElasticIP created for the Pod.
	Release ReleaseStrategy
	// Families of the ElasticIPs created for the Pod, IPv4 first, from
	// pod-eip-ip-families; nil when it is not set (see IPFamilies).
	Families []v1alpha1.IPFamily
}

// IPFamilies are the families the Pod asks ElasticIPs of: Families, IPv4 alone by
// default.
func (a AutoEIP) IPFamilies() []v1alpha1.IPFamily {
	if len(a.Families) == 0 {
		return []v1alpha1.IPFamily{v1alpha1.IPv4}
	}
	return a.Families
}

// Wanted reports whether the Pod asks for an automatic (NAT) ElasticIP at all.
func (a AutoEIP) Wanted() bool { return a.Enabled || a.ElasticIPName != "" }

// EffectiveRelease is the explicit strategy, or the default: Follow for plain Pods and
// Deployments, DefaultStatefulRelease for Pods of stateful workloads.
func (a AutoEIP) EffectiveRelease(stateful bool) ReleaseStrategy {
	switch {
	case a.Release.Set:
		return a.Release
	case stateful:
		return ReleaseStrategy{Kind: ReleaseAfter, After: DefaultStatefulRelease}
	default:
		return ReleaseStrategy{Kind: ReleaseFollow}
	}
}

// DefaultNetworks names, sorted, the ExternalNetworks an automatic ElasticIP comes from
// when its Pod names none in eip-external-network: those annotated
// juneau.loutres.me/default-network: "true" and not being deleted. Exactly one of them
// is the default; with none or several, the Pod names one or waits.
func DefaultNetworks(networks []*v1alpha1.ExternalNetwork) []string {
	var out []string
	for _, n := range networks {
		if n.DeletionTimestamp == nil && n.Annotations[v1alpha1.AnnotationDefaultNetwork] == "true" {
			out = append(out, n.Name)
		}
	}
	slices.Sort(out)
	return out
}

// ParseAuto reads the automatic-ElasticIP annotations, juneau's keys and their
// network.alibabacloud.com/ aliases. A key and its alias may both be set only to the
// same value. With pod-eip-name, the settings of a created ElasticIP
// (eip-external-network, eip-bandwidth, pod-eip-release-strategy, pod-eip-ip-families)
// are checked but do not apply: manifests written for the managed service may carry them, and the named
// ElasticIP keeps its own spec and is never released by juneau. When errors are
// returned the AutoEIP holds what could be read and must not be acted on.
func ParseAuto(annotations map[string]string) (AutoEIP, field.ErrorList) {
	var a AutoEIP
	var errs field.ErrorList
	r := aliasReader{annotations: annotations}

	withEIP, withPath, hasWith := r.get(v1alpha1.AnnotationPodWithEIP, v1alpha1.AliasPodWithEIP)
	if hasWith {
		switch withEIP {
		case "true":
			a.Enabled = true
		case "false":
		default:
			errs = append(errs, field.NotSupported(withPath, withEIP, []string{"true", "false"}))
		}
	}
	name, namePath, hasName := r.get(v1alpha1.AnnotationPodEIPName, v1alpha1.AliasPodEIPInstance)
	if hasName {
		if e := validation.ValidateLocalName(namePath, name, "ElasticIP"); len(e) > 0 {
			errs = append(errs, e...)
		} else {
			a.ElasticIPName = name
		}
		if withEIP == "true" {
			errs = append(errs, field.Forbidden(namePath, fmt.Sprintf(
				"cannot be combined with %s: \"true\": give an existing ElasticIP to attach, or ask for a new one, not both",
				withPath.String())))
		}
	}
	if net, ok := annotations[v1alpha1.AnnotationEIPExternalNetwork]; ok {
		path := annotationsPath().Key(v1alpha1.AnnotationEIPExternalNetwork)
		if e := validation.ValidateObjectName(path, net, "ExternalNetwork"); len(e) > 0 {
			errs = append(errs, e...)
		} else {
			a.ExternalNetwork = net
		}
	}
	if v, path, ok := r.get(v1alpha1.AnnotationEIPBandwidth, v1alpha1.AliasEIPBandwidth); ok {
		mbps, err := parseBandwidth(path, v)
		if err != nil {
			errs = append(errs, err)
		} else {
			a.BandwidthMbps = &mbps
		}
	}
	if v, ok := annotations[v1alpha1.AnnotationPodEIPIPFamilies]; ok {
		fams, err := parseFamilies(annotationsPath().Key(v1alpha1.AnnotationPodEIPIPFamilies), v)
		if err != nil {
			errs = append(errs, err)
		} else {
			a.Families = fams
		}
	}
	if v, path, ok := r.get(v1alpha1.AnnotationReleaseStrategy, v1alpha1.AliasReleaseStrategy); ok {
		rs, err := parseRelease(path, v)
		if err != nil {
			errs = append(errs, err)
		} else {
			a.Release = rs
		}
	}
	return a, append(r.errs, errs...)
}

// aliasReader reads a juneau key and its compatibility alias.
type aliasReader struct {
	annotations map[string]string
	errs        field.ErrorList
}

// get returns the value of key or, when only the alias is set, of alias, with the path
// of the annotation it came from. Both set to different values is an error naming both.
func (r *aliasReader) get(key, alias string) (string, *field.Path, bool) {
	v, hasKey := r.annotations[key]
	av, hasAlias := r.annotations[alias]
	switch {
	case hasKey && hasAlias && v != av:
		r.errs = append(r.errs, field.Invalid(annotationsPath().Key(alias), av, fmt.Sprintf(
			"conflicts with %s: %q; set only one of %s and %s, or give both the same value", key, v, key, alias)))
		return v, annotationsPath().Key(key), true
	case hasKey:
		return v, annotationsPath().Key(key), true
	case hasAlias:
		return av, annotationsPath().Key(alias), true
	}
	return "", nil, false
}

func parseBandwidth(path *field.Path, v string) (int32, *field.Error) {
	detail := fmt.Sprintf("must be a whole number of Mbit/s from %d to %d, such as \"100\"",
		validation.MinBandwidthMbps, validation.MaxBandwidthMbps)
	if v == "" || strings.TrimLeft(v, "0123456789") != "" {
		return 0, field.Invalid(path, v, detail)
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < validation.MinBandwidthMbps || n > validation.MaxBandwidthMbps {
		return 0, field.Invalid(path, v, detail)
	}
	return int32(n), nil
}

// parseFamilies reads pod-eip-ip-families: "IPv4", "IPv6", or both separated by a
// comma, each once; returned IPv4 first.
func parseFamilies(path *field.Path, v string) ([]v1alpha1.IPFamily, *field.Error) {
	detail := `must be "IPv4", "IPv6" or "IPv4,IPv6"`
	var has4, has6 bool
	for _, f := range strings.Split(v, ",") {
		switch v1alpha1.IPFamily(strings.TrimSpace(f)) {
		case v1alpha1.IPv4:
			if has4 {
				return nil, field.Invalid(path, v, detail+" (each family once)")
			}
			has4 = true
		case v1alpha1.IPv6:
			if has6 {
				return nil, field.Invalid(path, v, detail+" (each family once)")
			}
			has6 = true
		default:
			return nil, field.Invalid(path, v, detail)
		}
	}
	var out []v1alpha1.IPFamily
	if has4 {
		out = append(out, v1alpha1.IPv4)
	}
	if has6 {
		out = append(out, v1alpha1.IPv6)
	}
	return out, nil
}

func parseRelease(path *field.Path, v string) (ReleaseStrategy, *field.Error) {
	switch ReleaseKind(v) {
	case ReleaseFollow, ReleaseNever:
		return ReleaseStrategy{Kind: ReleaseKind(v), Set: true}, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return ReleaseStrategy{}, field.Invalid(path, v, fmt.Sprintf(
			"must be %q, %q or a duration such as \"5m30s\" (units ns, us, ms, s, m, h)", ReleaseFollow, ReleaseNever))
	}
	if d <= 0 {
		return ReleaseStrategy{}, field.Invalid(path, v, "the release delay must be longer than zero; use \"Follow\" to release with the Pod")
	}
	return ReleaseStrategy{Kind: ReleaseAfter, After: d, Set: true}, nil
}

func annotationsPath() *field.Path { return field.NewPath("metadata", "annotations") }
