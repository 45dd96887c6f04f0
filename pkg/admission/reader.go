package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	listers "github.com/loutres/juneau/pkg/generated/listers/juneau/v1alpha1"
)

// reader reads what the checks need. Informer caches answer first; the API server is
// asked where a stale cache could wrongly admit a write:
//   - an object missing from the cache may have been created a moment ago, so a
//     reference to it is confirmed with a GET before it is called missing;
//   - a check that found nothing in the way in the cache runs once more on a live list
//     (see confirmed).
//
// Both within the budget of live reads. A live list selects by a field of the CRD where
// the check is about one value (an address, a name); the lists of a whole kind left,
// of the operators' kinds, are shared (see liveReads).
type reader struct {
	kube   kubernetes.Interface
	juneau versioned.Interface
	live   *liveReads

	pools       listers.AddressPoolLister
	networks    listers.ExternalNetworkLister
	eips        listers.ElasticIPLister
	attachments cache.Indexer
	nics        cache.Indexer
	ads         cache.Indexer
	bgpAds      cache.Indexer
	bgpPeers    listers.BGPPeerLister
	pods        cache.Indexer
	nodes       corelisters.NodeLister
	namespaces  corelisters.NamespaceLister
}

// confirmed runs check on the caches and, when it finds nothing (none), once more on
// live reads: admitting a conflict because of cache lag is worse than one more read.
// When the budget of live reads is spent, the cache's answer stands.
func confirmed[R any](ctx context.Context, none func(R) bool, check func(ctx context.Context, live bool) (R, error)) (R, error) {
	res, err := check(ctx, false)
	if err != nil || !none(res) {
		return res, err
	}
	again, err := check(ctx, true)
	if errors.Is(err, ErrNoBudget) {
		klog.FromContext(ctx).V(2).Info("Live re-check skipped: the budget of live reads is spent; the cache's answer stands")
		return res, nil
	}
	return again, err
}

// getFresh returns an object from the cache or, when the cache does not have it, from
// the API server; nil when it does not exist.
func getFresh[T any](ctx context.Context, l *liveReads, what string, cached func() (*T, error), live func(context.Context) (*T, error)) (*T, error) {
	obj, err := cached()
	if err == nil {
		return obj, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading %s from the cache: %w", what, err)
	}
	if !l.allow(readKind(what)) {
		return nil, fmt.Errorf("reading %s: %w; retry", what, ErrNoBudget)
	}
	obj, err = live(ctx)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	return obj, nil
}

func (r *reader) pool(ctx context.Context, name string) (*v1alpha1.AddressPool, error) {
	return getFresh(ctx, r.live, "AddressPool "+name,
		func() (*v1alpha1.AddressPool, error) { return r.pools.Get(name) },
		func(ctx context.Context) (*v1alpha1.AddressPool, error) {
			return r.juneau.JuneauV1alpha1().AddressPools().Get(ctx, name, metav1.GetOptions{})
		})
}

func (r *reader) network(ctx context.Context, name string) (*v1alpha1.ExternalNetwork, error) {
	return getFresh(ctx, r.live, "ExternalNetwork "+name,
		func() (*v1alpha1.ExternalNetwork, error) { return r.networks.Get(name) },
		func(ctx context.Context) (*v1alpha1.ExternalNetwork, error) {
			return r.juneau.JuneauV1alpha1().ExternalNetworks().Get(ctx, name, metav1.GetOptions{})
		})
}

func (r *reader) elasticIP(ctx context.Context, namespace, name string) (*v1alpha1.ElasticIP, error) {
	return getFresh(ctx, r.live, "ElasticIP "+namespace+"/"+name,
		func() (*v1alpha1.ElasticIP, error) { return r.eips.ElasticIPs(namespace).Get(name) },
		func(ctx context.Context) (*v1alpha1.ElasticIP, error) {
			return r.juneau.JuneauV1alpha1().ElasticIPs(namespace).Get(ctx, name, metav1.GetOptions{})
		})
}

func (r *reader) nic(ctx context.Context, namespace, name string) (*v1alpha1.NetworkInterface, error) {
	return getFresh(ctx, r.live, "NetworkInterface "+namespace+"/"+name,
		func() (*v1alpha1.NetworkInterface, error) {
			return listers.NewNetworkInterfaceLister(r.nics).NetworkInterfaces(namespace).Get(name)
		},
		func(ctx context.Context) (*v1alpha1.NetworkInterface, error) {
			return r.juneau.JuneauV1alpha1().NetworkInterfaces(namespace).Get(ctx, name, metav1.GetOptions{})
		})
}

func (r *reader) pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	return getFresh(ctx, r.live, "Pod "+namespace+"/"+name,
		func() (*corev1.Pod, error) { return corelisters.NewPodLister(r.pods).Pods(namespace).Get(name) },
		func(ctx context.Context) (*corev1.Pod, error) {
			return r.kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		})
}

func (r *reader) node(ctx context.Context, name string) (*corev1.Node, error) {
	return getFresh(ctx, r.live, "Node "+name,
		func() (*corev1.Node, error) { return r.nodes.Get(name) },
		func(ctx context.Context) (*corev1.Node, error) {
			return r.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		})
}

// namespace reads a Namespace: a review of a write in a namespace created a moment ago
// may come before the cache shows it.
func (r *reader) namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	return getFresh(ctx, r.live, "Namespace "+name,
		func() (*corev1.Namespace, error) { return r.namespaces.Get(name) },
		func(ctx context.Context) (*corev1.Namespace, error) {
			return r.kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		})
}

// claim reads an AllocationClaim from the API server only: claims are named after their
// address, so a GET is cheap and authoritative, and the webhook keeps no cache of them.
func (r *reader) claim(ctx context.Context, name string) (*v1alpha1.AllocationClaim, error) {
	if !r.live.allow("AllocationClaim") {
		return nil, fmt.Errorf("reading AllocationClaim %s: %w; retry", name, ErrNoBudget)
	}
	c, err := r.juneau.JuneauV1alpha1().AllocationClaims().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading AllocationClaim %s: %w", name, err)
	}
	return c, nil
}

// claimsOfPool returns up to limit AllocationClaims reserving addresses of the pool,
// and whether there are more, from the API server (selectable field spec.addressPool).
func (r *reader) claimsOfPool(ctx context.Context, pool string, limit int64) ([]*v1alpha1.AllocationClaim, bool, error) {
	if !r.live.allow("AllocationClaims") {
		return nil, false, fmt.Errorf("listing AllocationClaims of AddressPool %s: %w; retry", pool, ErrNoBudget)
	}
	list, err := timed(r.live, func() (*v1alpha1.AllocationClaimList, error) {
		return r.juneau.JuneauV1alpha1().AllocationClaims().List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("spec.addressPool", pool).String(), Limit: limit})
	})
	if err != nil {
		return nil, false, fmt.Errorf("listing AllocationClaims of AddressPool %s: %w", pool, err)
	}
	var out []*v1alpha1.AllocationClaim
	for _, c := range pointers(list.Items) {
		if c.Spec.AddressPool == pool { // the server filters; this keeps the contract exact
			out = append(out, c)
		}
	}
	return out, list.Continue != "", nil
}

func (r *reader) allPools(ctx context.Context, live bool) ([]*v1alpha1.AddressPool, error) {
	if !live {
		return r.pools.List(labels.Everything())
	}
	return sharedList(ctx, r.live, "AddressPools", func(ctx context.Context) ([]*v1alpha1.AddressPool, error) {
		list, err := r.juneau.JuneauV1alpha1().AddressPools().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing AddressPools: %w", err)
		}
		return pointers(list.Items), nil
	})
}

func (r *reader) allNetworks(ctx context.Context, live bool) ([]*v1alpha1.ExternalNetwork, error) {
	if !live {
		return r.networks.List(labels.Everything())
	}
	return sharedList(ctx, r.live, "ExternalNetworks", func(ctx context.Context) ([]*v1alpha1.ExternalNetwork, error) {
		list, err := r.juneau.JuneauV1alpha1().ExternalNetworks().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing ExternalNetworks: %w", err)
		}
		return pointers(list.Items), nil
	})
}

// Live lists below select by a field (the CRDs' selectableFields): a review never
// makes the API server send it every object of a kind, only those in the way.

// selected is a live list of the objects whose field has value, within the budget,
// re-filtered by keep (the same rule in Go, whatever the server answered). list is the
// typed client's List, items its list's Items.
func selected[T, L any](ctx context.Context, l *liveReads, kind, field, value string,
	list func(context.Context, metav1.ListOptions) (*L, error), items func(*L) []T, keep func(*T) bool) ([]*T, error) {
	if !l.allow(kind) {
		return nil, ErrNoBudget
	}
	got, err := timed(l, func() (*L, error) {
		return list(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector(field, value).String(), Limit: selectedLimit})
	})
	if err != nil {
		return nil, fmt.Errorf("listing %s with %s=%s: %w", kind, field, value, err)
	}
	return filter(pointers(items(got)), keep), nil
}

// selectedLimit bounds a selected list: the checks need to know that something is in
// the way and to name a few of them, not to see them all.
const selectedLimit = 100

// elasticIPsOn returns the ElasticIPs whose spec.externalNetwork is network.
func (r *reader) elasticIPsOn(ctx context.Context, network string, live bool) ([]*v1alpha1.ElasticIP, error) {
	keep := func(e *v1alpha1.ElasticIP) bool { return e.Spec.ExternalNetwork == network }
	if !live {
		all, err := r.eips.List(labels.Everything())
		return filter(all, keep), err
	}
	return selected(ctx, r.live, "ElasticIPs", "spec.externalNetwork", network, r.juneau.JuneauV1alpha1().ElasticIPs(metav1.NamespaceAll).List,
		func(l *v1alpha1.ElasticIPList) []v1alpha1.ElasticIP { return l.Items }, keep)
}

// advertisementsAt returns the ARPAdvertisements whose spec.address is address.
func (r *reader) advertisementsAt(ctx context.Context, address string, live bool) ([]*v1alpha1.ARPAdvertisement, error) {
	keep := func(a *v1alpha1.ARPAdvertisement) bool { return a.Spec.Address == address }
	if !live {
		return byIndex[*v1alpha1.ARPAdvertisement](r.ads, adByAddress, address)
	}
	return selected(ctx, r.live, "ARPAdvertisements", "spec.address", address, r.juneau.JuneauV1alpha1().ARPAdvertisements().List,
		func(l *v1alpha1.ARPAdvertisementList) []v1alpha1.ARPAdvertisement { return l.Items }, keep)
}

// bgpAdvertisementsAt returns the BGPAdvertisements whose spec.address is address.
func (r *reader) bgpAdvertisementsAt(ctx context.Context, address string, live bool) ([]*v1alpha1.BGPAdvertisement, error) {
	keep := func(a *v1alpha1.BGPAdvertisement) bool { return a.Spec.Address == address }
	if !live {
		return byIndex[*v1alpha1.BGPAdvertisement](r.bgpAds, adByAddress, address)
	}
	return selected(ctx, r.live, "BGPAdvertisements", "spec.address", address, r.juneau.JuneauV1alpha1().BGPAdvertisements().List,
		func(l *v1alpha1.BGPAdvertisementList) []v1alpha1.BGPAdvertisement { return l.Items }, keep)
}

// peersAt returns the BGPPeers whose spec.peerAddress is address.
func (r *reader) peersAt(ctx context.Context, address string, live bool) ([]*v1alpha1.BGPPeer, error) {
	keep := func(p *v1alpha1.BGPPeer) bool { return p.Spec.PeerAddress == address }
	if !live {
		all, err := r.bgpPeers.List(labels.Everything())
		return filter(all, keep), err
	}
	return selected(ctx, r.live, "BGPPeers", "spec.peerAddress", address, r.juneau.JuneauV1alpha1().BGPPeers().List,
		func(l *v1alpha1.BGPPeerList) []v1alpha1.BGPPeer { return l.Items }, keep)
}

func (r *reader) allNodes(ctx context.Context, live bool) ([]*corev1.Node, error) {
	if !live {
		return r.nodes.List(labels.Everything())
	}
	return sharedList(ctx, r.live, "Nodes", func(ctx context.Context) ([]*corev1.Node, error) {
		list, err := r.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing Nodes: %w", err)
		}
		return pointers(list.Items), nil
	})
}

// nicsNaming returns the NetworkInterfaces of a namespace whose spec.elasticIP is eip.
func (r *reader) nicsNaming(ctx context.Context, namespace, eip string, live bool) ([]*v1alpha1.NetworkInterface, error) {
	if !live {
		return byIndex[*v1alpha1.NetworkInterface](r.nics, nicByElasticIP, key(namespace, eip))
	}
	return selected(ctx, r.live, "NetworkInterfaces", "spec.elasticIP", eip, r.juneau.JuneauV1alpha1().NetworkInterfaces(namespace).List,
		func(l *v1alpha1.NetworkInterfaceList) []v1alpha1.NetworkInterface { return l.Items },
		func(n *v1alpha1.NetworkInterface) bool { return n.Spec.ElasticIP == eip })
}

// attachmentsOf returns the ElasticIPAttachments of a namespace that reference the
// ElasticIP eip (byNIC false) or target the NetworkInterface named name (byNIC true).
func (r *reader) attachmentsOf(ctx context.Context, namespace, name string, byNIC, live bool) ([]*v1alpha1.ElasticIPAttachment, error) {
	if !live {
		index := attachmentByElasticIP
		if byNIC {
			index = attachmentByNIC
		}
		return byIndex[*v1alpha1.ElasticIPAttachment](r.attachments, index, key(namespace, name))
	}
	field, ref := "spec.elasticIPRef.name", func(a *v1alpha1.ElasticIPAttachment) string { return a.Spec.ElasticIPRef.Name }
	if byNIC {
		field, ref = "spec.targetRef.networkInterfaceName", func(a *v1alpha1.ElasticIPAttachment) string { return a.Spec.TargetRef.NetworkInterfaceName }
	}
	return selected(ctx, r.live, "ElasticIPAttachments", field, name, r.juneau.JuneauV1alpha1().ElasticIPAttachments(namespace).List,
		func(l *v1alpha1.ElasticIPAttachmentList) []v1alpha1.ElasticIPAttachment { return l.Items },
		func(a *v1alpha1.ElasticIPAttachment) bool { return ref(a) == name })
}

// podsNaming returns the cached Pods of a namespace whose direct-use annotations name
// the ElasticIP eip. Pods are read from the cache only: listing every Pod of a
// namespace on each request would cost more than the rare miss it could catch, and
// the NetworkInterface of a running Pod is checked live anyway.
func (r *reader) podsNaming(namespace, eip string) ([]*corev1.Pod, error) {
	return byIndex[*corev1.Pod](r.pods, podByDirectElasticIP, key(namespace, eip))
}

func byIndex[T any](indexer cache.Indexer, index, value string) ([]T, error) {
	objs, err := indexer.ByIndex(index, value)
	if err != nil {
		return nil, fmt.Errorf("reading index %s: %w", index, err)
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// filter keeps the items keep accepts. A server's field selection is filtered again:
// the contract stays exact whatever answers the list (a fake in unit tests).
func filter[T any](items []T, keep func(T) bool) []T {
	var out []T
	for _, it := range items {
		if keep(it) {
			out = append(out, it)
		}
	}
	return out
}

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// readKind is the kind a getFresh description ("AddressPool name") reads, for the metrics.
func readKind(what string) string {
	kind, _, _ := strings.Cut(what, " ")
	return kind
}
