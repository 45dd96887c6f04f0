package elasticip

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	informers "github.com/loutres/juneau/pkg/generated/informers/externalversions/juneau/v1alpha1"
)

// adSpec is the spec both advertisement kinds share: the network, the address and the
// one Node that advertises it; Communities are those of a BGPAdvertisement (its pool's
// spec.bgpCommunities, sorted), none for an ARPAdvertisement.
type adSpec struct {
	ExternalNetwork, Address, NodeName string
	Communities                        []string
}

// adObject is an advertisement object of either kind.
type adObject interface {
	metav1.Object
	runtime.Object
}

// adKind is one kind of per-ElasticIP advertisement: ARPAdvertisements on arp networks
// (the Node answers ARP), BGPAdvertisements on bgp networks (the Node announces a /32).
// Both follow the same rules (docs/reference.md#arp-advertisement, docs/bgp.md): one
// per used address, named and owned as the advertisement package says, moved in place.
type adKind[T adObject] struct {
	// kind names the kind in messages.
	kind string
	// network is the network type whose addresses this kind advertises.
	network v1alpha1.AdvertiseMode
	// does is what the Node of an advertisement does for the address, for Events
	// ("Node x <does> 10.0.0.1 instead of Node y").
	does     string
	informer cache.SharedIndexInformer
	get      func(name string) (T, error)
	spec     func(T) adSpec
	// build makes a new object; withSpec returns a copy of one with the Node (and the
	// communities) of a spec.
	build    func(metav1.ObjectMeta, adSpec) T
	withSpec func(T, adSpec) T
	create   func(context.Context, T) error
	update   func(context.Context, T) error
	remove   func(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// advertiser is what the controller does with a kind, whatever its type.
type advertiser interface {
	// mode is the network type whose addresses the kind advertises.
	mode() v1alpha1.AdvertiseMode
	// sync makes o's advertisement of this kind match want (nil: none).
	sync(ctx context.Context, c *Controller, eip *v1alpha1.ElasticIP, want *adSpec) error
	// deleteGone deletes the advertisements of a gone ElasticIP (namespace/name).
	deleteGone(ctx context.Context, c *Controller, key string) error
	// handler maps the kind's events to ElasticIP keys; indexed is its informer.
	handler(c *Controller) cache.ResourceEventHandler
	indexed() cache.SharedIndexInformer
}

var (
	_ advertiser = (*adKind[*v1alpha1.ARPAdvertisement])(nil)
	_ advertiser = (*adKind[*v1alpha1.BGPAdvertisement])(nil)
)

func arpKind(client versioned.Interface, inf informers.ARPAdvertisementInformer) *adKind[*v1alpha1.ARPAdvertisement] {
	k := &adKind[*v1alpha1.ARPAdvertisement]{
		kind: "ARPAdvertisement", network: v1alpha1.AdvertiseARP, does: "answers ARP for",
		informer: inf.Informer(), get: inf.Lister().Get,
		spec: func(a *v1alpha1.ARPAdvertisement) adSpec {
			return adSpec{ExternalNetwork: a.Spec.ExternalNetwork, Address: a.Spec.Address, NodeName: a.Spec.NodeName}
		},
		build: func(m metav1.ObjectMeta, s adSpec) *v1alpha1.ARPAdvertisement {
			return &v1alpha1.ARPAdvertisement{ObjectMeta: m, Spec: v1alpha1.ARPAdvertisementSpec{
				ExternalNetwork: s.ExternalNetwork, Address: s.Address, NodeName: s.NodeName}}
		},
		withSpec: func(a *v1alpha1.ARPAdvertisement, s adSpec) *v1alpha1.ARPAdvertisement {
			a = a.DeepCopy()
			a.Spec.NodeName = s.NodeName
			return a
		},
	}
	k.useClient(client.JuneauV1alpha1().ARPAdvertisements())
	return k
}

func bgpKind(client versioned.Interface, inf informers.BGPAdvertisementInformer) *adKind[*v1alpha1.BGPAdvertisement] {
	k := &adKind[*v1alpha1.BGPAdvertisement]{
		kind: "BGPAdvertisement", network: v1alpha1.AdvertiseBGP, does: "announces",
		informer: inf.Informer(), get: inf.Lister().Get,
		spec: func(a *v1alpha1.BGPAdvertisement) adSpec {
			return adSpec{a.Spec.ExternalNetwork, a.Spec.Address, a.Spec.NodeName, a.Spec.Communities}
		},
		build: func(m metav1.ObjectMeta, s adSpec) *v1alpha1.BGPAdvertisement {
			return &v1alpha1.BGPAdvertisement{ObjectMeta: m, Spec: v1alpha1.BGPAdvertisementSpec{
				ExternalNetwork: s.ExternalNetwork, Address: s.Address, NodeName: s.NodeName, Communities: s.Communities}}
		},
		withSpec: func(a *v1alpha1.BGPAdvertisement, s adSpec) *v1alpha1.BGPAdvertisement {
			a = a.DeepCopy()
			a.Spec.NodeName, a.Spec.Communities = s.NodeName, s.Communities
			return a
		},
	}
	k.useClient(client.JuneauV1alpha1().BGPAdvertisements())
	return k
}

// typedClient is what the controller uses of a generated typed client of either kind.
type typedClient[T adObject] interface {
	Create(context.Context, T, metav1.CreateOptions) (T, error)
	Update(context.Context, T, metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// useClient makes the kind write through ads, as the controller's field manager.
func (k *adKind[T]) useClient(ads typedClient[T]) {
	k.create = func(ctx context.Context, a T) error {
		_, err := ads.Create(ctx, a, metav1.CreateOptions{FieldManager: v1alpha1.FieldManagerController})
		return err
	}
	k.update = func(ctx context.Context, a T) error {
		_, err := ads.Update(ctx, a, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManagerController})
		return err
	}
	k.remove = ads.Delete
}
