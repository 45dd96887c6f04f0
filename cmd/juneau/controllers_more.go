package main

import (
	"context"
	"fmt"

	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/loutres/juneau/pkg/controllers/attachment"
	"github.com/loutres/juneau/pkg/controllers/network"
	"github.com/loutres/juneau/pkg/controllers/networkinterface"
	"github.com/loutres/juneau/pkg/controllers/podeip"
	"github.com/loutres/juneau/pkg/controllers/pool"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	juneauinformers "github.com/loutres/juneau/pkg/generated/informers/externalversions"
)

// otherControllers builds the controllers beside the ElasticIP controller: Pod NICs,
// attachment status, pool and network status, automatic per-Pod ElasticIPs.
func (o *controllerOptions) otherControllers(kube kubernetes.Interface, juneau versioned.Interface,
	kubeInf kubeinformers.SharedInformerFactory, juneauInf juneauinformers.SharedInformerFactory,
	recorder record.EventRecorder, reg registerer, queues workqueue.MetricsProvider) ([]func(context.Context, int), error) {
	j := juneauInf.Juneau().V1alpha1()
	nic, err := networkinterface.NewController(juneau, networkinterface.Informers{
		Pods: kubeInf.Core().V1().Pods(), NetworkInterfaces: j.NetworkInterfaces(), ElasticIPs: j.ElasticIPs(),
	}, recorder, networkinterface.Options{QueueMetrics: queues})
	if err != nil {
		return nil, fmt.Errorf("networkinterface controller: %w", err)
	}
	att, err := attachment.NewController(juneau, attachment.Informers{
		Attachments: j.ElasticIPAttachments(), ElasticIPs: j.ElasticIPs(), NetworkInterfaces: j.NetworkInterfaces(),
	}, recorder, attachment.Options{QueueMetrics: queues})
	if err != nil {
		return nil, fmt.Errorf("attachment controller: %w", err)
	}
	pools, err := pool.NewController(juneau, pool.Informers{
		Pools: j.AddressPools(), Claims: j.AllocationClaims(), Nodes: kubeInf.Core().V1().Nodes(),
	}, recorder, pool.Options{Registerer: reg, QueueMetrics: queues})
	if err != nil {
		return nil, fmt.Errorf("addresspool controller: %w", err)
	}
	nets, err := network.NewController(juneau, network.Informers{Networks: j.ExternalNetworks(), Pools: j.AddressPools()}, recorder, network.Options{QueueMetrics: queues})
	if err != nil {
		return nil, fmt.Errorf("externalnetwork controller: %w", err)
	}
	podEIP, err := o.podEIPController(kube, juneau, kubeInf, juneauInf, recorder, queues)
	if err != nil {
		return nil, err
	}
	return []func(context.Context, int){nic.Run, att.Run, pools.Run, nets.Run, podEIP.Run}, nil
}

// podEIPController builds the automatic per-Pod ElasticIP controller; it writes Pod
// annotations with kube.
func (o *controllerOptions) podEIPController(kube kubernetes.Interface, juneau versioned.Interface, kubeInf kubeinformers.SharedInformerFactory,
	juneauInf juneauinformers.SharedInformerFactory, recorder record.EventRecorder, queues workqueue.MetricsProvider) (*podeip.Controller, error) {
	kinds, err := podeip.ParseWorkloadKinds(o.statefulKinds)
	if err != nil {
		return nil, fmt.Errorf("--stateful-workload-kinds: %w", err)
	}
	j := juneauInf.Juneau().V1alpha1()
	c, err := podeip.NewController(kube, juneau, podeip.Informers{
		Pods: kubeInf.Core().V1().Pods(), ElasticIPs: j.ElasticIPs(), Attachments: j.ElasticIPAttachments(),
		NetworkInterfaces: j.NetworkInterfaces(), Networks: j.ExternalNetworks(),
	}, recorder, podeip.Options{StatefulKinds: kinds, QueueMetrics: queues})
	if err != nil {
		return nil, fmt.Errorf("podeip controller: %w", err)
	}
	return c, nil
}
