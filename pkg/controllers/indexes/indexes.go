// Package indexes holds the informer indexes juneau's controllers share, so two
// controllers that need the same lookup register it once on the shared informer.
package indexes

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// Index names.
const (
	// NICByElasticIP: NetworkInterfaces by "<namespace>/<spec.elasticIP>".
	NICByElasticIP = "juneau.nic.elasticip"
	// NICByPod: NetworkInterfaces by "<namespace>/<spec.podRef.name>".
	NICByPod = "juneau.nic.pod"
	// AttachmentByElasticIP: ElasticIPAttachments by "<namespace>/<spec.elasticIPRef.name>".
	AttachmentByElasticIP = "juneau.attachment.elasticip"
	// AttachmentByNIC: ElasticIPAttachments by "<namespace>/<spec.targetRef.networkInterfaceName>".
	AttachmentByNIC = "juneau.attachment.nic"
	// ClaimByConsumerUID: AllocationClaims by spec.consumer.uid.
	ClaimByConsumerUID = "juneau.claim.consumer-uid"
	// AdvertisementByOwner: advertisements by their ElasticIP's "<namespace>/<name>"
	// (annotation).
	AdvertisementByOwner = "juneau.advertisement.owner"
	// AdvertisementByAddress: advertisements by spec.address.
	AdvertisementByAddress = "juneau.advertisement.address"
	// AdvertisementByNode: ARPAdvertisements by spec.nodeName.
	AdvertisementByNode = "juneau.arpadvertisement.node"
)

var funcs = map[string]cache.IndexFunc{
	NICByElasticIP: func(obj any) ([]string, error) {
		nic, ok := obj.(*v1alpha1.NetworkInterface)
		if !ok || nic.Spec.ElasticIP == "" {
			return nil, nil
		}
		return []string{Key(nic.Namespace, nic.Spec.ElasticIP)}, nil
	},
	NICByPod: func(obj any) ([]string, error) {
		nic, ok := obj.(*v1alpha1.NetworkInterface)
		if !ok {
			return nil, nil
		}
		return []string{Key(nic.Namespace, nic.Spec.PodRef.Name)}, nil
	},
	AttachmentByElasticIP: func(obj any) ([]string, error) {
		a, ok := obj.(*v1alpha1.ElasticIPAttachment)
		if !ok {
			return nil, nil
		}
		return []string{Key(a.Namespace, a.Spec.ElasticIPRef.Name)}, nil
	},
	AttachmentByNIC: func(obj any) ([]string, error) {
		a, ok := obj.(*v1alpha1.ElasticIPAttachment)
		if !ok {
			return nil, nil
		}
		return []string{Key(a.Namespace, a.Spec.TargetRef.NetworkInterfaceName)}, nil
	},
	ClaimByConsumerUID: func(obj any) ([]string, error) {
		c, ok := obj.(*v1alpha1.AllocationClaim)
		if !ok {
			return nil, nil
		}
		return []string{c.Spec.Consumer.UID}, nil
	},
	AdvertisementByOwner: func(obj any) ([]string, error) {
		ad, ok := anAdvertisement(obj)
		if !ok || ad.GetAnnotations()[v1alpha1.AnnotationOwner] == "" {
			return nil, nil
		}
		return []string{ad.GetAnnotations()[v1alpha1.AnnotationOwner]}, nil
	},
	AdvertisementByAddress: advertisement.ByAddress,
	AdvertisementByNode: func(obj any) ([]string, error) {
		ad, ok := obj.(*v1alpha1.ARPAdvertisement)
		if !ok || ad.Spec.NodeName == "" {
			return nil, nil
		}
		return []string{ad.Spec.NodeName}, nil
	},
}

// anAdvertisement is obj as an advertisement of either kind.
func anAdvertisement(obj any) (metav1.Object, bool) {
	switch ad := obj.(type) {
	case *v1alpha1.ARPAdvertisement:
		return ad, true
	case *v1alpha1.BGPAdvertisement:
		return ad, true
	}
	return nil, false
}

// Key is the "<namespace>/<name>" form the namespaced indexes use.
func Key(namespace, name string) string { return namespace + "/" + name }

// Add registers the named indexes on an informer, skipping those already there. Call it
// before the informer starts.
func Add(informer cache.SharedIndexInformer, names ...string) error {
	existing := informer.GetIndexer().GetIndexers()
	add := cache.Indexers{}
	for _, name := range names {
		fn, ok := funcs[name]
		if !ok {
			return fmt.Errorf("unknown index %q", name)
		}
		if _, ok := existing[name]; !ok {
			add[name] = fn
		}
	}
	if len(add) == 0 {
		return nil
	}
	if err := informer.AddIndexers(add); err != nil {
		return fmt.Errorf("adding indexes: %w", err)
	}
	return nil
}

// ByIndex returns the typed objects of an index value.
func ByIndex[T any](informer cache.SharedIndexInformer, index, value string) ([]T, error) {
	objs, err := informer.GetIndexer().ByIndex(index, value)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out, nil
}
