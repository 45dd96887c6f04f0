// Package advertisement names the per-ElasticIP advertisement objects and says whose
// they are (docs/reference.md#arp-advertisement). An ARPAdvertisement and, on bgp
// networks, a BGPAdvertisement follow the same rules, so both kinds use these functions:
//
//   - the name is eip-<namespace>-<elasticip>, the name users look up, when no other
//     ElasticIP's advertisement has it and it fits in an object name; otherwise a
//     deterministic form with a short hash of "<namespace>/<name>" (Name);
//   - names alone are ambiguous ("a-b"/"c" and "a"/"b-c" both give eip-a-b-c), so the
//     advertisement carries its ElasticIP's UID and namespace as labels and
//     "<namespace>/<name>" as an annotation (Meta), and its owner is read back from
//     them (OwnerOf), never from the name.
package advertisement

import (
	"crypto/sha256"
	"encoding/base32"
	"net/netip"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// MaxNameLength is the longest object name (a DNS-1123 subdomain).
const MaxNameLength = 253

// hashLength is how many base32 characters of the hash a hashed name ends with: 50 bits,
// so two ElasticIPs meet on one hashed name only by a collision of the hash.
const hashLength = 10

// Owner is the ElasticIP an advertisement is for.
type Owner struct {
	Namespace string
	Name      string
	UID       types.UID
}

// Of is the owner identity of an ElasticIP.
func Of(eip *v1alpha1.ElasticIP) Owner {
	return Owner{Namespace: eip.Namespace, Name: eip.Name, UID: eip.UID}
}

// Key is "<namespace>/<name>", the value of the owner annotation.
func (o Owner) Key() string { return o.Namespace + "/" + o.Name }

// Labels are the labels an advertisement of o carries: its UID, by which the
// controller finds it, and its namespace.
func Labels(o Owner) map[string]string {
	return map[string]string{v1alpha1.LabelOwnerUID: string(o.UID), v1alpha1.LabelOwnerNamespace: o.Namespace}
}

// Annotations are the annotations an advertisement of o carries: "<namespace>/<name>",
// which no label value can hold (a name may be longer than a label value).
func Annotations(o Owner) map[string]string {
	return map[string]string{v1alpha1.AnnotationOwner: o.Key()}
}

// Meta is the metadata of o's advertisement called name.
func Meta(name string, o Owner) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Labels: Labels(o), Annotations: Annotations(o)}
}

// OwnerOf reads whose advertisement obj is. ok is false when it carries no owner
// annotation. The UID is empty for an advertisement written before owners carried
// their UID: such a one is adopted by the live ElasticIP of that namespace and name
// (Belongs), and relabelled.
func OwnerOf(obj metav1.Object) (Owner, bool) {
	ns, name, ok := strings.Cut(obj.GetAnnotations()[v1alpha1.AnnotationOwner], "/")
	if !ok || ns == "" || name == "" {
		return Owner{}, false
	}
	return Owner{Namespace: ns, Name: name, UID: types.UID(obj.GetLabels()[v1alpha1.LabelOwnerUID])}, true
}

// Belongs reports whether obj is o's advertisement: its owner has o's UID or, when it
// records no UID, o's namespace and name.
func Belongs(obj metav1.Object, o Owner) bool {
	got, ok := OwnerOf(obj)
	return ok && sameOwner(got, o)
}

// Labelled reports whether obj carries exactly the labels and annotation of o (an
// adopted advertisement of an earlier version does not yet).
func Labelled(obj metav1.Object, o Owner) bool {
	for k, v := range Labels(o) {
		if obj.GetLabels()[k] != v {
			return false
		}
	}
	return obj.GetAnnotations()[v1alpha1.AnnotationOwner] == o.Key()
}

// PreferredName is eip-<namespace>-<name>, the name users look up. It may be longer than
// an object name allows, and two ElasticIPs may share it: Name decides.
func PreferredName(namespace, name string) string {
	return v1alpha1.ARPAdvertisementPrefix + namespace + "-" + name
}

// HashedName is the deterministic name used when the preferred one is taken or too long:
// the preferred name, cut so that the whole fits in MaxNameLength, then "-" and a hash of
// "<namespace>/<name>". It is always a valid object name.
func HashedName(namespace, name string) string {
	return hashed(PreferredName(namespace, name), namespace+"/"+name)
}

// uidName is the last resort, for the one case where another ElasticIP's advertisement
// holds the hashed name as well: the hash then covers the UID.
func uidName(o Owner) string {
	return hashed(PreferredName(o.Namespace, o.Name), o.Key()+"/"+string(o.UID))
}

func hashed(base, input string) string {
	sum := sha256.Sum256([]byte(input))
	h := strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:]))[:hashLength]
	if len(base) > MaxNameLength-1-hashLength {
		base = base[:MaxNameLength-1-hashLength]
	}
	// A cut can end on "-" or "."; the hash must follow an alphanumeric character.
	base = strings.TrimRight(base, "-.")
	return base + "-" + h
}

// Name is the name o's new advertisement gets: the first of the preferred name (when it
// fits), the hashed name and the UID-hashed name that is free or already o's. takenBy
// returns the owner of the existing advertisement of a name, ok false when the name is
// free. ok is false only when every candidate belongs to someone else.
//
// An ElasticIP that already has an advertisement keeps it under whatever name it has:
// Name is asked only when there is none, so a name never changes while in use.
func Name(o Owner, takenBy func(name string) (owner Owner, taken bool)) (string, bool) {
	candidates := make([]string, 0, 3)
	if p := PreferredName(o.Namespace, o.Name); len(p) <= MaxNameLength {
		candidates = append(candidates, p)
	}
	candidates = append(candidates, HashedName(o.Namespace, o.Name), uidName(o))
	for _, name := range candidates {
		holder, taken := takenBy(name)
		if !taken || sameOwner(holder, o) {
			return name, true
		}
	}
	return "", false
}

// sameOwner: the UID decides; an owner recorded without one is matched by namespace and
// name (see OwnerOf).
func sameOwner(holder, o Owner) bool {
	if holder.UID != "" {
		return holder.UID == o.UID
	}
	return holder.Namespace == o.Namespace && holder.Name == o.Name
}

// Protocol names what a Node answers for an address of an arp network with: ARP for
// IPv4, Neighbor Discovery (NDP) for IPv6.
func Protocol(a netip.Addr) string {
	if a.IsValid() && !a.Unmap().Is4() {
		return "NDP"
	}
	return "ARP"
}

// ByAddress is the index function, of every role's cache, of advertisements of either
// kind by spec.address: the lookup of the rule "one advertisement per address".
func ByAddress(obj any) ([]string, error) {
	switch ad := obj.(type) {
	case *v1alpha1.ARPAdvertisement:
		return []string{ad.Spec.Address}, nil
	case *v1alpha1.BGPAdvertisement:
		return []string{ad.Spec.Address}, nil
	}
	return nil, nil
}
