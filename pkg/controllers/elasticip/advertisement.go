package elasticip

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/controllers/indexes"
	"github.com/loutres/juneau/pkg/status"
)

// desiredAdvertisement is the spec of docs/reference.md#arp-advertisement: on an arp
// network, the Node of whoever uses the address answers ARP for it; nobody (unused,
// waiting, conflict) means no advertisement. Its name is chosen only when it is created
// (advertisement.Name).
func desiredAdvertisement(network *v1alpha1.ExternalNetwork, claim *v1alpha1.AllocationClaim, d HolderDecision) *v1alpha1.ARPAdvertisementSpec {
	if network == nil || network.Spec.Type != v1alpha1.AdvertiseARP || claim == nil || d.Holder == nil || d.Conflict || d.NodeName == "" {
		return nil
	}
	return &v1alpha1.ARPAdvertisementSpec{ExternalNetwork: network.Name, Address: claim.Spec.Address, NodeName: d.NodeName}
}

// advertisementsOf returns the ElasticIP's own advertisements, found through the owner
// they carry (never through their name, which another ElasticIP may share): those
// labelled with its UID, and those an earlier version recorded under its namespace and
// name without a UID. Sorted by name.
func (c *Controller) advertisementsOf(o advertisement.Owner) []*v1alpha1.ARPAdvertisement {
	inf := c.inf.Advertisements.Informer()
	var mine []*v1alpha1.ARPAdvertisement
	if o.UID != "" {
		mine, _ = indexes.ByIndex[*v1alpha1.ARPAdvertisement](inf, indexes.AdvertisementByOwnerUID, string(o.UID))
	}
	byKey, _ := indexes.ByIndex[*v1alpha1.ARPAdvertisement](inf, indexes.AdvertisementByOwner, o.Key())
	for _, ad := range byKey {
		if ad.Labels[v1alpha1.LabelOwnerUID] == "" && advertisement.Belongs(ad, o) {
			mine = append(mine, ad)
		}
	}
	slices.SortFunc(mine, func(a, b *v1alpha1.ARPAdvertisement) int { return strings.Compare(a.Name, b.Name) })
	return slices.CompactFunc(mine, func(a, b *v1alpha1.ARPAdvertisement) bool { return a.Name == b.Name })
}

// syncAdvertisement makes the ElasticIP's advertisement match: created, moved in place
// (same object) when the Node changes, or deleted. It touches only the ElasticIP's own
// advertisements, and an orphan (whose ElasticIP is gone) in the way of its address.
func (c *Controller) syncAdvertisement(ctx context.Context, eip *v1alpha1.ElasticIP, network *v1alpha1.ExternalNetwork, claim *v1alpha1.AllocationClaim, d HolderDecision) error {
	o := advertisement.Of(eip)
	mine := c.advertisementsOf(o)
	want := desiredAdvertisement(network, claim, d)
	if want == nil {
		return c.deleteAdvertisements(ctx, mine)
	}
	// Keep the first one for the wanted address and network; the others (another
	// address, whose immutable spec cannot be fixed in place, or a spare) go.
	var keep *v1alpha1.ARPAdvertisement
	var stale []*v1alpha1.ARPAdvertisement
	for _, ad := range mine {
		if keep == nil && ad.DeletionTimestamp == nil && ad.Spec.Address == want.Address && ad.Spec.ExternalNetwork == want.ExternalNetwork {
			keep = ad
		} else {
			stale = append(stale, ad)
		}
	}
	if err := c.deleteAdvertisements(ctx, stale); err != nil {
		return err
	}
	if keep != nil {
		return c.updateAdvertisement(ctx, eip, o, keep, want)
	}
	return c.createAdvertisement(ctx, eip, o, want)
}

// createAdvertisement creates o's advertisement under the name advertisement.Name picks.
// At most one advertisement answers for an address: another one of the same address
// stands in the way until it is gone. One whose ElasticIP is gone is an orphan and is
// deleted; one of a live ElasticIP (which therefore no longer holds the address) is left
// to that ElasticIP, and its deletion brings this one back (onAdvertisement).
func (c *Controller) createAdvertisement(ctx context.Context, eip *v1alpha1.ElasticIP, o advertisement.Owner, want *v1alpha1.ARPAdvertisementSpec) error {
	others, err := indexes.ByIndex[*v1alpha1.ARPAdvertisement](c.inf.Advertisements.Informer(), indexes.AdvertisementByAddress, want.Address)
	if err != nil {
		return err
	}
	var blocked []string
	for _, other := range others {
		if other.DeletionTimestamp != nil {
			blocked = append(blocked, other.Name)
			continue
		}
		owner, ok := advertisement.OwnerOf(other)
		live, err := c.ownerLive(ctx, owner, ok)
		if err != nil {
			return err
		}
		if live {
			blocked = append(blocked, other.Name)
			continue
		}
		logger(ctx, eip).Info("Deleting orphan advertisement in the way", "advertisement", other.Name, "address", other.Spec.Address,
			"owner", owner.Key())
		if err := c.deleteAdvertisementObject(ctx, other); err != nil {
			return err
		}
	}
	if len(blocked) > 0 {
		logger(ctx, eip).V(2).Info("Address still advertised by another ElasticIP's advertisement; waiting for it to go",
			"address", want.Address, "advertisements", blocked)
		return nil
	}
	name, ok := advertisement.Name(o, c.advertisementOwner)
	if !ok {
		return fmt.Errorf("every name for the ARPAdvertisement of ElasticIP %s is taken by another ElasticIP's", o.Key())
	}
	ad := &v1alpha1.ARPAdvertisement{ObjectMeta: advertisement.Meta(name, o), Spec: *want}
	_, err = c.client.JuneauV1alpha1().ARPAdvertisements().Create(ctx, ad, metav1.CreateOptions{FieldManager: v1alpha1.FieldManagerController})
	if apierrors.IsAlreadyExists(err) {
		// The cache has not shown that name yet: retry, and Name will pick another one
		// if it is someone else's.
		return fmt.Errorf("creating ARPAdvertisement %q: the name is taken; retrying: %w", name, err)
	}
	if err != nil {
		return fmt.Errorf("creating ARPAdvertisement %q: %w", name, err)
	}
	logger(ctx, eip).Info("Advertising address", "advertisement", name, "address", want.Address, "node", want.NodeName)
	return nil
}

// updateAdvertisement moves o's advertisement to the wanted Node in place and gives an
// adopted one (of an earlier version) its owner labels.
func (c *Controller) updateAdvertisement(ctx context.Context, eip *v1alpha1.ElasticIP, o advertisement.Owner, have *v1alpha1.ARPAdvertisement, want *v1alpha1.ARPAdvertisementSpec) error {
	moved := have.Spec.NodeName != want.NodeName
	if !moved && advertisement.Labelled(have, o) {
		return nil
	}
	upd := have.DeepCopy()
	upd.Spec.NodeName = want.NodeName
	upd.Labels = maps.Clone(upd.Labels)
	if upd.Labels == nil {
		upd.Labels = map[string]string{}
	}
	maps.Copy(upd.Labels, advertisement.Labels(o))
	upd.Annotations = maps.Clone(upd.Annotations)
	if upd.Annotations == nil {
		upd.Annotations = map[string]string{}
	}
	maps.Copy(upd.Annotations, advertisement.Annotations(o))
	if _, err := c.client.JuneauV1alpha1().ARPAdvertisements().Update(ctx, upd, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManagerController}); err != nil {
		return fmt.Errorf("updating ARPAdvertisement %q (Node %q): %w", have.Name, want.NodeName, err)
	}
	if !moved {
		return nil
	}
	logger(ctx, eip).Info("Moved advertisement", "advertisement", have.Name, "address", want.Address, "from", have.Spec.NodeName, "to", want.NodeName)
	status.Eventf(c.recorder, eip, v1alpha1.EventAdvertisementMoved, "Node %q answers ARP for %q instead of Node %q",
		want.NodeName, want.Address, have.Spec.NodeName)
	return nil
}

// advertisementOwner says whose advertisement of that name exists, for
// advertisement.Name.
func (c *Controller) advertisementOwner(name string) (advertisement.Owner, bool) {
	ad, err := c.adverts.Get(name)
	if err != nil {
		return advertisement.Owner{}, false
	}
	o, _ := advertisement.OwnerOf(ad)
	return o, true
}

// ownerLive reports whether the ElasticIP an advertisement records still exists. An
// advertisement without an owner belongs to nobody. The cache answers first; a miss is
// confirmed with a read from the API server, so a lagging cache never makes a live
// ElasticIP's advertisement an orphan.
func (c *Controller) ownerLive(ctx context.Context, o advertisement.Owner, hasOwner bool) (bool, error) {
	if !hasOwner {
		return false, nil
	}
	if o.UID != "" {
		if live, _ := indexes.ByIndex[*v1alpha1.ElasticIP](c.inf.ElasticIPs.Informer(), indexes.ElasticIPByUID, string(o.UID)); len(live) > 0 {
			return true, nil
		}
	}
	eip, err := c.client.JuneauV1alpha1().ElasticIPs(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading ElasticIP %s, owner of an advertisement: %w", o.Key(), err)
	}
	return o.UID == "" || eip.UID == o.UID, nil
}

// deleteGoneAdvertisements deletes the advertisements recorded for the ElasticIP key
// (namespace/name) whose ElasticIP is gone from the cache: it was deleted without its
// finalizer (forced), and its advertisement must not outlive it. One of a live ElasticIP
// of that name (a newer one) is that ElasticIP's.
func (c *Controller) deleteGoneAdvertisements(ctx context.Context, key string) error {
	ads, err := indexes.ByIndex[*v1alpha1.ARPAdvertisement](c.inf.Advertisements.Informer(), indexes.AdvertisementByOwner, key)
	if err != nil {
		return err
	}
	var gone []*v1alpha1.ARPAdvertisement
	for _, ad := range ads {
		uid := ad.Labels[v1alpha1.LabelOwnerUID]
		if uid != "" {
			if live, _ := indexes.ByIndex[*v1alpha1.ElasticIP](c.inf.ElasticIPs.Informer(), indexes.ElasticIPByUID, uid); len(live) > 0 {
				continue
			}
		}
		gone = append(gone, ad)
	}
	if len(gone) > 0 {
		klog.FromContext(ctx).Info("Deleting advertisements of a gone ElasticIP", "elasticIP", key, "count", len(gone))
	}
	return c.deleteAdvertisements(ctx, gone)
}

func (c *Controller) deleteAdvertisements(ctx context.Context, ads []*v1alpha1.ARPAdvertisement) error {
	for _, ad := range ads {
		if ad.DeletionTimestamp != nil {
			continue
		}
		if err := c.deleteAdvertisementObject(ctx, ad); err != nil {
			return err
		}
	}
	return nil
}

// deleteAdvertisementObject deletes exactly this advertisement (UID precondition), so a
// newer one of the same name is never removed by a decision about an older one.
func (c *Controller) deleteAdvertisementObject(ctx context.Context, ad *v1alpha1.ARPAdvertisement) error {
	uid := ad.UID
	err := c.client.JuneauV1alpha1().ARPAdvertisements().Delete(ctx, ad.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting ARPAdvertisement %q: %w", ad.Name, err)
	}
	return nil
}
