package admission

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/annotations"
	"github.com/loutres/juneau/pkg/apis/juneau/cached"
	"github.com/loutres/juneau/pkg/apis/juneau/tenancy"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	juneauinformers "github.com/loutres/juneau/pkg/generated/informers/externalversions"
)

// The webhook's own indexes on its own informers, each keyed "<namespace>/<name>".
const (
	// podByDirectElasticIP: Pods by every ElasticIP their direct-use annotations name.
	podByDirectElasticIP = "juneau.admission.pod.direct-elasticip"
	// nicByElasticIP: NetworkInterfaces by spec.elasticIP.
	nicByElasticIP = "juneau.admission.nic.elasticip"
	// attachmentByElasticIP: ElasticIPAttachments by spec.elasticIPRef.name.
	attachmentByElasticIP = "juneau.admission.attachment.elasticip"
	// attachmentByNIC: ElasticIPAttachments by spec.targetRef.networkInterfaceName.
	attachmentByNIC = "juneau.admission.attachment.nic"
	// adByAddress: ARPAdvertisements and BGPAdvertisements by spec.address.
	adByAddress = "juneau.admission.advertisement.address"
)

// key is the "<namespace>/<name>" value of the namespaced indexes.
func key(namespace, name string) string { return namespace + "/" + name }

// indexBy makes an index function of a function of one typed object ("" indexes nothing).
func indexBy[T any](value func(T) string) cache.IndexFunc {
	return func(obj any) ([]string, error) {
		t, ok := obj.(T)
		if !ok {
			return nil, nil
		}
		if v := value(t); v != "" {
			return []string{v}, nil
		}
		return nil, nil
	}
}

// Validators holds the checks of every kind and what they read.
type Validators struct {
	r         *reader
	hasSynced []cache.InformerSynced
}

// New registers the informers the validators read on the two factories (start them
// afterwards) and returns the validators. Pods, Nodes and Namespaces are cached trimmed
// to the fields the checks read, so the webhook's memory does not grow with Pod specs.
func New(kube kubernetes.Interface, juneau versioned.Interface,
	kubeInf kubeinformers.SharedInformerFactory, juneauInf juneauinformers.SharedInformerFactory) (*Validators, error) {
	j := juneauInf.Juneau().V1alpha1()
	attachments := j.ElasticIPAttachments().Informer()
	if err := attachments.AddIndexers(cache.Indexers{
		attachmentByElasticIP: indexBy(func(a *v1alpha1.ElasticIPAttachment) string {
			return key(a.Namespace, a.Spec.ElasticIPRef.Name)
		}),
		attachmentByNIC: indexBy(func(a *v1alpha1.ElasticIPAttachment) string {
			return key(a.Namespace, a.Spec.TargetRef.NetworkInterfaceName)
		}),
	}); err != nil {
		return nil, fmt.Errorf("indexing ElasticIPAttachments: %w", err)
	}
	nics := j.NetworkInterfaces().Informer()
	if err := nics.AddIndexers(cache.Indexers{nicByElasticIP: indexBy(func(n *v1alpha1.NetworkInterface) string {
		if n.Spec.ElasticIP == "" {
			return ""
		}
		return key(n.Namespace, n.Spec.ElasticIP)
	})}); err != nil {
		return nil, fmt.Errorf("indexing NetworkInterfaces: %w", err)
	}
	ads, bgpAds := j.ARPAdvertisements().Informer(), j.BGPAdvertisements().Informer()
	for _, inf := range []cache.SharedIndexInformer{ads, bgpAds} {
		if err := inf.AddIndexers(cache.Indexers{adByAddress: advertisement.ByAddress}); err != nil {
			return nil, fmt.Errorf("indexing advertisements: %w", err)
		}
	}
	pods := kubeInf.Core().V1().Pods().Informer()
	if err := pods.SetTransform(cached.Pod); err != nil {
		return nil, fmt.Errorf("trimming cached Pods: %w", err)
	}
	if err := pods.AddIndexers(cache.Indexers{podByDirectElasticIP: podDirectElasticIPs}); err != nil {
		return nil, fmt.Errorf("indexing Pods: %w", err)
	}
	nodes := kubeInf.Core().V1().Nodes().Informer()
	if err := nodes.SetTransform(cached.Node); err != nil {
		return nil, fmt.Errorf("trimming cached Nodes: %w", err)
	}
	namespaces := kubeInf.Core().V1().Namespaces().Informer()
	if err := namespaces.SetTransform(tenancy.TrimNamespace); err != nil {
		return nil, fmt.Errorf("trimming cached Namespaces: %w", err)
	}
	v := &Validators{r: &reader{
		kube:        kube,
		juneau:      juneau,
		live:        newLiveReads(),
		pools:       j.AddressPools().Lister(),
		networks:    j.ExternalNetworks().Lister(),
		eips:        j.ElasticIPs().Lister(),
		attachments: attachments.GetIndexer(),
		nics:        nics.GetIndexer(),
		ads:         ads.GetIndexer(),
		bgpAds:      bgpAds.GetIndexer(),
		bgpPeers:    j.BGPPeers().Lister(),
		pods:        pods.GetIndexer(),
		nodes:       kubeInf.Core().V1().Nodes().Lister(),
		namespaces:  kubeInf.Core().V1().Namespaces().Lister(),
	}}
	juneauCaches := []cache.SharedIndexInformer{
		j.AddressPools().Informer(), j.ExternalNetworks().Informer(), j.ElasticIPs().Informer(),
		attachments, nics, ads, bgpAds, j.BGPPeers().Informer(),
	}
	// Of juneau's objects the validators read everything but managedFields, often the
	// larger part of an object (Pods, Nodes and Namespaces drop them with the rest above);
	// the strings every object repeats are kept once (cached.Lean).
	for _, inf := range juneauCaches {
		if err := inf.SetTransform(cached.Lean); err != nil {
			return nil, fmt.Errorf("trimming cached objects: %w", err)
		}
	}
	for _, inf := range append(juneauCaches, pods, nodes, namespaces) {
		v.hasSynced = append(v.hasSynced, inf.HasSynced)
	}
	return v, nil
}

// HasSynced reports whether every cache the validators read has synced.
func (v *Validators) HasSynced() bool {
	for _, synced := range v.hasSynced {
		if !synced() {
			return false
		}
	}
	return true
}

// InformersSynced are the HasSynced functions to wait for.
func (v *Validators) InformersSynced() []cache.InformerSynced { return v.hasSynced }

// podDirectElasticIPs is the podByDirectElasticIP index function. Pods whose
// annotations cannot be read name nothing: the controllers build no NICs for them.
func podDirectElasticIPs(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	nics, errs := annotations.ParseDirect(pod.Annotations)
	if len(errs) > 0 {
		return nil, nil
	}
	var keys []string
	for _, n := range nics {
		if n.ElasticIP != "" {
			keys = append(keys, key(pod.Namespace, n.ElasticIP))
		}
	}
	return keys, nil
}
