package bgp

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// PeerFor is the speaker's Peer for a BGPPeer; password is the TCP-MD5 password read
// from the BGPPeer's Secret, empty when it names none. It fails on what the schema and
// the webhook refuse, for an object that slipped past them.
func PeerFor(p *v1alpha1.BGPPeer, password string) (Peer, error) {
	s := p.Spec
	var errs []error
	addr, err := netip.ParseAddr(s.PeerAddress)
	if err != nil || !addr.Is4() {
		errs = append(errs, fmt.Errorf("spec.peerAddress %q is not an IPv4 address", s.PeerAddress))
	}
	asn := func(field string, v int64) uint32 {
		if v < 1 || v > v1alpha1.MaxASN {
			errs = append(errs, fmt.Errorf("%s %d is not an AS number from 1 to %d", field, v, int64(v1alpha1.MaxASN)))
			return 0
		}
		return uint32(v)
	}
	peer := Peer{
		Name:     p.Name,
		Address:  addr,
		PeerASN:  asn("spec.peerASN", s.PeerASN),
		MyASN:    asn("spec.myASN", s.MyASN),
		Password: password,
	}
	if s.HoldTime != nil {
		peer.HoldTime = s.HoldTime.Duration
	}
	if s.KeepaliveTime != nil {
		peer.KeepaliveTime = s.KeepaliveTime.Duration
	}
	if s.TTLSecurity != nil {
		peer.TTLSecurity = *s.TTLSecurity
	}
	if len(password) > MaxPasswordLength && s.PasswordSecretRef != nil {
		errs = append(errs, fmt.Errorf("spec.passwordSecretRef: the password in key %q of Secret %s/%s is %d bytes long; "+
			"the kernel takes TCP-MD5 keys of at most %d bytes", s.PasswordSecretRef.Key, s.PasswordSecretRef.Namespace,
			s.PasswordSecretRef.Name, len(password), MaxPasswordLength))
	}
	if s.EBGPMultihop != nil {
		if ttl := *s.EBGPMultihop; ttl < 2 || ttl > 255 {
			errs = append(errs, fmt.Errorf("spec.ebgpMultihop %d is not a TTL from 2 to 255", ttl))
		} else {
			peer.EBGPMultihopTTL = uint8(ttl)
		}
	}
	if s.BFD != nil {
		peer.BFD = bfdFor(*s.BFD, &errs)
	}
	if len(errs) == 0 {
		if err := peer.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Peer{}, fmt.Errorf("BGPPeer %q: %w", p.Name, err)
	}
	return peer, nil
}

// Selects reports whether a BGPPeer peers with a Node of these labels: its
// nodeSelector matches them, and an absent or empty one matches every Node.
func Selects(p *v1alpha1.BGPPeer, nodeLabels map[string]string) (bool, error) {
	if p.Spec.NodeSelector == nil {
		return true, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(p.Spec.NodeSelector)
	if err != nil {
		return false, fmt.Errorf("BGPPeer %q: spec.nodeSelector: %w", p.Name, err)
	}
	return sel.Matches(labels.Set(nodeLabels)), nil
}

// bfdFor is the BFD of a BGPPeer's spec.bfd, its absent fields at their defaults (the
// API server fills them in; objects from before the field existed, or written by
// clients that skip defaulting, may lack them). Out of range values are reported.
func bfdFor(b v1alpha1.BGPPeerBFD, errs *[]error) BFD {
	out := BFD{Enabled: true, MinRx: v1alpha1.DefaultBFDIntervalMilliseconds * time.Millisecond,
		MinTx: v1alpha1.DefaultBFDIntervalMilliseconds * time.Millisecond, Multiplier: v1alpha1.DefaultBFDMultiplier}
	for _, iv := range []struct {
		field string
		in    *metav1.Duration
		out   *time.Duration
	}{{"spec.bfd.minRxInterval", b.MinRxInterval, &out.MinRx}, {"spec.bfd.minTxInterval", b.MinTxInterval, &out.MinTx}} {
		if iv.in == nil {
			continue
		}
		if d := iv.in.Duration; d < minBFDInterval || d > maxAPIBFDInterval || d%time.Millisecond != 0 {
			*errs = append(*errs, fmt.Errorf("%s %s is not a whole number of milliseconds from %s to %s", iv.field, d, minBFDInterval, maxAPIBFDInterval))
		} else {
			*iv.out = d
		}
	}
	if m := b.Multiplier; m != nil {
		if *m < 2 || *m > 255 {
			*errs = append(*errs, fmt.Errorf("spec.bfd.multiplier %d is not from 2 to 255", *m))
		} else {
			out.Multiplier = uint8(*m)
		}
	}
	return out
}

// The bounds of the BFD intervals of the API (docs/bgp.md#bfd).
const (
	minBFDInterval    = 50 * time.Millisecond
	maxAPIBFDInterval = 60 * time.Second
)
