// Package podeip is the controller of automatic, per-Pod ElasticIPs (docs/reference.md#automatic).
//
// A Pod annotated pod-with-eip: "true" gets an ElasticIP named after the Pod, from the
// ExternalNetwork it names (or the one annotated as the default), and an
// ElasticIPAttachment, also named after the Pod, that translates it to "<pod>.eth0". A
// Pod naming an existing ElasticIP in pod-eip-name gets only the attachment. Both
// objects carry the label juneau.loutres.me/pod=<pod>: an object of the wanted name
// without it is the user's, and is reported on the Pod but never taken over. Once the
// ElasticIP has an address, its name and address are written back into the Pod's
// annotations.
//
// When the Pod leaves (it is gone, it finished, or it stops asking) the attachment is
// deleted, then the release strategy recorded on the ElasticIP applies: Follow deletes
// it, Never keeps it, a duration deletes it that long after the Pod was found gone. The
// time is recorded on the ElasticIP (pod-gone-since), so a controller restart does not
// reset the delay. A Pod of a stateful workload, re-created under the same name, finds
// its ElasticIP again by name. The controller deletes what it made itself; it does not
// rely on the garbage collector, although Follow ElasticIPs and attachments carry an
// ownerReference to their Pod.
//
// The work queue holds Pod keys; every ElasticIP, attachment, NetworkInterface and
// ExternalNetwork event is mapped to the Pod keys it concerns.
package podeip

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/loutres/juneau/pkg/apis/juneau/annotations"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/controllers/indexes"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	informers "github.com/loutres/juneau/pkg/generated/informers/externalversions/juneau/v1alpha1"
	listers "github.com/loutres/juneau/pkg/generated/listers/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/workloop"
)

// ControllerName names the loop, its queue and its log lines.
const ControllerName = "podeip"

// PodByElasticIPName indexes Pods by "<namespace>/<pod-eip-name>".
const PodByElasticIPName = "juneau.pod.eip-name"

// Informers are the shared informers the controller reads.
type Informers struct {
	Pods              coreinformers.PodInformer
	ElasticIPs        informers.ElasticIPInformer
	Attachments       informers.ElasticIPAttachmentInformer
	NetworkInterfaces informers.NetworkInterfaceInformer
	Networks          informers.ExternalNetworkInformer
}

// Options tune the controller. Its Clock dates gone-since marks.
type Options struct {
	workloop.Options
	// StatefulKinds are workload kinds, besides apps/StatefulSet, whose Pods come back
	// under the same name (--stateful-workload-kinds).
	StatefulKinds []schema.GroupKind
}

// Controller keeps each Pod's automatic ElasticIP and attachment.
type Controller struct {
	*workloop.Controller
	kube     kubernetes.Interface
	client   versioned.Interface
	recorder record.EventRecorder
	stateful []schema.GroupKind

	pods     corelisters.PodLister
	eips     listers.ElasticIPLister
	atts     listers.ElasticIPAttachmentLister
	nics     listers.NetworkInterfaceLister
	networks listers.ExternalNetworkLister
	podInf   cache.SharedIndexInformer
	attInf   cache.SharedIndexInformer
	nicInf   cache.SharedIndexInformer
	reported *problemMemory
	// assigned and book keep one ElasticIP to one Pod and one address to one Pod's
	// annotations across concurrent workers (contention.go, addressbook.go).
	assigned *assignments
	book     *addressBook
}

// NewController registers the indexes and event handlers; it starts nothing.
func NewController(kube kubernetes.Interface, client versioned.Interface, inf Informers, recorder record.EventRecorder, opts Options) (*Controller, error) {
	c := &Controller{
		kube: kube, client: client, recorder: recorder, stateful: opts.StatefulKinds,
		pods: inf.Pods.Lister(), eips: inf.ElasticIPs.Lister(), atts: inf.Attachments.Lister(),
		nics: inf.NetworkInterfaces.Lister(), networks: inf.Networks.Lister(),
		podInf: inf.Pods.Informer(), attInf: inf.Attachments.Informer(), nicInf: inf.NetworkInterfaces.Informer(),
		reported: &problemMemory{seen: map[string]map[string]bool{}},
		assigned: newAssignments(), book: newAddressBook(),
	}
	c.Controller = workloop.NewController(ControllerName, c.sync, opts.Options)
	if err := indexes.Add(c.attInf, indexes.AttachmentByElasticIP); err != nil {
		return nil, err
	}
	if err := indexes.Add(c.nicInf, indexes.NICByElasticIP); err != nil {
		return nil, err
	}
	if err := addPodIndex(c.podInf); err != nil {
		return nil, err
	}
	if err := addAddressIndex(c.podInf); err != nil {
		return nil, err
	}
	err := c.Watch(
		workloop.Watch{Informer: c.podInf, Handler: c.Loop.Handler()},
		workloop.Watch{Informer: inf.ElasticIPs.Informer(), Handler: workloop.Funcs(c.onElasticIP)},
		workloop.Watch{Informer: c.attInf, Handler: workloop.Funcs(c.onAttachment)},
		workloop.Watch{Informer: c.nicInf, Handler: workloop.Funcs(c.onNIC)},
		workloop.Watch{Informer: inf.Networks.Informer(), Handler: workloop.Funcs(c.onNetwork)},
	)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// addPodIndex indexes Pods by the ElasticIP they name in pod-eip-name, so an ElasticIP
// appearing wakes the Pods waiting for it.
func addPodIndex(informer cache.SharedIndexInformer) error {
	if _, ok := informer.GetIndexer().GetIndexers()[PodByElasticIPName]; ok {
		return nil
	}
	err := informer.AddIndexers(cache.Indexers{PodByElasticIPName: func(obj any) ([]string, error) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || !annotations.HasJuneauAnnotations(pod.Annotations) {
			return nil, nil
		}
		auto, _ := annotations.ParseAuto(pod.Annotations)
		if auto.ElasticIPName == "" {
			return nil, nil
		}
		return []string{indexes.Key(pod.Namespace, auto.ElasticIPName)}, nil
	}})
	if err != nil {
		return fmt.Errorf("adding Pod index: %w", err)
	}
	return nil
}

// onElasticIP, onAttachment, onNIC and onNetwork map events to Pod keys.
func (c *Controller) onElasticIP(obj any) {
	if eip, ok := obj.(*v1alpha1.ElasticIP); ok {
		c.addKeys(c.elasticIPKeys(eip))
	}
}

func (c *Controller) onAttachment(obj any) {
	if a, ok := obj.(*v1alpha1.ElasticIPAttachment); ok {
		c.addKeys(attachmentKeys(a))
		c.addKeys(c.podsNaming(a.Namespace, a.Spec.ElasticIPRef.Name))
	}
}

func (c *Controller) onNIC(obj any) {
	if nic, ok := obj.(*v1alpha1.NetworkInterface); ok {
		c.addKeys(nicKeys(nic))
		if nic.Spec.ElasticIP != "" {
			c.addKeys(c.podsNaming(nic.Namespace, nic.Spec.ElasticIP))
		}
	}
}

func (c *Controller) onNetwork(any) { c.addKeys(c.allocatingKeys()) }

func (c *Controller) addKeys(keys []string) {
	for _, k := range keys {
		c.Loop.Add(k)
	}
}

// elasticIPKeys: the Pod the ElasticIP is named after, the Pod it was made for (an IPv6
// ElasticIP is named "<pod>-ipv6"), and the Pods naming it in pod-eip-name.
func (c *Controller) elasticIPKeys(eip *v1alpha1.ElasticIP) []string {
	return append(madeFor(eip), c.podsNaming(eip.Namespace, eip.Name)...)
}

// madeFor: the key of the object's name, as a Pod's, and the key of the Pod it was made
// for (its label), when that differs.
func madeFor(obj metav1.Object) []string {
	keys := []string{indexes.Key(obj.GetNamespace(), obj.GetName())}
	if pod := obj.GetLabels()[v1alpha1.LabelPod]; pod != "" && pod != obj.GetName() {
		keys = append(keys, indexes.Key(obj.GetNamespace(), pod))
	}
	return keys
}

// podsNaming: the Pods naming the ElasticIP in pod-eip-name, which wait for it while
// another user has it and take it over when that use ends.
func (c *Controller) podsNaming(namespace, eip string) []string {
	pods, err := indexes.ByIndex[*corev1.Pod](c.podInf, PodByElasticIPName, indexes.Key(namespace, eip))
	if err != nil {
		return nil
	}
	keys := make([]string, 0, len(pods))
	for _, pod := range pods {
		keys = append(keys, indexes.Key(pod.Namespace, pod.Name))
	}
	return keys
}

// attachmentKeys: the Pod the attachment is named after or was made for, and the Pod
// whose ElasticIP it references (whose release it may hold up).
func attachmentKeys(a *v1alpha1.ElasticIPAttachment) []string {
	return append(madeFor(a), indexes.Key(a.Namespace, a.Spec.ElasticIPRef.Name))
}

// nicKeys: the Pod of an eth0 NIC, whose attachment waits for it.
func nicKeys(nic *v1alpha1.NetworkInterface) []string {
	if nic.Spec.PodRef.Interface != v1alpha1.DefaultInterface {
		return nil
	}
	return []string{indexes.Key(nic.Namespace, nic.Spec.PodRef.Name)}
}

// allocatingKeys: the Pods asking for a new ElasticIP, which a change of the
// ExternalNetworks may be holding up.
func (c *Controller) allocatingKeys() []string {
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return nil
	}
	var keys []string
	for _, pod := range pods {
		if !annotations.HasJuneauAnnotations(pod.Annotations) {
			continue
		}
		if auto, _ := annotations.ParseAuto(pod.Annotations); auto.Enabled {
			keys = append(keys, indexes.Key(pod.Namespace, pod.Name))
		}
	}
	return keys
}

// problemMemory remembers the problems last reported for each Pod key, so a Warning
// Event is emitted when a problem appears, not on every sync.
type problemMemory struct {
	mu   sync.Mutex
	seen map[string]map[string]bool // Pod key -> problem identities
}

// fresh records the problems of a key and returns those not reported before.
func (m *problemMemory) fresh(key string, problems []problem) []problem {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.seen[key]
	now := map[string]bool{}
	var out []problem
	for _, p := range problems {
		id := problemID(p)
		if !old[id] && !now[id] {
			out = append(out, p)
		}
		now[id] = true
	}
	if len(now) == 0 {
		delete(m.seen, key)
	} else {
		m.seen[key] = now
	}
	return out
}

// problemID identifies a problem by the object (UID included: a new Pod of the same
// name hears about it again), reason and message.
func problemID(p problem) string {
	id := p.Reason + "\x00" + p.Message
	if obj, ok := p.Object.(metav1.Object); ok {
		id = string(obj.GetUID()) + "\x00" + id
	}
	return id
}
