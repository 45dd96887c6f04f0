package validation

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// reservedRange is a block that can never be an ElasticIP: the kernel treats
// these addresses specially on every host, so a Pod could never be reached on them.
type reservedRange struct {
	prefix netip.Prefix
	what   string
}

func reservedRanges() []reservedRange {
	return []reservedRange{
		{netip.MustParsePrefix("0.0.0.0/8"), `the "this network" block`},
		{netip.MustParsePrefix("127.0.0.0/8"), "the loopback block"},
		{netip.MustParsePrefix("169.254.0.0/16"), "the link-local block"},
		{netip.MustParsePrefix("224.0.0.0/4"), "the multicast block"},
		{netip.MustParsePrefix("255.255.255.255/32"), "the limited broadcast address"},
		{netip.MustParsePrefix("::/128"), "the unspecified address"},
		{netip.MustParsePrefix("::1/128"), "the loopback address"},
		{netip.MustParsePrefix("fe80::/10"), "the link-local block"},
		{netip.MustParsePrefix("ff00::/8"), "the multicast block"},
	}
}

// ValidateAddressPool checks an AddressPool on its own.
func ValidateAddressPool(p *v1alpha1.AddressPool) field.ErrorList {
	spec := field.NewPath("spec")
	errs := validateAdvertiseMode(spec.Child("advertiseMode"), p.Spec.AdvertiseMode)
	errs = append(errs, validatePoolAddresses(spec.Child("addresses"), p.Spec.Addresses)...)
	if len(p.Spec.BGPCommunities) > 0 && p.Spec.AdvertiseMode != v1alpha1.AdvertiseBGP && p.Spec.AdvertiseMode != "" {
		errs = append(errs, field.Invalid(spec.Child("bgpCommunities"), p.Spec.BGPCommunities,
			fmt.Sprintf("applies to pools of advertiseMode bgp only; this pool's is %q", p.Spec.AdvertiseMode)))
	}
	return append(errs, ValidateCommunities(spec.Child("bgpCommunities"), p.Spec.BGPCommunities)...)
}

// ValidateAddressPoolUpdate checks an updated AddressPool: advertiseMode is immutable and
// addresses is append-only.
func ValidateAddressPoolUpdate(newPool, oldPool *v1alpha1.AddressPool) field.ErrorList {
	spec := field.NewPath("spec")
	errs := ValidateAddressPool(newPool)
	errs = append(errs, validateImmutable(spec.Child("advertiseMode"),
		string(newPool.Spec.AdvertiseMode), string(oldPool.Spec.AdvertiseMode))...)
	return append(errs, validateAppendOnly(spec.Child("addresses"), newPool.Spec.Addresses, oldPool.Spec.Addresses)...)
}

func validateAdvertiseMode(path *field.Path, mode v1alpha1.AdvertiseMode) field.ErrorList {
	supported := []v1alpha1.AdvertiseMode{v1alpha1.AdvertiseARP, v1alpha1.AdvertiseBGP}
	switch {
	case mode == "":
		return field.ErrorList{field.Required(path, `must be "arp" or "bgp"`)}
	case !slices.Contains(supported, mode):
		return field.ErrorList{field.NotSupported(path, mode, supported)}
	}
	return nil
}

// indexedRange is a parsed entry with its position in spec.addresses.
type indexedRange struct {
	index int
	r     iprange.Range
}

func validatePoolAddresses(path *field.Path, addresses []string) field.ErrorList {
	if len(addresses) == 0 {
		return field.ErrorList{field.Required(path,
			"at least one entry is required: a CIDR (10.225.51.0/24, 2001:db8::/64), a range (10.225.51.5-10.225.51.20) or an address, all of one family")}
	}
	// At most one error per entry, reported in list order.
	perEntry := make([]*field.Error, len(addresses))
	seen := make(map[string]int, len(addresses))
	parsed := make([]indexedRange, 0, len(addresses))
	for i, s := range addresses {
		if j, dup := seen[s]; dup {
			perEntry[i] = duplicate(path.Index(i), s, fmt.Sprintf("already listed at %s", path.Index(j)))
			continue
		}
		seen[s] = i
		r, err := iprange.Parse(s)
		if err != nil {
			perEntry[i] = field.Invalid(path.Index(i), s, iprange.Reason(err))
			continue
		}
		if len(parsed) > 0 && r.Family() != parsed[0].r.Family() {
			first := parsed[0]
			perEntry[i] = field.Invalid(path.Index(i), s, fmt.Sprintf(
				"is %s but %s %q is %s: a pool holds addresses of one family; put %s addresses in a pool of their own (an ExternalNetwork may list pools of both families)",
				r.Family(), path.Index(first.index), addresses[first.index], first.r.Family(), r.Family()))
			continue
		}
		if perEntry[i] = validateNotReserved(path.Index(i), s, r); perEntry[i] == nil {
			parsed = append(parsed, indexedRange{index: i, r: r})
		}
	}
	markOverlaps(path, addresses, parsed, perEntry)
	var errs field.ErrorList
	for _, e := range perEntry {
		if e != nil {
			errs = append(errs, e)
		}
	}
	return errs
}

func validateNotReserved(path *field.Path, s string, r iprange.Range) *field.Error {
	for _, res := range reservedRanges() {
		rr := iprange.FromPrefix(res.prefix)
		if r.Overlaps(rr) {
			return field.Invalid(path, s, fmt.Sprintf(
				"overlaps %s %s, whose addresses cannot be reached as ElasticIPs", res.what, res.prefix))
		}
	}
	return nil
}

// markOverlaps finds entries of one pool that share addresses. Sorting by first address
// and sweeping keeps this O(n log n) however long the list is; each overlapping pair is
// reported on the later entry, naming the earlier one.
func markOverlaps(path *field.Path, addresses []string, parsed []indexedRange, perEntry []*field.Error) {
	if len(parsed) < 2 {
		return
	}
	sorted := slices.Clone(parsed)
	slices.SortFunc(sorted, func(a, b indexedRange) int {
		return cmp.Or(a.r.First.Compare(b.r.First), cmp.Compare(a.index, b.index))
	})
	// reach is the entry, among those already swept, that extends furthest: an entry
	// overlaps some earlier one exactly when it starts at or before reach ends.
	reach := sorted[0]
	for _, e := range sorted[1:] {
		if e.r.First.Compare(reach.r.Last) <= 0 {
			lo, hi := min(e.index, reach.index), max(e.index, reach.index)
			if perEntry[hi] == nil {
				perEntry[hi] = field.Invalid(path.Index(hi), addresses[hi], fmt.Sprintf(
					"overlaps %s %q: the entries of a pool must not share addresses", path.Index(lo), addresses[lo]))
			}
		}
		if reach.r.Last.Less(e.r.Last) {
			reach = e
		}
	}
}

// ValidatePoolsDisjoint reports every entry of p that shares addresses with an entry of
// another pool (docs/reference.md#addresspool: pools never overlap each other). others may include p itself
// (matched by name), which is skipped; unparsable entries are left to ValidateAddressPool.
func ValidatePoolsDisjoint(p *v1alpha1.AddressPool, others []*v1alpha1.AddressPool) field.ErrorList {
	path := field.NewPath("spec", "addresses")
	sortedOthers := slices.Clone(others)
	slices.SortFunc(sortedOthers, func(a, b *v1alpha1.AddressPool) int { return strings.Compare(a.Name, b.Name) })
	var errs field.ErrorList
	for i, s := range p.Spec.Addresses {
		r, err := iprange.Parse(s)
		if err != nil {
			continue
		}
		if e := firstOverlap(r, p.Name, sortedOthers); e != "" {
			errs = append(errs, field.Invalid(path.Index(i), s, e+": address pools must not overlap each other"))
		}
	}
	return errs
}

// firstOverlap describes the first entry of another pool that overlaps r, or returns "".
func firstOverlap(r iprange.Range, self string, others []*v1alpha1.AddressPool) string {
	for _, o := range others {
		if o.Name == self {
			continue
		}
		for _, os := range o.Spec.Addresses {
			or, err := iprange.Parse(os)
			if err == nil && r.Overlaps(or) {
				return fmt.Sprintf("overlaps %q of AddressPool %q", os, o.Name)
			}
		}
	}
	return ""
}
