package main

import (
	"context"

	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	juneauinformers "github.com/loutres/juneau/pkg/generated/informers/externalversions"
)

// otherControllers builds the controllers beside the ElasticIP controller.
func (o *controllerOptions) otherControllers(kube kubernetes.Interface, juneau versioned.Interface,
	kubeInf kubeinformers.SharedInformerFactory, juneauInf juneauinformers.SharedInformerFactory,
	recorder record.EventRecorder, reg registerer) ([]func(context.Context, int), error) {
	return nil, nil
}
