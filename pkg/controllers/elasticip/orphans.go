package elasticip

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/status"
)

// cachedElasticIP reports whether the cache holds the ElasticIP namespace/name of this
// UID: a UID names one object, whose name never changes, so a lookup by name answers
// without an index of UIDs (one more map per ElasticIP).
func (c *Controller) cachedElasticIP(namespace, name string, uid types.UID) bool {
	eip, err := c.eips.ElasticIPs(namespace).Get(name)
	return err == nil && eip.UID == uid
}

// syncClaim deletes a claim whose consumer no longer exists (docs/reference.md#allocationclaim), but only once
// the claim is older than the grace period and a fresh read from the API server confirms
// the consumer is gone, so a lagging cache never frees a live address. The claim of an
// ElasticIP the watch has shown deleted (onElasticIPGone) is released at once, without
// the grace period or a read (the deletion of that UID is final), with the Event Released.
func (c *Controller) syncClaim(ctx context.Context, key string) error {
	claim, err := c.claims.Get(key)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	consumer := claim.Spec.Consumer
	if consumer.Kind != v1alpha1.ConsumerKindElasticIP {
		return nil // not ours to judge
	}
	if c.cachedElasticIP(consumer.Namespace, consumer.Name, types.UID(consumer.UID)) {
		return nil
	}
	if gone, ok := c.goneElasticIP(consumer.UID); ok {
		// The watch showed this very ElasticIP deleted: no read can bring it back.
		deleted, err := c.deleteClaimReporting(ctx, claim)
		if err != nil || !deleted {
			return err // released already (by its deletion with the finalizer), or an error
		}
		status.Eventf(c.recorder, gone, v1alpha1.ReasonReleased, "released address %q", claim.Spec.Address)
		klog.FromContext(ctx).Info("Released ElasticIP", "elasticIP", klog.KObj(gone), "address", claim.Spec.Address)
		return nil
	}
	if age := c.clock.Since(claim.CreationTimestamp.Time); age < c.grace {
		c.claimLoop.AddAfter(key, c.grace-age)
		return nil
	}
	eip, err := c.client.JuneauV1alpha1().ElasticIPs(consumer.Namespace).Get(ctx, consumer.Name, metav1.GetOptions{})
	switch {
	case err == nil && string(eip.UID) == consumer.UID:
		return nil
	case err != nil && !apierrors.IsNotFound(err):
		return err
	}
	klog.FromContext(ctx).Info("Deleting orphan AllocationClaim", "claim", claim.Name,
		"consumer", klog.KRef(consumer.Namespace, consumer.Name), "uid", consumer.UID)
	c.metrics.orphan()
	return c.deleteClaim(ctx, claim)
}
