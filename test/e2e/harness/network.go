package harness

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// CreateExternalNetwork creates the AddressPool "ext-pool" (10.225.51.5-10.225.51.99 on
// the external segment) and the ExternalNetwork "ext-net" over it, announced by ARP:
// where the tests' ElasticIPs come from.
func (c *Cluster) CreateExternalNetwork() {
	c.t.Helper()
	ctx := context.Background()
	j := c.CP.Juneau.JuneauV1alpha1()
	if _, err := j.AddressPools().Create(ctx, &v1alpha1.AddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: "ext-pool"},
		Spec:       v1alpha1.AddressPoolSpec{AdvertiseMode: v1alpha1.AdvertiseARP, Addresses: []string{"10.225.51.5-10.225.51.99"}},
	}, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	if _, err := j.ExternalNetworks().Create(ctx, &v1alpha1.ExternalNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: "ext-net"},
		Spec:       v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseARP, AddressPools: []string{"ext-pool"}},
	}, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}
