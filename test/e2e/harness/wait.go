package harness

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// WaitElasticIPWorking waits for what a user looks at and returns the ElasticIP's
// address: its Attached condition True with the reason Attached, the readiness gate of
// the Pod that uses it True (every harness Pod lists juneau's gate unless its test says
// otherwise), and, on an arp network, an answer from that Pod at the address to the
// external client's ping (ICMP echo or ICMPv6 echo; a bgp network is reached through a
// router, which its tests probe). For either family.
func (c *Cluster) WaitElasticIPWorking(namespace, name string) string {
	c.t.Helper()
	var eip *v1alpha1.ElasticIP
	c.waitFor("ElasticIP "+namespace+"/"+name+" Attached=True", func(ctx context.Context) bool {
		var err error
		eip, err = c.CP.Juneau.JuneauV1alpha1().ElasticIPs(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		cond := meta.FindStatusCondition(eip.Status.Conditions, v1alpha1.ConditionAttached)
		return cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == v1alpha1.ReasonAttached
	}, func() string {
		if eip == nil {
			return "<none>"
		}
		return fmt.Sprintf("%s %s %+v", eip.Status.Phase, eip.Status.Address, eip.Status.Conditions)
	})
	addr := eip.Status.Address
	if pod := c.userOf(eip); pod != "" {
		c.WaitGate(namespace, pod)
	}
	network, err := c.CP.Juneau.JuneauV1alpha1().ExternalNetworks().Get(context.Background(), eip.Spec.ExternalNetwork, metav1.GetOptions{})
	if err != nil {
		c.t.Fatalf("ExternalNetwork of ElasticIP %s/%s: %v", namespace, name, err)
	}
	if network.Spec.Type == v1alpha1.AdvertiseARP {
		var out string
		c.waitFor("the external client's ping of "+addr, func(context.Context) bool {
			out, err = c.Client.Output("ping", "-c", "1", "-W", "1", addr)
			return err == nil
		}, func() string { return fmt.Sprintf("%v: %s", err, out) })
	}
	return addr
}

// WaitElasticIPUser waits until the ElasticIP's controller has decided who uses it
// (status.attachment) and returns its address. It is for tests about what a user sees
// before traffic reaches the Pod (no router yet, a Pod not started): they assert the
// Attached condition's reason themselves, and WaitElasticIPWorking once it may work.
func (c *Cluster) WaitElasticIPUser(namespace, name string) string {
	c.t.Helper()
	var eip *v1alpha1.ElasticIP
	c.waitFor("ElasticIP "+namespace+"/"+name+" used", func(ctx context.Context) bool {
		var err error
		eip, err = c.CP.Juneau.JuneauV1alpha1().ElasticIPs(namespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil && eip.Status.Attachment != nil && eip.Status.Address != ""
	}, func() string { return fmt.Sprintf("%+v", eip) })
	return eip.Status.Address
}

// userOf is the Pod that uses the ElasticIP, from the user it records: its attachment's
// target NetworkInterface, or its NetworkInterface; "" when it cannot be told.
func (c *Cluster) userOf(eip *v1alpha1.ElasticIP) string {
	h := eip.Status.Attachment
	if h == nil {
		return ""
	}
	nicName := h.Name
	if h.Kind == v1alpha1.AttachmentKindElasticIPAttachment {
		a, err := c.CP.Juneau.JuneauV1alpha1().ElasticIPAttachments(eip.Namespace).Get(context.Background(), h.Name, metav1.GetOptions{})
		if err != nil {
			return ""
		}
		nicName = a.Spec.TargetRef.NetworkInterfaceName
	}
	nic, err := c.CP.Juneau.JuneauV1alpha1().NetworkInterfaces(eip.Namespace).Get(context.Background(), nicName, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return nic.Spec.PodRef.Name
}

// WaitGate waits until every readiness-gate condition of juneau the Pod lists is True.
func (c *Cluster) WaitGate(namespace, name string) {
	c.t.Helper()
	var pod *corev1.Pod
	c.waitFor("the readiness gate of Pod "+namespace+"/"+name+" True", func(ctx context.Context) bool {
		var err error
		if pod, err = c.CP.Kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false
		}
		for _, g := range pod.Spec.ReadinessGates {
			if !slices.Contains(v1alpha1.PodConditionTypes(), string(g.ConditionType)) {
				continue
			}
			if !slices.ContainsFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool {
				return c.Type == g.ConditionType && c.Status == corev1.ConditionTrue
			}) {
				return false
			}
		}
		return true
	}, func() string {
		if pod == nil {
			return "<none>"
		}
		return fmt.Sprintf("%+v", pod.Status.Conditions)
	})
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
