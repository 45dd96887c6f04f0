package elasticip

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
	"github.com/loutres/juneau/pkg/apis/juneau/messages"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/apis/juneau/validation"
	"github.com/loutres/juneau/pkg/controllers/indexes"
	"github.com/loutres/juneau/pkg/controllers/ipam"
)

// sync reconciles one ElasticIP: finalizer, dependencies, reservation, holder,
// advertisement, status — each step read from the caches, decided by a pure function.
// A routine allocation is two writes: the claim and the status.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	eip, err := c.eips.ElasticIPs(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		// Gone (without a finalizer, or forced): its advertisements must not outlive it.
		// Its claims are released by the claim loop (onElasticIPGone).
		return c.deleteGoneAdvertisements(ctx, key)
	}
	if err != nil {
		return err
	}
	if eip.DeletionTimestamp != nil {
		return c.syncDeleting(ctx, eip)
	}
	if needsFinalizer(eip, c.nicsOf(eip)) {
		// The finalizer goes on before a NetworkInterface can be recorded as the user;
		// its update event brings us back.
		return c.addFinalizer(ctx, eip)
	}

	deps := c.resolve(eip)
	claims, err := c.claimsOf(eip)
	if err != nil {
		return err
	}
	refusal, err := c.notAdmitted(eip, deps.network)
	if err != nil {
		return err
	}
	var alloc allocation
	if deps.err == nil {
		alloc, err = c.reserve(ctx, eip, deps.pools, claims, refusal)
		if err != nil {
			return err
		}
	} else if len(claims) > 0 {
		alloc = allocation{claim: claims[0]}
	}
	deps.keepReservation(eip, alloc.claim)
	decision := c.decide(eip, false)

	if deps.err == nil {
		if err := c.syncAdvertisement(ctx, eip, deps.network, alloc.claim, decision); err != nil {
			return err
		}
	}
	st := desiredStatus(statusInput{eip: eip, deps: deps.err, outside: deps.outside, notAdmitted: refusal, alloc: alloc, decision: decision,
		blocked: c.trafficBlocked(eip, deps.network, alloc.claim, decision), now: metav1.NewTime(c.clock.Now())})
	c.announceOutside(eip, alloc.claim, deps.outside)
	c.announceKept(eip, alloc.claim, refusal)
	return c.writeStatus(ctx, eip, st)
}

// dependencies is the ExternalNetwork of an ElasticIP and its usable pools, in order.
type dependencies struct {
	network *v1alpha1.ExternalNetwork
	pools   []ipam.Pool
	// err says why no address can be reserved from the network now.
	err *conditionError
	// outside says why the reserved address lies in no usable pool (keepReservation).
	outside string
}

// conditionError is a problem that becomes a condition reason and message.
type conditionError struct {
	reason, message string
}

// resolve reads the ElasticIP's network and the pools it may allocate from
// (validation.PoolsOfNetwork): any pool the network names but may not use makes the
// dependencies unusable, as the network's own Ready condition says.
func (c *Controller) resolve(eip *v1alpha1.ElasticIP) dependencies {
	network, err := c.networks.Get(eip.Spec.ExternalNetwork)
	if err != nil {
		return dependencies{err: &conditionError{v1alpha1.ReasonMissingDependency,
			fmt.Sprintf("ExternalNetwork %q does not exist", eip.Spec.ExternalNetwork)}}
	}
	networks, _ := c.networks.List(labels.Everything())
	verdict := validation.PoolsOfNetwork(network, func(name string) *v1alpha1.AddressPool {
		pool, err := c.pools.Get(name)
		if err != nil {
			return nil
		}
		return pool
	}, networks)
	var mismatched []string
	for _, p := range verdict.WrongMode {
		mismatched = append(mismatched, fmt.Sprintf("%q (advertises by %s)", p.Name, p.Spec.AdvertiseMode))
	}
	for _, t := range verdict.Taken {
		mismatched = append(mismatched, fmt.Sprintf("%q (belongs to ExternalNetwork %q)", t.Pool, t.Owner))
	}
	pools := make([]ipam.Pool, 0, len(verdict.Usable))
	for _, pool := range verdict.Usable {
		p, err := ipam.NewPool(pool.Name, pool.Spec.Addresses)
		if err != nil {
			mismatched = append(mismatched, fmt.Sprintf("%q (%v)", pool.Name, err))
			continue
		}
		pools = append(pools, p)
	}
	switch {
	case len(verdict.Missing) > 0:
		return dependencies{network: network, pools: pools, err: &conditionError{v1alpha1.ReasonMissingDependency,
			fmt.Sprintf("AddressPools of ExternalNetwork %q do not exist: %s", network.Name, messages.Names(verdict.Missing))}}
	case len(mismatched) > 0:
		return dependencies{network: network, pools: pools, err: &conditionError{v1alpha1.ReasonInvalidAddressPool,
			fmt.Sprintf("AddressPools of ExternalNetwork %q (type %s) cannot be used by it: %s",
				network.Name, network.Spec.Type, joinSorted(mismatched))}}
	}
	return dependencies{network: network, pools: pools}
}

// allocation is the outcome of reserving: the claim held, or why there is none.
type allocation struct {
	claim *v1alpha1.AllocationClaim
	err   *conditionError
}

// claimsOf returns the claims reserved for this ElasticIP (by UID), the one matching the
// recorded address first. More than one only after a crash or a leader handover.
func (c *Controller) claimsOf(eip *v1alpha1.ElasticIP) ([]*v1alpha1.AllocationClaim, error) {
	claims, err := indexes.ByIndex[*v1alpha1.AllocationClaim](c.inf.Claims.Informer(), indexes.ClaimByConsumerUID, string(eip.UID))
	if err != nil {
		return nil, err
	}
	slices.SortFunc(claims, func(a, b *v1alpha1.AllocationClaim) int {
		switch {
		case a.Spec.Address == eip.Status.Address:
			return -1
		case b.Spec.Address == eip.Status.Address:
			return 1
		}
		return compareAddr(a.Spec.Address, b.Spec.Address)
	})
	return claims, nil
}

// reserve returns the ElasticIP's claim: adopted when one exists (also one this process
// created that the cache has not shown yet), otherwise newly created — requestedIP, or
// the first free address of the pools — unless refusal says the network does not admit
// the ElasticIP's namespace (tenancy.go). Extra claims of the same consumer are deleted.
func (c *Controller) reserve(ctx context.Context, eip *v1alpha1.ElasticIP, pools []ipam.Pool, claims []*v1alpha1.AllocationClaim, refusal string) (allocation, error) {
	if len(claims) > 0 {
		for _, extra := range claims[1:] {
			if err := c.deleteClaim(ctx, extra); err != nil {
				return allocation{}, err
			}
		}
		return allocation{claim: claims[0]}, nil
	}
	if name, ok := c.echoes.claimCreatedFor(eip.UID); ok {
		claim, err := c.client.JuneauV1alpha1().AllocationClaims().Get(ctx, name, metav1.GetOptions{})
		if err == nil && claim.Spec.Consumer.UID == string(eip.UID) {
			return allocation{claim: claim}, nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return allocation{}, err
		}
	}
	if refusal != "" {
		return allocation{err: notAdmittedError(refusal)}, nil
	}
	family, ok := validation.Family(eip.Spec.IPFamily)
	if !ok {
		return allocation{err: &conditionError{v1alpha1.ReasonInvalidAddressPool,
			fmt.Sprintf("spec.ipFamily %q is neither IPv4 nor IPv6", eip.Spec.IPFamily)}}, nil
	}
	all := pools
	if pools = ipam.OfFamily(all, family); len(pools) == 0 {
		return allocation{err: &conditionError{v1alpha1.ReasonNoAddressAvailable,
			fmt.Sprintf("ExternalNetwork %q has no %s AddressPool (%s): add one to its spec.addressPools", eip.Spec.ExternalNetwork, family, poolNames(all))}}, nil
	}
	if eip.Spec.RequestedIP != "" {
		return c.reserveRequested(ctx, eip, pools)
	}
	rebuilt := false
	for {
		cand, ok := c.index.Take(pools) // held for us while the claim is created
		if !ok && !rebuilt {
			// Before reporting exhaustion, drop marks the cache never confirmed.
			c.rebuildIndex()
			rebuilt = true
			continue
		}
		if !ok {
			return allocation{err: &conditionError{v1alpha1.ReasonNoAddressAvailable,
				fmt.Sprintf("every %s AddressPool of ExternalNetwork %q is exhausted: %s", family, eip.Spec.ExternalNetwork, poolNames(pools))}}, nil
		}
		claim, err := c.createClaim(ctx, eip, cand)
		if apierrors.IsAlreadyExists(err) {
			continue // the cache lagged: the address stays marked, try the next one
		}
		if err != nil {
			c.index.Unmark(cand.Addr)
			return allocation{}, err
		}
		return allocation{claim: claim}, nil
	}
}

func (c *Controller) reserveRequested(ctx context.Context, eip *v1alpha1.ElasticIP, pools []ipam.Pool) (allocation, error) {
	addr, err := iprange.ParseAddr(eip.Spec.RequestedIP)
	if err != nil {
		return allocation{err: &conditionError{v1alpha1.ReasonInvalidAddressPool,
			fmt.Sprintf("requestedIP %q %s", eip.Spec.RequestedIP, iprange.Reason(err))}}, nil
	}
	pool, ok := ipam.PoolFor(pools, addr)
	if !ok {
		return allocation{err: &conditionError{v1alpha1.ReasonInvalidAddressPool,
			fmt.Sprintf("requestedIP %q lies in no %s AddressPool of ExternalNetwork %q (%s)", eip.Spec.RequestedIP, eip.Spec.Family(), eip.Spec.ExternalNetwork, poolNames(pools))}}, nil
	}
	claim, err := c.createClaim(ctx, eip, ipam.Candidate{Pool: pool, Addr: addr})
	if apierrors.IsAlreadyExists(err) {
		holder, getErr := c.client.JuneauV1alpha1().AllocationClaims().Get(ctx, iprange.ClaimName(addr), metav1.GetOptions{})
		if getErr != nil {
			return allocation{}, getErr
		}
		if holder.Spec.Consumer.UID == string(eip.UID) {
			return allocation{claim: holder}, nil
		}
		return allocation{err: &conditionError{v1alpha1.ReasonAddressInUse,
			fmt.Sprintf("requestedIP %q is reserved by %s", eip.Spec.RequestedIP, holder.Spec.Consumer.Describe())}}, nil
	}
	if err != nil {
		return allocation{}, err
	}
	return allocation{claim: claim}, nil
}

func (c *Controller) createClaim(ctx context.Context, eip *v1alpha1.ElasticIP, cand ipam.Candidate) (*v1alpha1.AllocationClaim, error) {
	claim := &v1alpha1.AllocationClaim{
		ObjectMeta: metav1.ObjectMeta{Name: iprange.ClaimName(cand.Addr)},
		Spec: v1alpha1.AllocationClaimSpec{
			AddressPool: cand.Pool,
			Address:     cand.Addr.String(),
			Consumer: v1alpha1.ConsumerReference{
				Kind: v1alpha1.ConsumerKindElasticIP, Namespace: eip.Namespace, Name: eip.Name, UID: string(eip.UID),
			},
		},
	}
	var created *v1alpha1.AllocationClaim
	shown, err := c.written(indexes.Key(eip.Namespace, eip.Name), claimWrite, func() (string, string, bool, error) {
		var err error
		created, err = c.client.JuneauV1alpha1().AllocationClaims().Create(ctx, claim,
			metav1.CreateOptions{FieldManager: v1alpha1.FieldManagerController})
		if err != nil {
			return "", "", false, err
		}
		return created.Name, created.ResourceVersion, true, nil
	})
	if err != nil {
		return nil, err
	}
	if !shown { // until the informer shows it (claimShown)
		c.echoes.createdClaim(eip.UID, created.Name)
	}
	c.index.Mark(cand.Addr)
	c.metrics.allocated()
	if l := klog.FromContext(ctx).V(2); l.Enabled() {
		l.Info("Reserved address", "elasticIP", klog.KObj(eip), "address", created.Spec.Address, "pool", cand.Pool)
	}
	return created, nil
}

// deleteClaim deletes exactly this claim (UID precondition), tolerating it being gone.
func (c *Controller) deleteClaim(ctx context.Context, claim *v1alpha1.AllocationClaim) error {
	_, err := c.deleteClaimReporting(ctx, claim)
	return err
}

// deleteClaimReporting is deleteClaim that also says whether this call deleted it.
func (c *Controller) deleteClaimReporting(ctx context.Context, claim *v1alpha1.AllocationClaim) (bool, error) {
	uid := claim.UID
	err := c.client.JuneauV1alpha1().AllocationClaims().Delete(ctx, claim.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return false, fmt.Errorf("deleting AllocationClaim %q: %w", claim.Name, err)
	}
	return err == nil, nil
}

// decide gathers the users of the ElasticIP from the caches and asks DecideHolder.
func (c *Controller) decide(eip *v1alpha1.ElasticIP, deleting bool) HolderDecision {
	key := indexes.Key(eip.Namespace, eip.Name)
	in := HolderInput{Name: eip.Name, EIPDeleting: deleting, PreviousHolder: eip.Status.Attachment}
	attachments, _ := indexes.ByIndex[*v1alpha1.ElasticIPAttachment](c.inf.Attachments.Informer(), indexes.AttachmentByElasticIP, key)
	for _, a := range attachments {
		in.Attachments = append(in.Attachments, AttachmentInfo{Name: a.Name, UID: a.UID, Deleting: a.DeletionTimestamp != nil, NodeName: a.Status.NodeName})
	}
	for _, nic := range c.nicsOf(eip) {
		in.NICs = append(in.NICs, NICInfo{Name: nic.Name, UID: nic.UID, Created: nic.CreationTimestamp.Time,
			Deleting: nic.DeletionTimestamp != nil, NodeName: nic.Spec.NodeName})
	}
	return DecideHolder(in)
}

// nicsOf returns the NetworkInterfaces that name the ElasticIP and may carry it. A NIC
// made after its Pod's network was set up (spec.createdAfterPodNetwork) was never
// plumbed: it is no user, and a deleting ElasticIP does not wait for it
// (docs/reference.md#networkinterface).
func (c *Controller) nicsOf(eip *v1alpha1.ElasticIP) []*v1alpha1.NetworkInterface {
	nics, _ := indexes.ByIndex[*v1alpha1.NetworkInterface](c.inf.NetworkInterfaces.Informer(), indexes.NICByElasticIP, indexes.Key(eip.Namespace, eip.Name))
	return slices.DeleteFunc(nics, func(n *v1alpha1.NetworkInterface) bool { return n.Spec.CreatedAfterPodNetwork })
}

// needsFinalizer says whether the ElasticIP must get the finalizer now: only deletion
// that must wait needs it (docs/reference.md#deletion), and it must wait while a
// NetworkInterface names the ElasticIP, since that Pod may carry the address. Every
// other user is released at once: the webhook refuses to delete an ElasticIP an
// attachment uses, and an unused one is released as soon as the watch shows it gone
// (onElasticIPGone). So a routine allocation writes no finalizer. A finalizer already
// in place stays until the deletion is done.
func needsFinalizer(eip *v1alpha1.ElasticIP, nics []*v1alpha1.NetworkInterface) bool {
	return len(nics) > 0 && !slices.Contains(eip.Finalizers, v1alpha1.FinalizerElasticIP)
}

func (c *Controller) addFinalizer(ctx context.Context, eip *v1alpha1.ElasticIP) error {
	patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q,"finalizers":%s}}`, eip.ResourceVersion,
		jsonList(append(slices.Clone(eip.Finalizers), v1alpha1.FinalizerElasticIP)))
	_, err := c.client.JuneauV1alpha1().ElasticIPs(eip.Namespace).Patch(ctx, eip.Name, types.MergePatchType, []byte(patch),
		metav1.PatchOptions{FieldManager: v1alpha1.FieldManagerController})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // a newer version or its absence brings us back
	}
	return err
}

// rebuildIndex resets the address index to exactly the claims in the cache.
func (c *Controller) rebuildIndex() {
	all, err := c.claims.List(labels.Everything())
	if err != nil {
		return
	}
	addrs := make([]netip.Addr, 0, len(all))
	for _, claim := range all {
		if a, err := iprange.AddrOfClaimName(claim.Name); err == nil {
			addrs = append(addrs, a)
		}
	}
	c.index.Replace(addrs)
}
