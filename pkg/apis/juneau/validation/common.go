package validation

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
	"github.com/loutres/juneau/pkg/apis/juneau/messages"
)

// MaxInterfaceNameLength is the longest Linux interface name (IFNAMSIZ - 1).
const MaxInterfaceNameLength = 15

// ValidateObjectName checks that value names an object of the given kind: required and
// a DNS-1123 subdomain (what the API server accepts as a name of a juneau object).
func ValidateObjectName(path *field.Path, value, kind string) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(path, fmt.Sprintf("the %s name is required", kind))}
	}
	if msgs := utilvalidation.IsDNS1123Subdomain(value); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(path, value,
			fmt.Sprintf("must be a valid %s name: %s", kind, strings.Join(msgs, "; ")))}
	}
	return nil
}

// ValidateLocalName is ValidateObjectName for a reference to an object that must be in
// the referrer's namespace: a "namespace/name" value gets a message saying so.
func ValidateLocalName(path *field.Path, value, kind string) field.ErrorList {
	if strings.Contains(value, "/") {
		return field.ErrorList{field.Invalid(path, value, fmt.Sprintf(
			"must name %s %s in the same namespace, without a namespace/ prefix", article(kind), kind))}
	}
	return ValidateObjectName(path, value, kind)
}

// ValidateLabelName checks that value is present, a DNS-1123 label and at most maxLen
// characters long; what says what the value is, for the message.
func ValidateLabelName(path *field.Path, value, what string, maxLen int) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(path, fmt.Sprintf("the %s is required", what))}
	}
	if msgs := utilvalidation.IsDNS1123Label(value); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(path, value,
			fmt.Sprintf("must be a valid %s: %s", what, strings.Join(msgs, "; ")))}
	}
	if len(value) > maxLen {
		return field.ErrorList{field.Invalid(path, value,
			fmt.Sprintf("must be a valid %s of at most %d characters (it has %d)", what, maxLen, len(value)))}
	}
	return nil
}

// validateIPv4 checks a required canonical IPv4 address.
func validateIPv4(path *field.Path, value string) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(path, "an IPv4 address such as 10.225.51.5 is required")}
	}
	if _, err := iprange.ParseAddrOf(value, iprange.IPv4); err != nil {
		return field.ErrorList{field.Invalid(path, value, iprange.Reason(err))}
	}
	return nil
}

// validateIP checks a required canonical address of either family (IPv6 in the
// canonical text form of RFC 5952).
func validateIP(path *field.Path, value string) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(path, "an IPv4 address such as 10.225.51.5 or an IPv6 address such as 2001:db8::5 is required")}
	}
	if _, err := iprange.ParseAddr(value); err != nil {
		return field.ErrorList{field.Invalid(path, value, iprange.Reason(err))}
	}
	return nil
}

// validateRequired reports an empty required string.
func validateRequired(path *field.Path, value, detail string) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(path, detail)}
	}
	return nil
}

// validateImmutable reports a changed immutable string field.
func validateImmutable(path *field.Path, newValue, oldValue string) field.ErrorList {
	if newValue == oldValue {
		return nil
	}
	if oldValue == "" {
		return field.ErrorList{field.Invalid(path, newValue, "field is immutable: it was unset and cannot be set later")}
	}
	return field.ErrorList{field.Invalid(path, newValue, fmt.Sprintf("field is immutable: it was %q", oldValue))}
}

// validateAppendOnly checks that oldList is a prefix of newList: entries may be added at
// the end but neither removed, changed nor reordered, so positions (pool order, range
// order) that allocation depends on never shift under existing reservations.
func validateAppendOnly(path *field.Path, newList, oldList []string) field.ErrorList {
	var errs field.ErrorList
	// Only the first differing position is reported: every later one follows from it.
	for i := 0; i < len(oldList) && i < len(newList); i++ {
		if newList[i] != oldList[i] {
			errs = append(errs, field.Invalid(path.Index(i), newList[i], fmt.Sprintf(
				"entries can only be appended at the end: this position held %q; existing entries cannot be changed, removed or reordered", oldList[i])))
			break
		}
	}
	if len(newList) < len(oldList) {
		present := sets.New(newList...)
		var missing []string
		for _, old := range oldList {
			if !present.Has(old) {
				missing = append(missing, old)
			}
		}
		slices.Sort(missing)
		detail := fmt.Sprintf("entries can only be appended, never removed: the list had %d entries and now has %d", len(oldList), len(newList))
		if len(missing) > 0 {
			detail += "; missing: " + messages.Names(missing)
		}
		errs = append(errs, field.Forbidden(path, detail))
	}
	return errs
}

// duplicate is field.Duplicate with an explanation.
func duplicate(path *field.Path, value any, detail string) *field.Error {
	e := field.Duplicate(path, value)
	e.Detail = detail
	return e
}

// article is the indefinite article for a kind name.
func article(kind string) string {
	if kind != "" && strings.ContainsRune("AEIOU", rune(kind[0])) {
		return "an"
	}
	return "a"
}
