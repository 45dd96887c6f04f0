package elasticip

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/community"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/controllers/indexes"
	"github.com/loutres/juneau/pkg/status"
	"github.com/loutres/juneau/pkg/workloop"
)

// desiredAdvertisement is the spec of docs/reference.md#arp-advertisement and
// docs/bgp.md#bgpadvertisement: the Node of whoever uses the address advertises it, by
// ARP on an arp network and by BGP on a bgp network; nobody (unused, waiting, conflict)
// means no advertisement. Its name is chosen only when it is created
// (advertisement.Name).
func desiredAdvertisement(network *v1alpha1.ExternalNetwork, claim *v1alpha1.AllocationClaim, d HolderDecision) *adSpec {
	if network == nil || claim == nil || d.Holder == nil || d.Conflict || d.NodeName == "" {
		return nil
	}
	return &adSpec{ExternalNetwork: network.Name, Address: claim.Spec.Address, NodeName: d.NodeName}
}

// poolCommunities are the communities a BGPAdvertisement of the pool's addresses
// carries: its spec.bgpCommunities in order (community.Compare), each once; any the
// schema and the webhook would have refused is left out.
func poolCommunities(pool *v1alpha1.AddressPool) []string {
	var list []community.Community
	for _, c := range pool.Spec.BGPCommunities {
		if parsed, err := community.Parse(c); err == nil {
			list = append(list, parsed)
		}
	}
	if len(list) == 0 {
		return nil
	}
	slices.SortFunc(list, community.Compare)
	list = slices.Compact(list)
	out := make([]string, len(list))
	for i, c := range list {
		out[i] = c.String()
	}
	return out
}

// syncAdvertisement keeps the ElasticIP's advertisement of its network's type and
// removes any of the other kind (left from a network of the same name and another type).
func (c *Controller) syncAdvertisement(ctx context.Context, eip *v1alpha1.ElasticIP, network *v1alpha1.ExternalNetwork, claim *v1alpha1.AllocationClaim, d HolderDecision) error {
	want := desiredAdvertisement(network, claim, d)
	if want != nil && network.Spec.Type == v1alpha1.AdvertiseBGP {
		if pool, err := c.pools.Get(claim.Spec.AddressPool); err == nil {
			want.Communities = poolCommunities(pool)
		}
	}
	for _, k := range c.kinds {
		var w *adSpec
		if want != nil && network.Spec.Type == k.mode() {
			w = want
		}
		if err := k.sync(ctx, c, eip, w); err != nil {
			return err
		}
	}
	return nil
}

// deleteAdvertisements deletes every advertisement of the ElasticIP, of both kinds.
func (c *Controller) deleteAdvertisements(ctx context.Context, eip *v1alpha1.ElasticIP) error {
	for _, k := range c.kinds {
		if err := k.sync(ctx, c, eip, nil); err != nil {
			return err
		}
	}
	return nil
}

// deleteGoneAdvertisements deletes the advertisements recorded for the ElasticIP key
// (namespace/name) whose ElasticIP is gone from the cache: it was deleted without its
// finalizer (forced), and its advertisement must not outlive it.
func (c *Controller) deleteGoneAdvertisements(ctx context.Context, key string) error {
	for _, k := range c.kinds {
		if err := k.deleteGone(ctx, c, key); err != nil {
			return err
		}
	}
	return nil
}

func (k *adKind[T]) mode() v1alpha1.AdvertiseMode       { return k.network }
func (k *adKind[T]) indexed() cache.SharedIndexInformer { return k.informer }
func (k *adKind[T]) handler(c *Controller) cache.ResourceEventHandler {
	return workloop.Funcs(func(obj any) { k.onAdvertisement(c, obj) })
}

// mine returns the ElasticIP's own advertisements, found through the owner they carry
// (never through their name, which another ElasticIP may share): those recorded under
// its namespace and name (AnnotationOwner) that are labelled with its UID or, written
// by an earlier version, with none. Sorted by name.
func (k *adKind[T]) mine(o advertisement.Owner) []T {
	byKey, _ := indexes.ByIndex[T](k.informer, indexes.AdvertisementByOwner, o.Key())
	mine := slices.DeleteFunc(byKey, func(ad T) bool { return !advertisement.Belongs(ad, o) })
	slices.SortFunc(mine, func(a, b T) int { return strings.Compare(a.GetName(), b.GetName()) })
	return mine
}

// current returns the ElasticIP's live advertisement of this kind for the wanted spec's
// address and network, if there is one.
func (k *adKind[T]) current(o advertisement.Owner, address, network string) (T, bool) {
	for _, ad := range k.mine(o) {
		s := k.spec(ad)
		if ad.GetDeletionTimestamp() == nil && s.Address == address && s.ExternalNetwork == network {
			return ad, true
		}
	}
	var none T
	return none, false
}

// sync makes the ElasticIP's advertisement of this kind match: created, moved in place
// (same object) when the Node changes, or deleted. It touches only the ElasticIP's own
// advertisements, and an orphan (whose ElasticIP is gone) in the way of its address.
func (k *adKind[T]) sync(ctx context.Context, c *Controller, eip *v1alpha1.ElasticIP, want *adSpec) error {
	o := advertisement.Of(eip)
	mine := k.mine(o)
	if want == nil {
		return k.deleteAll(ctx, mine)
	}
	// Keep the first one for the wanted address and network; the others (another
	// address, whose immutable spec cannot be fixed in place, or a spare) go.
	var keep T
	found := false
	var stale []T
	for _, ad := range mine {
		s := k.spec(ad)
		if !found && ad.GetDeletionTimestamp() == nil && s.Address == want.Address && s.ExternalNetwork == want.ExternalNetwork {
			keep, found = ad, true
		} else {
			stale = append(stale, ad)
		}
	}
	if err := k.deleteAll(ctx, stale); err != nil {
		return err
	}
	if found {
		return k.move(ctx, c, eip, o, keep, *want)
	}
	return k.createFor(ctx, c, eip, o, *want)
}

// createFor creates o's advertisement under the name advertisement.Name picks. At most
// one advertisement of a kind advertises an address: another one of the same address
// stands in the way until it is gone. One whose ElasticIP is gone is an orphan and is
// deleted; one of a live ElasticIP (which therefore no longer holds the address) is left
// to that ElasticIP, and its deletion brings this one back (onAdvertisement).
func (k *adKind[T]) createFor(ctx context.Context, c *Controller, eip *v1alpha1.ElasticIP, o advertisement.Owner, want adSpec) error {
	others, err := indexes.ByIndex[T](k.informer, indexes.AdvertisementByAddress, want.Address)
	if err != nil {
		return err
	}
	var blocked []string
	for _, other := range others {
		if other.GetDeletionTimestamp() != nil {
			blocked = append(blocked, other.GetName())
			continue
		}
		owner, ok := advertisement.OwnerOf(other)
		live, err := c.ownerLive(ctx, owner, ok)
		if err != nil {
			return err
		}
		if live {
			blocked = append(blocked, other.GetName())
			continue
		}
		logger(ctx, eip).Info("Deleting orphan advertisement in the way", "kind", k.kind, "advertisement", other.GetName(),
			"address", want.Address, "owner", owner.Key())
		if err := k.deleteObject(ctx, other); err != nil {
			return err
		}
	}
	if len(blocked) > 0 {
		logger(ctx, eip).V(2).Info("Address still advertised by another ElasticIP's advertisement; waiting for it to go",
			"kind", k.kind, "address", want.Address, "advertisements", blocked)
		return nil
	}
	name, ok := advertisement.Name(o, k.owner)
	if !ok {
		return fmt.Errorf("every name for the %s of ElasticIP %s is taken by another ElasticIP's", k.kind, o.Key())
	}
	err = k.create(ctx, k.build(advertisement.Meta(name, o), want))
	if apierrors.IsAlreadyExists(err) {
		// The cache has not shown that name yet: retry, and Name will pick another one
		// if it is someone else's.
		return fmt.Errorf("creating %s %q: the name is taken; retrying: %w", k.kind, name, err)
	}
	if err != nil {
		return fmt.Errorf("creating %s %q: %w", k.kind, name, err)
	}
	logger(ctx, eip).Info("Advertising address", "kind", k.kind, "advertisement", name, "address", want.Address, "node", want.NodeName)
	return nil
}

// move moves o's advertisement to the wanted Node in place and gives an adopted one (of
// an earlier version) its owner labels.
func (k *adKind[T]) move(ctx context.Context, c *Controller, eip *v1alpha1.ElasticIP, o advertisement.Owner, have T, want adSpec) error {
	from := k.spec(have).NodeName
	moved := from != want.NodeName
	if !moved && slices.Equal(k.spec(have).Communities, want.Communities) && advertisement.Labelled(have, o) {
		return nil
	}
	upd := k.withSpec(have, want)
	labels := maps.Clone(upd.GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, advertisement.Labels(o))
	upd.SetLabels(labels)
	annotations := maps.Clone(upd.GetAnnotations())
	if annotations == nil {
		annotations = map[string]string{}
	}
	maps.Copy(annotations, advertisement.Annotations(o))
	upd.SetAnnotations(annotations)
	if err := k.update(ctx, upd); err != nil {
		return fmt.Errorf("updating %s %q (Node %q): %w", k.kind, have.GetName(), want.NodeName, err)
	}
	if !moved {
		return nil
	}
	logger(ctx, eip).Info("Moved advertisement", "kind", k.kind, "advertisement", have.GetName(), "address", want.Address,
		"from", from, "to", want.NodeName)
	status.Eventf(c.recorder, eip, v1alpha1.EventAdvertisementMoved, "Node %q %s %q instead of Node %q",
		want.NodeName, k.does, want.Address, from)
	return nil
}

// owner says whose advertisement of that name exists, for advertisement.Name.
func (k *adKind[T]) owner(name string) (advertisement.Owner, bool) {
	ad, err := k.get(name)
	if err != nil {
		return advertisement.Owner{}, false
	}
	o, _ := advertisement.OwnerOf(ad)
	return o, true
}

// onAdvertisement wakes the ElasticIP the advertisement records as its owner, and the
// one whose claim holds its address: an advertisement that goes may have stood in that
// one's way (one advertisement per address).
func (k *adKind[T]) onAdvertisement(c *Controller, obj any) {
	ad, ok := obj.(T)
	if !ok {
		return
	}
	if owner := ad.GetAnnotations()[v1alpha1.AnnotationOwner]; owner != "" {
		c.eipLoop.Add(owner)
	}
	if claim, err := c.claims.Get(k.spec(ad).Address); err == nil {
		c.enqueueConsumer(claim)
	}
}

// deleteGone deletes the advertisements recorded for the ElasticIP key whose ElasticIP
// is gone from the cache. One of a live ElasticIP of that name (a newer one) is that
// ElasticIP's.
func (k *adKind[T]) deleteGone(ctx context.Context, c *Controller, key string) error {
	ads, err := indexes.ByIndex[T](k.informer, indexes.AdvertisementByOwner, key)
	if err != nil {
		return err
	}
	var gone []T
	for _, ad := range ads {
		if o, ok := advertisement.OwnerOf(ad); ok && o.UID != "" && c.cachedElasticIP(o.Namespace, o.Name, o.UID) {
			continue
		}
		gone = append(gone, ad)
	}
	if len(gone) > 0 {
		klog.FromContext(ctx).Info("Deleting advertisements of a gone ElasticIP", "kind", k.kind, "elasticIP", key, "count", len(gone))
	}
	return k.deleteAll(ctx, gone)
}

func (k *adKind[T]) deleteAll(ctx context.Context, ads []T) error {
	for _, ad := range ads {
		if ad.GetDeletionTimestamp() != nil {
			continue
		}
		if err := k.deleteObject(ctx, ad); err != nil {
			return err
		}
	}
	return nil
}

// deleteObject deletes exactly this advertisement (UID precondition), so a newer one of
// the same name is never removed by a decision about an older one.
func (k *adKind[T]) deleteObject(ctx context.Context, ad T) error {
	uid := ad.GetUID()
	err := k.remove(ctx, ad.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting %s %q: %w", k.kind, ad.GetName(), err)
	}
	return nil
}

// ownerLive reports whether the ElasticIP an advertisement records still exists. An
// advertisement without an owner belongs to nobody. The cache answers first; a miss is
// confirmed with a read from the API server, so a lagging cache never makes a live
// ElasticIP's advertisement an orphan.
func (c *Controller) ownerLive(ctx context.Context, o advertisement.Owner, hasOwner bool) (bool, error) {
	if !hasOwner {
		return false, nil
	}
	if o.UID != "" && c.cachedElasticIP(o.Namespace, o.Name, o.UID) {
		return true, nil
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
