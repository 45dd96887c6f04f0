package elasticip

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// announcementBlocked says why the user of an ElasticIP of a bgp network cannot carry
// traffic yet, as the reason and message of a False Attached condition; nil when it can,
// on other networks, or when nobody holds the address (the holder decision then explains
// itself). The phase stays Attached: the address is used, and kubectl get shows ATTACHED
// False beside it (docs/bgp.md).
//
// Routers send the address's traffic to a Node only once that Node announces its /32 to
// them: the ElasticIP's BGPAdvertisement must name the holder's Node, and that Node's
// agent must report it Announced (to at least one Established peer) for its current
// generation. The agent announces only addresses it can deliver (the NAT mapping or the
// direct route is in place), so Announced is the datapath's word as well.
func announcementBlocked(d HolderDecision, address string, ad *v1alpha1.BGPAdvertisement) *conditionError {
	if d.Holder == nil || d.Conflict || d.NodeName == "" {
		return nil
	}
	blocked := func(format string, args ...any) *conditionError {
		return &conditionError{v1alpha1.ReasonNotAnnounced, d.Message + "; " + fmt.Sprintf(format, args...)}
	}
	if ad == nil || ad.DeletionTimestamp != nil || ad.Spec.NodeName != d.NodeName || ad.Spec.Address != address {
		return blocked("Node %q does not announce %q to BGP routers yet (no BGPAdvertisement names it)", d.NodeName, address)
	}
	announced := meta.FindStatusCondition(ad.Status.Conditions, v1alpha1.ConditionAnnounced)
	switch {
	case announced == nil || announced.ObservedGeneration != ad.Generation:
		return blocked("Node %q does not announce %q to BGP routers yet (BGPAdvertisement %q has no Announced condition from it)",
			d.NodeName, address, ad.Name)
	case announced.Status != metav1.ConditionTrue:
		return blocked("Node %q does not announce %q to any Established BGP peer (BGPAdvertisement %q: %s: %s)",
			d.NodeName, address, ad.Name, announced.Reason, announced.Message)
	}
	return nil
}

// announcementBlocked gathers what the function of that name needs from the caches.
func (c *Controller) announcementBlocked(eip *v1alpha1.ElasticIP, network *v1alpha1.ExternalNetwork, claim *v1alpha1.AllocationClaim, d HolderDecision) *conditionError {
	if network == nil || network.Spec.Type != v1alpha1.AdvertiseBGP || claim == nil {
		return nil
	}
	ad, ok := c.bgp.current(advertisement.Of(eip), claim.Spec.Address, network.Name)
	if !ok {
		ad = nil
	}
	return announcementBlocked(d, claim.Spec.Address, ad)
}
