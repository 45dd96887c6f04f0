package harness

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"

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

// WaitElasticIPAvailable waits until the ElasticIP has an address and returns it.
func (c *Cluster) WaitElasticIPAvailable(namespace, name string) string {
	c.t.Helper()
	var eip *v1alpha1.ElasticIP
	c.waitFor("ElasticIP "+namespace+"/"+name+" to have an address", func(ctx context.Context) bool {
		var err error
		eip, err = c.CP.Juneau.JuneauV1alpha1().ElasticIPs(namespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil && eip.Status.Address != ""
	}, func() string { return "" })
	return eip.Status.Address
}

// WaitAdvertisement waits until the named ARPAdvertisement names node.
func (c *Cluster) WaitAdvertisement(name, node string) {
	c.t.Helper()
	c.waitFor("ARPAdvertisement "+name+" on "+node, func(ctx context.Context) bool {
		ad, err := c.CP.Juneau.JuneauV1alpha1().ARPAdvertisements().Get(ctx, name, metav1.GetOptions{})
		return err == nil && ad.Spec.NodeName == node
	}, func() string { return "" })
}

// WaitElasticIPCondition waits until the ElasticIP's condition has the reason.
func (c *Cluster) WaitElasticIPCondition(namespace, name, condType, reason string) *v1alpha1.ElasticIP {
	c.t.Helper()
	var eip *v1alpha1.ElasticIP
	c.waitFor("ElasticIP "+name+" "+condType+"="+reason, func(ctx context.Context) bool {
		var err error
		eip, err = c.CP.Juneau.JuneauV1alpha1().ElasticIPs(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		cond := meta.FindStatusCondition(eip.Status.Conditions, condType)
		return cond != nil && cond.Reason == reason
	}, func() string { return fmt.Sprintf("%+v", eip) })
	return eip
}

// WaitGone polls cond for up to a minute.
func (c *Cluster) WaitGone(what string, cond func(context.Context) bool) {
	c.t.Helper()
	c.waitFor(what, cond, func() string { return "" })
}

// WaitNIC waits until the NetworkInterface has the phase and Ready reason.
func (c *Cluster) WaitNIC(namespace, name string, phase v1alpha1.NetworkInterfacePhase, reason string) *v1alpha1.NetworkInterface {
	c.t.Helper()
	var nic *v1alpha1.NetworkInterface
	c.waitFor("NetworkInterface "+name+" "+string(phase)+"/"+reason, func(ctx context.Context) bool {
		var err error
		nic, err = c.CP.Juneau.JuneauV1alpha1().NetworkInterfaces(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		cond := meta.FindStatusCondition(nic.Status.Conditions, v1alpha1.ConditionReady)
		return nic.Status.Phase == phase && cond != nil && cond.Reason == reason
	}, func() string { return fmt.Sprintf("%+v", nic) })
	return nic
}
