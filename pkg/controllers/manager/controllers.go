package manager

import (
	"context"

	"github.com/loutres/juneau/pkg/controllers/attachment"
	"github.com/loutres/juneau/pkg/controllers/elasticip"
	"github.com/loutres/juneau/pkg/controllers/heartbeat"
	"github.com/loutres/juneau/pkg/controllers/network"
	"github.com/loutres/juneau/pkg/controllers/networkinterface"
	"github.com/loutres/juneau/pkg/controllers/podeip"
	"github.com/loutres/juneau/pkg/controllers/pool"
	"github.com/loutres/juneau/pkg/controllers/webhookreplicas"
	"github.com/loutres/juneau/pkg/workloop"
)

// controllers is every controller `juneau controller` runs; adding one is adding an
// entry. Each builds itself from the manager's shared informers and Config.
var controllers = []struct {
	name  string
	build func(m *Manager) (runner, error)
}{
	{elasticip.ControllerName, (*Manager).elasticIPs},
	{networkinterface.ControllerName, (*Manager).networkInterfaces},
	{attachment.ControllerName, (*Manager).attachments},
	{pool.ControllerName, (*Manager).pools},
	{network.ControllerName, (*Manager).networks},
	{podeip.ControllerName, (*Manager).podElasticIPs},
	{heartbeat.ControllerName, (*Manager).heartbeats},
	{webhookreplicas.ControllerName, (*Manager).webhookReplicas},
}

// loop are the options every single-loop controller gets.
func (m *Manager) loop() workloop.Options {
	return workloop.Options{QueueMetrics: m.queues}
}

func (m *Manager) elasticIPs() (runner, error) {
	j := m.juneau.Juneau().V1alpha1()
	metrics, err := elasticip.NewMetrics(m.cfg.Registerer)
	if err != nil {
		return nil, err
	}
	if err := m.cfg.Registerer.Register(elasticip.NewStateCollector(j.ElasticIPs().Lister())); err != nil {
		return nil, err
	}
	return elasticip.NewController(m.cfg.Juneau, elasticip.Informers{
		ElasticIPs: j.ElasticIPs(), Claims: j.AllocationClaims(), Pools: j.AddressPools(),
		Networks: j.ExternalNetworks(), Attachments: j.ElasticIPAttachments(),
		NetworkInterfaces: j.NetworkInterfaces(), Advertisements: j.ARPAdvertisements(), BGPAdvertisements: j.BGPAdvertisements(),
		Namespaces: m.kube.Core().V1().Namespaces(),
	}, m.cfg.Recorder, elasticip.Options{OrphanGrace: m.cfg.OrphanGrace, Metrics: metrics, QueueMetrics: m.queues})
}

func (m *Manager) networkInterfaces() (runner, error) {
	j := m.juneau.Juneau().V1alpha1()
	return networkinterface.NewController(m.cfg.Juneau, networkinterface.Informers{
		Pods: m.kube.Core().V1().Pods(), NetworkInterfaces: j.NetworkInterfaces(), ElasticIPs: j.ElasticIPs(),
	}, m.cfg.Recorder, m.loop())
}

func (m *Manager) attachments() (runner, error) {
	j := m.juneau.Juneau().V1alpha1()
	return attachment.NewController(m.cfg.Juneau, attachment.Informers{
		Attachments: j.ElasticIPAttachments(), ElasticIPs: j.ElasticIPs(), NetworkInterfaces: j.NetworkInterfaces(),
	}, m.cfg.Recorder, m.loop())
}

func (m *Manager) pools() (runner, error) {
	j := m.juneau.Juneau().V1alpha1()
	return pool.NewController(m.cfg.Juneau, pool.Informers{
		Pools: j.AddressPools(), Claims: j.AllocationClaims(), Nodes: m.kube.Core().V1().Nodes(),
	}, m.cfg.Recorder, pool.Options{Options: m.loop(), Registerer: m.cfg.Registerer})
}

func (m *Manager) networks() (runner, error) {
	j := m.juneau.Juneau().V1alpha1()
	return network.NewController(m.cfg.Juneau, network.Informers{Networks: j.ExternalNetworks(), Pools: j.AddressPools()},
		m.cfg.Recorder, m.loop())
}

// podElasticIPs is the automatic per-Pod ElasticIP controller; it writes Pod
// annotations with the Kubernetes client.
func (m *Manager) podElasticIPs() (runner, error) {
	j := m.juneau.Juneau().V1alpha1()
	return podeip.NewController(m.cfg.Kube, m.cfg.Juneau, podeip.Informers{
		Pods: m.kube.Core().V1().Pods(), ElasticIPs: j.ElasticIPs(), Attachments: j.ElasticIPAttachments(),
		NetworkInterfaces: j.NetworkInterfaces(), Networks: j.ExternalNetworks(),
	}, m.cfg.Recorder, podeip.Options{Options: m.loop(), StatefulKinds: m.cfg.StatefulKinds})
}

// heartbeats watches the node agents' heartbeat Leases, in LeaseNamespace only.
func (m *Manager) heartbeats() (runner, error) {
	return heartbeat.NewController(m.cfg.Juneau, heartbeat.Informers{
		Advertisements: m.juneau.Juneau().V1alpha1().ARPAdvertisements(), Leases: m.leases.Coordination().V1().Leases(),
	}, m.cfg.Recorder, heartbeat.Options{Options: m.loop(), Namespace: m.cfg.LeaseNamespace, Registerer: m.cfg.Registerer})
}

// webhookReplicas deletes webhook replicas the controller cannot reach; it runs nothing
// when the probing is off.
func (m *Manager) webhookReplicas() (runner, error) {
	if m.cfg.WebhookReplicas.Interval <= 0 {
		return idle{}, nil
	}
	return webhookreplicas.NewController(m.cfg.Kube, m.kube.Core().V1().Pods(), m.cfg.Recorder, m.cfg.WebhookReplicas), nil
}

// idle is a controller turned off.
type idle struct{}

func (idle) Run(context.Context, int) {}
