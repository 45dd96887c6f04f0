package elasticip

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/controllers/ipam"
	"github.com/loutres/juneau/pkg/status"
)

// keepReservation applies docs/reference.md#allocation to a reservation made earlier:
// it stands whatever became of the pools since (a pool deleted, or re-created without
// the address, or the network's pools unusable for new reservations), so the address
// keeps its user and its traffic, and the status says what it is — Allocated and
// Attached as they are, never an Error that contradicts the traffic. Only a new
// reservation needs usable pools. A reserved address that no pool of the network holds
// any more is noted (deps.outside): it stays reserved while the ElasticIP exists and is
// never handed out again once released, since allocation only takes addresses inside
// the pools.
func (d *dependencies) keepReservation(eip *v1alpha1.ElasticIP, claim *v1alpha1.AllocationClaim) {
	if claim == nil || d.network == nil {
		return
	}
	d.err = nil
	d.outside = outsidePools(eip, d.pools, claim)
}

// outsidePools says why a reserved address lies in no usable pool of the network any
// more, as a clause about the pool it was reserved from ("which no longer holds it
// …"), or "" when a pool holds it.
func outsidePools(eip *v1alpha1.ElasticIP, pools []ipam.Pool, claim *v1alpha1.AllocationClaim) string {
	addr, err := netip.ParseAddr(claim.Spec.Address)
	if err != nil {
		return ""
	}
	if _, ok := ipam.PoolFor(pools, addr); ok {
		return ""
	}
	return fmt.Sprintf("which no longer holds it (the pool was deleted, or made again without it), nor does any usable AddressPool of ExternalNetwork %q (%s): "+
		"it stays reserved for this ElasticIP and whoever uses it now, and is never handed out again once released; delete the ElasticIP to get an address from the pools",
		eip.Spec.ExternalNetwork, poolNames(pools))
}

// announceOutside records a Warning Event when the reserved address is first found
// outside the pools (the status message says so from then on).
func (c *Controller) announceOutside(eip *v1alpha1.ElasticIP, claim *v1alpha1.AllocationClaim, outside string) {
	if outside == "" {
		return
	}
	if cond := meta.FindStatusCondition(eip.Status.Conditions, v1alpha1.ConditionAllocated); cond != nil && strings.Contains(cond.Message, outside) {
		return
	}
	status.Eventf(c.recorder, eip, v1alpha1.ReasonAddressOutsidePools, "Address %q was reserved from AddressPool %q, %s",
		claim.Spec.Address, claim.Spec.AddressPool, outside)
}
