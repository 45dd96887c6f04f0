package elasticip

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/status"
)

// syncDeleting is docs/reference.md#deletion. While any NetworkInterface names the ElasticIP its Pod may
// carry the address, so the claim and the advertisement stay (and no new NIC gets the
// address); once none is left, everything is released and the finalizer goes.
// NAT use is refused deletion by the webhook; should an attachment slip through, the
// address is released anyway: the attachment turns Error and its NAT rules are removed.
// An ElasticIP without the finalizer that another finalizer keeps is released the same
// way while it waits for that one.
func (c *Controller) syncDeleting(ctx context.Context, eip *v1alpha1.ElasticIP) error {
	claims, err := c.claimsOf(eip)
	if err != nil {
		return err
	}
	nics := c.nicsOf(eip)
	if len(nics) > 0 {
		names := make([]string, len(nics))
		for i, n := range nics {
			names[i] = n.Name
		}
		slices.Sort(names)
		decision := c.decide(eip, true)
		var alloc allocation
		if len(claims) > 0 {
			alloc.claim = claims[0]
		}
		deps := c.resolve(eip)
		deps.keepReservation(eip, alloc.claim)
		if deps.err == nil {
			if err := c.syncAdvertisement(ctx, eip, deps.network, alloc.claim, decision); err != nil {
				return err
			}
		}
		return c.writeStatus(ctx, eip, desiredStatus(statusInput{eip: eip, alloc: alloc, decision: decision, waitingFor: names,
			blocked: c.trafficBlocked(eip, deps.network, alloc.claim, decision), now: metav1.NewTime(c.clock.Now())}))
	}

	if err := c.deleteAdvertisements(ctx, eip); err != nil {
		return err
	}
	released := len(claims) > 0
	for _, claim := range claims {
		if err := c.deleteClaim(ctx, claim); err != nil {
			return err
		}
	}
	if name, ok := c.echoes.claimCreatedFor(eip.UID); ok {
		// Created by us but not in the cache yet: it must not leak either.
		claim, err := c.client.JuneauV1alpha1().AllocationClaims().Get(ctx, name, metav1.GetOptions{})
		if err == nil && claim.Spec.Consumer.UID == string(eip.UID) {
			if err := c.deleteClaim(ctx, claim); err != nil {
				return err
			}
			released = true
		} else if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	if slices.Contains(eip.Finalizers, v1alpha1.FinalizerElasticIP) {
		if err := c.removeFinalizer(ctx, eip); err != nil {
			return err
		}
		released = true
	}
	if !released {
		return nil // nothing was left to release (again, while another finalizer waits)
	}
	if eip.Status.Address != "" {
		status.Eventf(c.recorder, eip, v1alpha1.ReasonReleased, "released address %q", eip.Status.Address)
	}
	logger(ctx, eip).Info("Released ElasticIP", "address", eip.Status.Address)
	return nil
}

func (c *Controller) removeFinalizer(ctx context.Context, eip *v1alpha1.ElasticIP) error {
	rest := slices.DeleteFunc(slices.Clone(eip.Finalizers), func(f string) bool { return f == v1alpha1.FinalizerElasticIP })
	patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q,"finalizers":%s}}`, eip.ResourceVersion, jsonList(rest))
	_, err := c.client.JuneauV1alpha1().ElasticIPs(eip.Namespace).Patch(ctx, eip.Name, types.MergePatchType, []byte(patch),
		metav1.PatchOptions{FieldManager: v1alpha1.FieldManagerController})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
