package e2e

import (
	"strings"
	"testing"

	"github.com/loutres/juneau/test/e2e/harness"
)

// TestNAT: the README example's nginx-eip attached to nginx.eth0. From the external
// client, TCP to the ElasticIP reaches the Pod, which sees the client's address; the
// Pod's own outbound traffic arrives with the ElasticIP as source, though ptp
// masquerades Pod egress.
func TestNAT(t *testing.T) {
	c, ns := setup(t)
	ctx := testContext(t)
	nginx := c.RunPod(harness.PodSpec{Namespace: ns, Name: "nginx", Node: "node-a"})
	c.ServeTCP(nginx.NS, "nginx", 80)
	apply := `apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIP
metadata: {name: nginx-eip}
spec: {externalNetwork: ext-net}
---
apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIPAttachment
metadata: {name: nginx-eip-attach}
spec:
  elasticIPRef: {name: nginx-eip}
  targetRef: {networkInterfaceName: nginx.eth0}
`
	if r := c.CP.Kubectl(ctx, apply, "apply", "-n", ns, "-f", "-"); r.Err != nil {
		t.Fatal(r.Err)
	}
	eip := c.WaitElasticIPWorking(ns, "nginx-eip")
	c.EventuallyDial(c.Client, eip, 80, "nginx")
	// Attempts made while the rules were still being programmed may have left entries;
	// start the check from a clean table.
	node := c.Nodes["node-a"].NS
	node.MustRun("conntrack", "-F")
	got, err := harness.Dial(c.Client, eip, 80)
	if err != nil {
		t.Fatal(err)
	}
	if want := "nginx " + harness.ClientIP; got != want {
		t.Errorf("the Pod saw %q, want %q (the client's real address)", got, want)
	}
	server := c.ServeTCP(c.Client, "client", 9000)
	got = c.EventuallyDial(nginx.NS, harness.ClientIP, 9000, "client")
	if want := "client " + eip; got != want {
		t.Errorf("the client saw %q, want %q (the ElasticIP as source)", got, want)
	}
	for _, seen := range server.Seen() {
		if seen != eip {
			t.Errorf("client saw a connection from %s, want only %s", seen, eip)
		}
	}
	if out := node.MustRun("conntrack", "-L"); strings.Contains(out, eip) {
		t.Errorf("conntrack saw translated flows:\n%s", out)
	}
}
