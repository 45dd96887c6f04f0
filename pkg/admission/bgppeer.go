package admission

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/apis/juneau/validation"
)

// bgpPeerRules: the spec rules (docs/bgp.md#bgppeer), and no other BGPPeer with the same
// peerAddress whose nodeSelector can select a Node this one selects (a Node keeps one
// session per router address). The uniqueness check runs on the cache and, when that
// finds nothing, once more on a live list, so two BGPPeers created at once are caught.
// An update is checked again only when the address or the selector changes.
func (v *Validators) bgpPeerRules() rules[*v1alpha1.BGPPeer] {
	unique := func(ctx context.Context, p *v1alpha1.BGPPeer) (field.ErrorList, error) {
		return confirmed(ctx, noErrors, func(ctx context.Context, live bool) (field.ErrorList, error) {
			peers, err := v.r.peersAt(ctx, p.Spec.PeerAddress, live)
			if err != nil {
				return nil, err
			}
			return validation.ValidateBGPPeerUnique(p, peers), nil
		})
	}
	return rules[*v1alpha1.BGPPeer]{
		create: func(ctx context.Context, p *v1alpha1.BGPPeer) (field.ErrorList, error) {
			if errs := validation.ValidateBGPPeer(p); len(errs) > 0 {
				return errs, nil
			}
			return unique(ctx, p)
		},
		update: func(ctx context.Context, p, old *v1alpha1.BGPPeer) (field.ErrorList, error) {
			if errs := validation.ValidateBGPPeerUpdate(p, old); len(errs) > 0 {
				return errs, nil
			}
			if p.Spec.PeerAddress == old.Spec.PeerAddress && equality.Semantic.DeepEqual(p.Spec.NodeSelector, old.Spec.NodeSelector) {
				return nil, nil
			}
			return unique(ctx, p)
		},
		unchanged: func(p, old *v1alpha1.BGPPeer) bool { return equality.Semantic.DeepEqual(p.Spec, old.Spec) },
	}
}
