package harness

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// WaitElasticIPAttached waits until the ElasticIP is Attached and returns its address.
func (c *Cluster) WaitElasticIPAttached(namespace, name string) string {
	c.t.Helper()
	var eip *v1alpha1.ElasticIP
	c.waitFor("ElasticIP "+namespace+"/"+name+" Attached", func(ctx context.Context) bool {
		var err error
		eip, err = c.CP.Juneau.JuneauV1alpha1().ElasticIPs(namespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil && eip.Status.Phase == v1alpha1.ElasticIPAttached
	}, func() string {
		if eip == nil {
			return "<none>"
		}
		return string(eip.Status.Phase) + " " + eip.Status.Address
	})
	return eip.Status.Address
}
