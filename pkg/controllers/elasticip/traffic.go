package elasticip

import (
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// trafficInput is what says whether the user of an ElasticIP can carry its traffic
// (docs/reference.md#elasticip): the holder decision, and the objects the node agent
// programs the datapath from.
type trafficInput struct {
	decision HolderDecision
	address  string
	// arp: the network is of type arp, so a Node must answer ARP (NDP for IPv6) for the
	// address.
	arp bool
	// target is the NetworkInterface an ElasticIPAttachment holder translates to (nil
	// when it does not exist); targetName names it.
	target     *v1alpha1.NetworkInterface
	targetName string
	// advert is the ElasticIP's ARPAdvertisement, nil when there is none.
	advert *v1alpha1.ARPAdvertisement
}

// trafficBlocked says why the holder of the address cannot carry traffic yet, as the
// reason and message of a False Attached condition; nil when it can, or when nobody
// holds the address (the holder decision then explains itself). The phase stays
// Attached: the address is used, and kubectl get shows ATTACHED False beside it.
//
// NAT: the target NetworkInterface must exist, with a Pod IP and a Node. On an arp
// network the advertisement must name the holder's Node, and that Node's agent must
// answer for its current generation: it answers only for addresses it can deliver (the
// NAT mapping or the direct route is in place), so Answering is the datapath's word.
// On a bgp network, announcementBlocked says the same of the BGPAdvertisement.
// Answering Unknown means the agent stopped renewing its heartbeat Lease (package
// answering): the address may be unreachable, and the message says since when.
func trafficBlocked(in trafficInput) *conditionError {
	d := in.decision
	if d.Holder == nil || d.Conflict {
		return nil
	}
	blocked := func(reason, format string, args ...any) *conditionError {
		return &conditionError{reason, d.Message + "; " + fmt.Sprintf(format, args...)}
	}
	if d.Holder.Kind == v1alpha1.AttachmentKindElasticIPAttachment {
		switch t := in.target; {
		case t == nil:
			return blocked(v1alpha1.ReasonWaitingForNetworkInterface,
				"no traffic reaches it: its NetworkInterface %q does not exist (is its Pod scheduled?)", in.targetName)
		case t.Spec.NodeName == "":
			return blocked(v1alpha1.ReasonWaitingForNetworkInterface,
				"no traffic reaches it: its NetworkInterface %q is on no Node yet", in.targetName)
		case t.Status.Address == "":
			return blocked(v1alpha1.ReasonWaitingForNetworkInterface,
				"no traffic reaches it: its NetworkInterface %q has no Pod IP yet", in.targetName)
		}
	}
	if d.NodeName == "" {
		return blocked(v1alpha1.ReasonWaitingForNetworkInterface, "no traffic reaches it: it is on no Node yet")
	}
	if !in.arp {
		return nil
	}
	addr, _ := netip.ParseAddr(in.address)
	ad, proto := in.advert, advertisement.Protocol(addr)
	if ad == nil || ad.DeletionTimestamp != nil || ad.Spec.NodeName != d.NodeName || ad.Spec.Address != in.address {
		return blocked(v1alpha1.ReasonNotAnswering, "Node %q does not answer %s for %q yet (no ARPAdvertisement names it)", d.NodeName, proto, in.address)
	}
	answering := meta.FindStatusCondition(ad.Status.Conditions, v1alpha1.ConditionAnswering)
	if answering != nil && answering.Status == metav1.ConditionFalse && answering.ObservedGeneration == ad.Generation {
		return blocked(v1alpha1.ReasonNotAnswering, "Node %q does not answer %s for %q: %s", d.NodeName, proto, in.address, answering.Message)
	}
	if answering != nil && answering.Status == metav1.ConditionUnknown {
		return blocked(v1alpha1.ReasonAgentNotReporting, "Node %q may no longer answer %s for %q: %s", d.NodeName, proto, in.address, answering.Message)
	}
	if answering == nil || answering.Status != "True" || answering.ObservedGeneration != ad.Generation {
		return blocked(v1alpha1.ReasonNotAnswering, "Node %q does not answer %s for %q yet (ARPAdvertisement %q has no Answering condition from it)",
			d.NodeName, proto, in.address, ad.Name)
	}
	return nil
}

// trafficBlocked gathers the trafficInput of an ElasticIP from the caches.
func (c *Controller) trafficBlocked(eip *v1alpha1.ElasticIP, network *v1alpha1.ExternalNetwork, claim *v1alpha1.AllocationClaim, d HolderDecision) *conditionError {
	if claim == nil || d.Holder == nil {
		return nil
	}
	in := trafficInput{decision: d, address: claim.Spec.Address, arp: network != nil && network.Spec.Type == v1alpha1.AdvertiseARP}
	if d.Holder.Kind == v1alpha1.AttachmentKindElasticIPAttachment {
		if a, err := c.attachments.ElasticIPAttachments(eip.Namespace).Get(d.Holder.Name); err == nil {
			in.targetName = a.Spec.TargetRef.NetworkInterfaceName
			if nic, err := c.nics.NetworkInterfaces(eip.Namespace).Get(in.targetName); err == nil {
				in.target = nic
			}
		}
	}
	if in.arp {
		if ad, ok := c.arp.current(advertisement.Of(eip), claim.Spec.Address, network.Name); ok {
			in.advert = ad
		}
	}
	if blocked := trafficBlocked(in); blocked != nil {
		return blocked
	}
	return c.announcementBlocked(eip, network, claim, d)
}
