package elasticip

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/controllers/indexes"
	"github.com/loutres/juneau/pkg/status"
)

// desiredAdvertisement is docs/reference.md#arp-advertisement: on an arp network, the Node of whoever uses the
// address answers ARP for it; nobody (unused, waiting, conflict) means no advertisement.
func desiredAdvertisement(eip *v1alpha1.ElasticIP, network *v1alpha1.ExternalNetwork, claim *v1alpha1.AllocationClaim, d HolderDecision) *v1alpha1.ARPAdvertisement {
	if network == nil || network.Spec.Type != v1alpha1.AdvertiseARP || claim == nil || d.Holder == nil || d.Conflict || d.NodeName == "" {
		return nil
	}
	return &v1alpha1.ARPAdvertisement{
		ObjectMeta: metav1.ObjectMeta{
			Name:        v1alpha1.ARPAdvertisementName(eip.Namespace, eip.Name),
			Annotations: map[string]string{v1alpha1.AnnotationOwner: indexes.Key(eip.Namespace, eip.Name)},
		},
		Spec: v1alpha1.ARPAdvertisementSpec{ExternalNetwork: network.Name, Address: claim.Name, NodeName: d.NodeName},
	}
}

// syncAdvertisement makes the advertisement match: created, moved in place (same UID)
// when the Node changes, or deleted.
func (c *Controller) syncAdvertisement(ctx context.Context, eip *v1alpha1.ElasticIP, network *v1alpha1.ExternalNetwork, claim *v1alpha1.AllocationClaim, d HolderDecision) error {
	owner := indexes.Key(eip.Namespace, eip.Name)
	want := desiredAdvertisement(eip, network, claim, d)
	name := v1alpha1.ARPAdvertisementName(eip.Namespace, eip.Name)
	if want == nil {
		return c.deleteAdvertisement(ctx, name, owner)
	}
	client := c.client.JuneauV1alpha1().ARPAdvertisements()
	have, err := c.adverts.Get(name)
	switch {
	case apierrors.IsNotFound(err):
		_, err := client.Create(ctx, want, metav1.CreateOptions{FieldManager: v1alpha1.FieldManagerController})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ARPAdvertisement %q: %w", name, err)
		}
		if err == nil {
			logger(ctx, eip).Info("Advertising address", "address", want.Spec.Address, "node", want.Spec.NodeName)
		}
		return nil
	case err != nil:
		return err
	case have.Annotations[v1alpha1.AnnotationOwner] != owner || have.Spec.Address != want.Spec.Address || have.Spec.ExternalNetwork != want.Spec.ExternalNetwork:
		// Not ours, or for another address: its immutable fields cannot be fixed in place.
		return c.deleteAdvertisementObject(ctx, have)
	case have.Spec.NodeName != want.Spec.NodeName:
		moved := have.DeepCopy()
		moved.Spec.NodeName = want.Spec.NodeName
		if _, err := client.Update(ctx, moved, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManagerController}); err != nil {
			return fmt.Errorf("moving ARPAdvertisement %q to Node %q: %w", name, want.Spec.NodeName, err)
		}
		logger(ctx, eip).Info("Moved advertisement", "address", want.Spec.Address, "from", have.Spec.NodeName, "to", want.Spec.NodeName)
		status.Eventf(c.recorder, eip, v1alpha1.EventAdvertisementMoved, "Node %q answers ARP for %q instead of Node %q",
			want.Spec.NodeName, want.Spec.Address, have.Spec.NodeName)
	}
	return nil
}

// deleteAdvertisement deletes the named advertisement if it belongs to owner.
func (c *Controller) deleteAdvertisement(ctx context.Context, name, owner string) error {
	have, err := c.adverts.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if have.Annotations[v1alpha1.AnnotationOwner] != owner {
		return nil
	}
	return c.deleteAdvertisementObject(ctx, have)
}

func (c *Controller) deleteAdvertisementObject(ctx context.Context, ad *v1alpha1.ARPAdvertisement) error {
	uid := ad.UID
	err := c.client.JuneauV1alpha1().ARPAdvertisements().Delete(ctx, ad.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting ARPAdvertisement %q: %w", ad.Name, err)
	}
	return nil
}
