// Package networkinterface is the controller that gives every running Pod its
// NetworkInterfaces and keeps their status (docs/reference.md#networkinterface).
//
// A Pod that is scheduled, not on the host network and not finished gets "<pod>.eth0"
// plus one NIC per entry of its juneau.loutres.me/networks annotation; a NIC names an
// ElasticIP when the annotations say it carries one directly. NICs no longer wanted are
// deleted by this controller itself (it does not rely on the garbage collector); a
// terminating Pod keeps its NICs until the Pod object is gone, since a deleting NIC may
// still carry its ElasticIP. The work queue holds Pod keys: every NIC and ElasticIP
// event is mapped to the Pods concerned.
//
// The status of a direct NIC follows the decision the ElasticIP controller publishes in
// the ElasticIP's status.attachment; this controller never decides who holds an address.
package networkinterface

import (
	"sync"

	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/controllers/indexes"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	informers "github.com/loutres/juneau/pkg/generated/informers/externalversions/juneau/v1alpha1"
	listers "github.com/loutres/juneau/pkg/generated/listers/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/status"
	"github.com/loutres/juneau/pkg/workloop"
)

// ControllerName names the loop, its queue and its log lines.
const ControllerName = "networkinterface"

// Indexes this controller registers on the NetworkInterface informer.
var Indexes = []string{indexes.NICByPod, indexes.NICByElasticIP}

// Informers are the shared informers the controller reads.
type Informers struct {
	Pods              coreinformers.PodInformer
	NetworkInterfaces informers.NetworkInterfaceInformer
	ElasticIPs        informers.ElasticIPInformer
}

// Options tune the controller.
type Options = workloop.Options

// Controller keeps NetworkInterfaces in step with Pods.
type Controller struct {
	*workloop.Controller
	client   versioned.Interface
	recorder record.EventRecorder
	status   status.NetworkInterfaceWriter
	pods     corelisters.PodLister
	eips     listers.ElasticIPLister
	nicInf   cache.SharedIndexInformer
	reported *problemMemory
}

// NewController registers the indexes and event handlers; it starts nothing.
func NewController(client versioned.Interface, inf Informers, recorder record.EventRecorder, opts Options) (*Controller, error) {
	c := &Controller{
		client:   client,
		recorder: recorder,
		status:   status.NetworkInterfaces(client, v1alpha1.FieldManagerController, recorder),
		pods:     inf.Pods.Lister(),
		eips:     inf.ElasticIPs.Lister(),
		nicInf:   inf.NetworkInterfaces.Informer(),
		reported: &problemMemory{seen: map[string]string{}},
	}
	c.Controller = workloop.NewController(ControllerName, c.sync, opts)
	if err := indexes.Add(c.nicInf, Indexes...); err != nil {
		return nil, err
	}
	err := c.Watch(
		workloop.Watch{Informer: inf.Pods.Informer(), Handler: c.Loop.Handler()},
		workloop.Watch{Informer: c.nicInf, Handler: workloop.Funcs(c.onNIC)},
		workloop.Watch{Informer: inf.ElasticIPs.Informer(), Handler: workloop.Funcs(c.onElasticIP)},
	)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// onNIC wakes the Pod a NIC belongs to (by name: a NIC of an earlier Pod of the same
// name is cleaned up by the current Pod's sync).
func (c *Controller) onNIC(obj any) {
	if nic, ok := obj.(*v1alpha1.NetworkInterface); ok {
		c.Loop.Add(indexes.Key(nic.Namespace, nic.Spec.PodRef.Name))
	}
}

// onElasticIP wakes the Pods whose NICs name the ElasticIP: their status follows it.
func (c *Controller) onElasticIP(obj any) {
	eip, ok := obj.(*v1alpha1.ElasticIP)
	if !ok {
		return
	}
	nics, err := indexes.ByIndex[*v1alpha1.NetworkInterface](c.nicInf, indexes.NICByElasticIP, indexes.Key(eip.Namespace, eip.Name))
	if err != nil {
		return
	}
	for _, nic := range nics {
		c.Loop.Add(indexes.Key(nic.Namespace, nic.Spec.PodRef.Name))
	}
}

// problemMemory remembers the annotation problem last reported for each Pod, so the
// Warning Event is emitted when the problem appears or changes, not on every sync.
type problemMemory struct {
	mu   sync.Mutex
	seen map[string]string // Pod key -> UID + problem
}

// changed records the problem of a Pod (empty: none) and reports whether it differs
// from the one recorded before.
func (m *problemMemory) changed(key, problem string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if problem == "" {
		delete(m.seen, key)
		return false
	}
	if m.seen[key] == problem {
		return false
	}
	m.seen[key] = problem
	return true
}
