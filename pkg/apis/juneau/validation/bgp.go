package validation

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loutres/juneau/pkg/apis/juneau/community"
	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// BGP limits (RFC 4271 §4.2 and §10, RFC 6793, RFC 7300).
const (
	// MinHoldTime is the shortest hold time BGP allows other than 0.
	MinHoldTime = 3 * time.Second
	// MaxHoldTime is the largest hold time an OPEN message can carry (16 bits of seconds).
	MaxHoldTime = 65535 * time.Second
	// MinKeepaliveTime is the shortest keepalive interval (BGP timers count seconds).
	MinKeepaliveTime = time.Second
	// ASTrans is AS_TRANS, the placeholder 2-byte AS number of speakers with 4-byte AS
	// numbers; it is never a real AS (RFC 6793).
	ASTrans = 23456
	// MinMultihopTTL and MaxMultihopTTL bound spec.ebgpMultihop: TTL 1 is a directly
	// connected session, which is what an absent field means.
	MinMultihopTTL = 2
	MaxMultihopTTL = 255
	// MaxCommunities bounds the BGP communities of a pool or an advertisement.
	MaxCommunities = 32
	// MinBFDInterval and MaxBFDInterval bound spec.bfd.minRxInterval and minTxInterval.
	MinBFDInterval = 50 * time.Millisecond
	MaxBFDInterval = 60 * time.Second
	// MinBFDMultiplier and MaxBFDMultiplier bound spec.bfd.multiplier (Detect Mult is
	// one byte; 1 would declare a router down after a single lost packet).
	MinBFDMultiplier = 2
	MaxBFDMultiplier = 255
)

// ValidateBGPPeer checks a BGPPeer on its own. Every field may change, so an update
// is checked the same way (a change of address, ASN or password makes the agents
// replace the session).
func ValidateBGPPeer(p *v1alpha1.BGPPeer) field.ErrorList {
	spec := field.NewPath("spec")
	s := p.Spec
	errs := validatePeerAddress(spec.Child("peerAddress"), s.PeerAddress)
	errs = append(errs, validateASN(spec.Child("peerASN"), s.PeerASN)...)
	errs = append(errs, validateASN(spec.Child("myASN"), s.MyASN)...)
	if s.NodeSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(s.NodeSelector,
			metav1validation.LabelSelectorValidationOptions{}, spec.Child("nodeSelector"))...)
	}
	errs = append(errs, validateTimers(spec, s.HoldTime, s.KeepaliveTime)...)
	if s.PasswordSecretRef != nil {
		errs = append(errs, validateSecretKeyReference(spec.Child("passwordSecretRef"), *s.PasswordSecretRef)...)
	}
	if s.EBGPMultihop != nil {
		path := spec.Child("ebgpMultihop")
		ttl := *s.EBGPMultihop
		switch {
		case ttl < MinMultihopTTL || ttl > MaxMultihopTTL:
			errs = append(errs, field.Invalid(path, ttl, fmt.Sprintf(
				"must be an IP TTL from %d to %d; omit the field for a directly connected peer", MinMultihopTTL, MaxMultihopTTL)))
		case s.PeerASN == s.MyASN && s.PeerASN != 0:
			errs = append(errs, field.Invalid(path, ttl, fmt.Sprintf(
				"applies to eBGP sessions only: peerASN and myASN are both %d (an iBGP session)", s.PeerASN)))
		}
	}
	if s.TTLSecurity != nil && *s.TTLSecurity && s.EBGPMultihop != nil {
		errs = append(errs, field.Invalid(spec.Child("ttlSecurity"), true,
			"applies to directly connected routers only (the router's packets must arrive with TTL 255): remove ebgpMultihop or ttlSecurity"))
	}
	if s.BFD != nil {
		errs = append(errs, validateBFD(spec.Child("bfd"), *s.BFD, s.EBGPMultihop != nil)...)
	}
	return errs
}

// validateBFD checks the BFD timers: intervals of whole milliseconds from
// MinBFDInterval to MaxBFDInterval, a multiplier from MinBFDMultiplier to
// MaxBFDMultiplier, and a directly connected router (juneau speaks single-hop BFD, RFC
// 5881, only: its packets leave with TTL 255 and the router takes only those).
func validateBFD(path *field.Path, b v1alpha1.BGPPeerBFD, multihop bool) field.ErrorList {
	var errs field.ErrorList
	if multihop {
		errs = append(errs, field.Forbidden(path,
			"applies to directly connected routers only (single-hop BFD, RFC 5881): remove ebgpMultihop or bfd"))
	}
	for _, iv := range []struct {
		name  string
		value *metav1.Duration
	}{{"minRxInterval", b.MinRxInterval}, {"minTxInterval", b.MinTxInterval}} {
		if iv.value == nil {
			continue
		}
		d := iv.value.Duration
		switch {
		case d < MinBFDInterval || d > MaxBFDInterval:
			errs = append(errs, field.Invalid(path.Child(iv.name), d.String(), fmt.Sprintf("must be from %s to %s", MinBFDInterval, MaxBFDInterval)))
		case d%time.Millisecond != 0:
			errs = append(errs, field.Invalid(path.Child(iv.name), d.String(), "must be a whole number of milliseconds"))
		}
	}
	if m := b.Multiplier; m != nil && (*m < MinBFDMultiplier || *m > MaxBFDMultiplier) {
		errs = append(errs, field.Invalid(path.Child("multiplier"), *m, fmt.Sprintf(
			"must be from %d to %d: the number of intervals without a packet after which the router declares the Node down", MinBFDMultiplier, MaxBFDMultiplier)))
	}
	return errs
}

// ValidateBGPPeerUpdate checks an updated BGPPeer: the same rules as a new one.
func ValidateBGPPeerUpdate(newPeer, _ *v1alpha1.BGPPeer) field.ErrorList {
	return ValidateBGPPeer(newPeer)
}

// validatePeerAddress checks a router address: a canonical IPv4 address a Node can
// open a TCP connection to.
func validatePeerAddress(path *field.Path, value string) field.ErrorList {
	if errs := validateIPv4(path, value); len(errs) > 0 {
		return errs
	}
	a, _ := iprange.ParseAddr(value)
	var why string
	switch {
	case a.IsUnspecified():
		why = "is the unspecified address"
	case a.IsLoopback():
		why = "is a loopback address: the router must be reachable from the Nodes"
	case a.IsMulticast():
		why = "is a multicast address"
	case a.As4() == [4]byte{255, 255, 255, 255}:
		why = "is the broadcast address"
	default:
		return nil
	}
	return field.ErrorList{field.Invalid(path, value, "must be the unicast address of a BGP router: "+value+" "+why)}
}

// validateASN checks an AS number: 1 to 4294967294, not AS_TRANS.
func validateASN(path *field.Path, asn int64) field.ErrorList {
	switch {
	case asn == 0:
		return field.ErrorList{field.Required(path, fmt.Sprintf("an AS number from 1 to %d is required", int64(v1alpha1.MaxASN)))}
	case asn < 1 || asn > v1alpha1.MaxASN:
		return field.ErrorList{field.Invalid(path, asn, fmt.Sprintf("must be an AS number from 1 to %d", int64(v1alpha1.MaxASN)))}
	case asn == ASTrans:
		return field.ErrorList{field.Invalid(path, asn, "is AS_TRANS, a placeholder of 4-byte AS number speakers, never a real AS (RFC 6793)")}
	}
	return nil
}

// EffectiveHoldTime is the hold time a BGPPeer asks for: spec.holdTime, 90s when absent.
func EffectiveHoldTime(s v1alpha1.BGPPeerSpec) time.Duration {
	if s.HoldTime == nil {
		return v1alpha1.DefaultBGPHoldTimeSeconds * time.Second
	}
	return s.HoldTime.Duration
}

// validateTimers checks the hold time (whole seconds, 3s to 65535s) and the keepalive
// interval (whole seconds, at least 1s, shorter than the hold time). BGP also allows a
// hold time of 0 (no keepalives at all); juneau refuses it, since a session that never
// notices a dead router keeps announcing through it.
func validateTimers(spec *field.Path, hold, keepalive *metav1.Duration) field.ErrorList {
	var errs field.ErrorList
	holdTime := v1alpha1.DefaultBGPHoldTimeSeconds * time.Second
	if hold != nil {
		holdTime = hold.Duration
		path := spec.Child("holdTime")
		switch {
		case holdTime < MinHoldTime || holdTime > MaxHoldTime:
			errs = append(errs, field.Invalid(path, hold.Duration.String(),
				"must be from 3s to 65535s (BGP allows 0 too, meaning no keepalives; juneau needs keepalives to notice a dead router)"))
		case holdTime%time.Second != 0:
			errs = append(errs, field.Invalid(path, hold.Duration.String(), "must be a whole number of seconds: BGP timers count seconds"))
		}
	}
	if keepalive != nil {
		path := spec.Child("keepaliveTime")
		k := keepalive.Duration
		switch {
		case k < MinKeepaliveTime:
			errs = append(errs, field.Invalid(path, k.String(), "must be at least 1s; omit it for a third of the hold time"))
		case k%time.Second != 0:
			errs = append(errs, field.Invalid(path, k.String(), "must be a whole number of seconds: BGP timers count seconds"))
		case k >= holdTime:
			errs = append(errs, field.Invalid(path, k.String(), fmt.Sprintf(
				"must be shorter than the hold time %s, or the session expires between two keepalives (usually a third of it)", holdTime)))
		}
	}
	return errs
}

// validateSecretKeyReference checks that a Secret key reference is complete and well formed.
func validateSecretKeyReference(path *field.Path, ref v1alpha1.SecretKeyReference) field.ErrorList {
	errs := ValidateLabelName(path.Child("namespace"), ref.Namespace, "namespace name", 63)
	errs = append(errs, ValidateObjectName(path.Child("name"), ref.Name, "Secret")...)
	switch msgs := utilvalidation.IsConfigMapKey(ref.Key); {
	case ref.Key == "":
		errs = append(errs, field.Required(path.Child("key"), "the key of the password in the Secret's data is required"))
	case len(msgs) > 0:
		errs = append(errs, field.Invalid(path.Child("key"), ref.Key, "must be a valid Secret key: "+strings.Join(msgs, "; ")))
	}
	return errs
}

// ValidateBGPAdvertisement checks a BGPAdvertisement on its own. Its address is of
// either family: IPv4 is announced as a /32, IPv6 as a /128 (docs/bgp.md); its
// communities are well formed.
func ValidateBGPAdvertisement(a *v1alpha1.BGPAdvertisement) field.ErrorList {
	errs := validateAdvertisement(a.Spec.ExternalNetwork, a.Spec.Address, a.Spec.NodeName)
	return append(errs, ValidateCommunities(field.NewPath("spec", "communities"), a.Spec.Communities)...)
}

// ValidateBGPAdvertisementUpdate checks an updated BGPAdvertisement: its network and
// address are immutable (the controller rewrites nodeName and communities in place).
func ValidateBGPAdvertisementUpdate(newAd, oldAd *v1alpha1.BGPAdvertisement) field.ErrorList {
	n, o := newAd.Spec, oldAd.Spec
	errs := validateAdvertisementUpdate(n.ExternalNetwork, n.Address, n.NodeName, o.ExternalNetwork, o.Address)
	return append(errs, ValidateCommunities(field.NewPath("spec", "communities"), n.Communities)...)
}

// ValidateCommunities checks a list of BGP communities: each standard ("65000:100") or
// large ("65000:1:2") in its canonical decimal form, each once, at most MaxCommunities.
func ValidateCommunities(path *field.Path, list []string) field.ErrorList {
	var errs field.ErrorList
	if len(list) > MaxCommunities {
		errs = append(errs, field.TooMany(path, len(list), MaxCommunities))
	}
	seen := make(map[string]int, len(list))
	for i, c := range list {
		if _, err := community.Parse(c); err != nil {
			errs = append(errs, field.Invalid(path.Index(i), c,
				"must be a standard community, two numbers of 0 to 65535 (65000:100), or a large one, three numbers of 0 to 4294967295 (65000:1:2), in decimal without leading zeros"))
			continue
		}
		if j, dup := seen[c]; dup {
			e := field.Duplicate(path.Index(i), c)
			e.Detail = fmt.Sprintf("already listed as %s", path.Index(j))
			errs = append(errs, e)
			continue
		}
		seen[c] = i
	}
	return errs
}

// validateAdvertisement checks the spec every advertisement kind shares: a network, an
// address and the one Node that advertises it.
func validateAdvertisement(network, address, nodeName string) field.ErrorList {
	spec := field.NewPath("spec")
	errs := ValidateObjectName(spec.Child("externalNetwork"), network, "ExternalNetwork")
	errs = append(errs, validateIP(spec.Child("address"), address)...)
	return append(errs, ValidateObjectName(spec.Child("nodeName"), nodeName, "Node")...)
}

// validateAdvertisementUpdate adds the transition rule: only nodeName may change.
func validateAdvertisementUpdate(network, address, nodeName, oldNetwork, oldAddress string) field.ErrorList {
	spec := field.NewPath("spec")
	errs := validateAdvertisement(network, address, nodeName)
	errs = append(errs, validateImmutable(spec.Child("externalNetwork"), network, oldNetwork)...)
	return append(errs, validateImmutable(spec.Child("address"), address, oldAddress)...)
}
