package e2e

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/e2e/harness"
)

// TestBroadcastAddressNotAnswered: a pool that holds the external segment's broadcast
// address hands it out, but the agent of the Node that uses it refuses to answer ARP for
// it, and says so: the advertisement's Answering is False (ReservedAddress) naming the
// address, and the ElasticIP's Attached is False with the same words.
func TestBroadcastAddressNotAnswered(t *testing.T) {
	c, ns := setup(t)
	ctx := testContext(t)
	c.RunPod(harness.PodSpec{Namespace: ns, Name: "bcast", Node: "node-a"})
	manifest := `apiVersion: juneau.loutres.me/v1alpha1
kind: AddressPool
metadata: {name: bcast-pool}
spec: {advertiseMode: arp, addresses: ["10.225.51.250-10.225.51.255"]}
---
apiVersion: juneau.loutres.me/v1alpha1
kind: ExternalNetwork
metadata: {name: bcast-net}
spec: {type: arp, addressPools: [bcast-pool]}
`
	if r := c.CP.Kubectl(ctx, manifest, "apply", "-f", "-"); r.Err != nil {
		t.Fatal(r.Err)
	}
	t.Cleanup(func() {
		_ = c.CP.Juneau.JuneauV1alpha1().ExternalNetworks().Delete(context.Background(), "bcast-net", metav1.DeleteOptions{})
		_ = c.CP.Juneau.JuneauV1alpha1().AddressPools().Delete(context.Background(), "bcast-pool", metav1.DeleteOptions{})
	})
	manifest = `apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIP
metadata: {name: bcast-eip}
spec: {externalNetwork: bcast-net, requestedIP: 10.225.51.255}
---
apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIPAttachment
metadata: {name: bcast-attach}
spec:
  elasticIPRef: {name: bcast-eip}
  targetRef: {networkInterfaceName: bcast.eth0}
`
	if r := c.CP.Kubectl(ctx, manifest, "apply", "-n", ns, "-f", "-"); r.Err != nil {
		t.Fatal(r.Err)
	}
	const why = "10.225.51.255 is the broadcast address of 10.225.51.0/24 on interface ext0: no Node answers ARP for it"
	name := advertisement.PreferredName(ns, "bcast-eip")
	c.WaitGone("Answering False on the broadcast address", func(ctx context.Context) bool {
		ad, err := c.CP.Juneau.JuneauV1alpha1().ARPAdvertisements().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		cond := meta.FindStatusCondition(ad.Status.Conditions, v1alpha1.ConditionAnswering)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == v1alpha1.ReasonReservedAddress && cond.Message == why
	})
	// NotAnswering comes first with "no Answering condition", then quotes the agent's
	// refusal once the controller has seen it.
	var at *metav1.Condition
	c.WaitGone("ElasticIP Attached False quoting the refusal", func(ctx context.Context) bool {
		eip, err := c.CP.Juneau.JuneauV1alpha1().ElasticIPs(ns).Get(ctx, "bcast-eip", metav1.GetOptions{})
		if err != nil {
			return false
		}
		at = meta.FindStatusCondition(eip.Status.Conditions, v1alpha1.ConditionAttached)
		return at != nil && at.Reason == v1alpha1.ReasonNotAnswering && strings.Contains(at.Message, why)
	})
	if at.Status != metav1.ConditionFalse {
		t.Errorf("ElasticIP Attached %s: %q, want False quoting %q", at.Status, at.Message, why)
	}
	if !strings.Contains(c.Nodes["node-a"].Agent.Log(), "Not answering ARP") {
		t.Errorf("the agent did not log its refusal:\n%s", c.Nodes["node-a"].Agent.LogTail(20))
	}
}
