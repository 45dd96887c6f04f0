package annotations

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/apis/juneau/validation"
)

// MaxExtraInterfaceLength bounds the names of extra NICs (docs/reference.md#direct-annotations).
const MaxExtraInterfaceLength = 8

// DirectNIC is one Pod interface that the direct-use annotations ask for.
type DirectNIC struct {
	// Interface is the interface name inside the Pod.
	Interface string
	// ElasticIP names the ElasticIP, in the Pod's namespace, that the interface carries
	// directly; "" means none.
	ElasticIP string
}

// ParseDirect reads the direct-use annotations of docs/reference.md#direct-annotations:
// juneau.loutres.me/elastic-ip (eth0 carries that ElasticIP) and
// juneau.loutres.me/networks (a JSON list of extra NICs).
//
// Result contract, when the error list is empty:
//   - an "eth0" entry is present exactly when eth0 carries an ElasticIP, and comes first;
//   - then one entry per extra NIC, sorted by interface name; names are unique DNS-1123
//     labels of at most MaxExtraInterfaceLength characters;
//   - every non-empty ElasticIP is a valid name without a namespace and appears once.
//
// eth0 itself always exists and is not listed unless it carries an ElasticIP. When any
// error is returned, the NIC list is nil: a Pod with unreadable annotations gets no
// NICs rather than a guess.
func ParseDirect(annotations map[string]string) ([]DirectNIC, field.ErrorList) {
	base := annotationsPath()
	p := directParser{ifaceAt: map[string]*field.Path{}, eipAt: map[string]eipUse{}}
	if v, ok := annotations[v1alpha1.AnnotationElasticIP]; ok {
		path := base.Key(v1alpha1.AnnotationElasticIP)
		if errs := validation.ValidateLocalName(path, v, "ElasticIP"); len(errs) > 0 {
			p.errs = append(p.errs, errs...)
		} else {
			p.add(DirectNIC{Interface: v1alpha1.DefaultInterface, ElasticIP: v}, path, path)
		}
	}
	if v, ok := annotations[v1alpha1.AnnotationNetworks]; ok {
		path := base.Key(v1alpha1.AnnotationNetworks)
		entries, errs := decodeNetworks(path, v)
		p.errs = append(p.errs, errs...)
		for i, e := range entries {
			p.entry(path.Index(i), e)
		}
	}
	if len(p.errs) > 0 {
		return nil, p.errs
	}
	slices.SortFunc(p.nics, compareNICs)
	return p.nics, nil
}

// compareNICs orders eth0 first, then by interface name.
func compareNICs(a, b DirectNIC) int {
	aEth0, bEth0 := a.Interface == v1alpha1.DefaultInterface, b.Interface == v1alpha1.DefaultInterface
	switch {
	case aEth0 && !bEth0:
		return -1
	case bEth0 && !aEth0:
		return 1
	}
	return strings.Compare(a.Interface, b.Interface)
}

// eipUse records where an ElasticIP was first given and on which interface.
type eipUse struct {
	iface string
	path  *field.Path
}

type directParser struct {
	nics    []DirectNIC
	errs    field.ErrorList
	ifaceAt map[string]*field.Path // where each interface was first given
	eipAt   map[string]eipUse
}

// entry checks one entry of the networks list and records it.
func (p *directParser) entry(path *field.Path, e networkEntry) {
	ifacePath, eipPath := path.Child(fieldInterface), path.Child(fieldElasticIP)
	if !e.hasIface {
		p.errs = append(p.errs, field.Required(ifacePath, "every entry names its interface, such as \"ext0\""))
		return
	}
	bad := validateInterface(ifacePath, e.iface)
	if e.hasElasticIP {
		if e.elasticIP == "" {
			bad = append(bad, field.Invalid(eipPath, e.elasticIP,
				"must name an ElasticIP; leave the field out for an interface without one"))
		} else {
			bad = append(bad, validation.ValidateLocalName(eipPath, e.elasticIP, "ElasticIP")...)
		}
	}
	if len(bad) > 0 {
		p.errs = append(p.errs, bad...)
		return
	}
	if e.iface == v1alpha1.DefaultInterface && !e.hasElasticIP {
		// eth0 exists anyway; an entry without an ElasticIP asks for nothing more.
		p.noteInterface(ifacePath, e.iface)
		return
	}
	p.add(DirectNIC{Interface: e.iface, ElasticIP: e.elasticIP}, ifacePath, eipPath)
}

// noteInterface records an interface, reporting it if it was given before.
func (p *directParser) noteInterface(path *field.Path, iface string) bool {
	if first, dup := p.ifaceAt[iface]; dup {
		detail := fmt.Sprintf("interface %q is already given at %s", iface, first)
		if iface == v1alpha1.DefaultInterface && first.String() == annotationPath(v1alpha1.AnnotationElasticIP) {
			detail = fmt.Sprintf("eth0 already carries an ElasticIP through the %s annotation: give eth0's ElasticIP in one place only",
				v1alpha1.AnnotationElasticIP)
		}
		p.errs = append(p.errs, duplicate(path, iface, detail))
		return false
	}
	p.ifaceAt[iface] = path
	return true
}

// add records a NIC unless its interface or its ElasticIP was given before.
func (p *directParser) add(n DirectNIC, ifacePath, eipPath *field.Path) {
	if !p.noteInterface(ifacePath, n.Interface) {
		return
	}
	if n.ElasticIP != "" {
		if first, dup := p.eipAt[n.ElasticIP]; dup {
			p.errs = append(p.errs, duplicate(eipPath, n.ElasticIP, fmt.Sprintf(
				"ElasticIP %q is already carried by interface %q (%s): one ElasticIP can be on one NIC of a Pod only",
				n.ElasticIP, first.iface, first.path)))
			return
		}
		p.eipAt[n.ElasticIP] = eipUse{iface: n.Interface, path: eipPath}
	}
	p.nics = append(p.nics, n)
}

// validateInterface checks the name of an interface given in the networks list.
func validateInterface(path *field.Path, iface string) field.ErrorList {
	if errs := validation.ValidateLabelName(path, iface, "interface name", MaxExtraInterfaceLength); len(errs) > 0 {
		return errs
	}
	if what := reservedInterface(iface); what != "" {
		return field.ErrorList{field.Invalid(path, iface, fmt.Sprintf(
			"is %s, which already exists in a Pod's network namespace; choose another name", what))}
	}
	return nil
}

// reservedInterface describes names that already exist in a Pod's network namespace:
// the loopback, and the fallback devices a loaded tunnel module adds to every new
// namespace (unless net.core.fb_tunnels_only_for_init_net says otherwise). Plumbing a
// NIC under such a name would fail only at Pod start, far from the annotation.
func reservedInterface(name string) string {
	switch name {
	case "lo":
		return "the loopback interface"
	case "tunl0", "gre0", "gretap0", "erspan0", "sit0", "ip6tnl0", "ip6gre0":
		return "a fallback tunnel device"
	}
	return ""
}

func annotationPath(key string) string {
	return annotationsPath().Key(key).String()
}
