package e2e

import (
	"strings"
	"testing"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/e2e/harness"
)

// TestHandoverAdmission: a second Pod naming an ElasticIP a running Pod carries is
// rejected; once the first is Terminating it is accepted, its CNI ADD fails until the
// first is gone, then it starts and takes the address.
func TestHandoverAdmission(t *testing.T) {
	c, ns := setup(t)
	ctx := testContext(t)
	createElasticIP(t, c, ns, "ho-eip")
	eip := c.WaitElasticIPAvailable(ns, "ho-eip")
	first := c.RunPod(harness.PodSpec{Namespace: ns, Name: "first", Node: "node-a",
		Annotations: map[string]string{v1alpha1.AnnotationElasticIP: "ho-eip"}})
	c.ServeTCP(first.NS, "first", 80)
	c.EventuallyDial(c.Client, eip, 80, "first")

	second := `apiVersion: v1
kind: Pod
metadata:
  name: second
  annotations: {juneau.loutres.me/elastic-ip: ho-eip}
spec:
  nodeName: node-b
  containers: [{name: app, image: registry.k8s.io/pause:3.10}]
`
	r := c.CP.Kubectl(ctx, second, "apply", "-n", ns, "-f", "-")
	if r.Err == nil || !strings.Contains(r.Stderr, "first") {
		t.Fatalf("a second Pod on a held ElasticIP: err=%v stderr=%q, want a rejection naming the holder", r.Err, r.Stderr)
	}
	first.Terminate()
	if r := c.CP.Kubectl(ctx, second, "apply", "-n", ns, "-f", "-"); r.Err != nil {
		t.Fatalf("the second Pod while the first is Terminating: %v", r.Err)
	}
	p := c.AdoptPod(ns, "second")
	if err := p.StartWithWait(2); err == nil || !strings.Contains(err.Error(), "first.eth0") {
		t.Fatalf("CNI ADD while the first still holds the address: %v, want a failure naming first.eth0", err)
	}
	first.Gone()
	if err := p.Start(); err != nil {
		t.Fatalf("CNI ADD once the first is gone: %v", err)
	}
	c.ServeTCP(p.NS, "second", 80)
	c.Client.FlushNeighbour("eth0", eip)
	c.EventuallyDial(c.Client, eip, 80, "second")
}

// TestBothUsesRejected: a Pod naming an ElasticIP attached by NAT is rejected, and an
// attachment on an ElasticIP a Pod's NIC carries is rejected.
func TestBothUsesRejected(t *testing.T) {
	c, ns := setup(t)
	ctx := testContext(t)
	createElasticIP(t, c, ns, "nat-eip")
	createElasticIP(t, c, ns, "dir-eip")
	c.RunPod(harness.PodSpec{Namespace: ns, Name: "natted", Node: "node-a"})
	c.RunPod(harness.PodSpec{Namespace: ns, Name: "direct", Node: "node-b",
		Annotations: map[string]string{v1alpha1.AnnotationElasticIP: "dir-eip"}})
	attach := `apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIPAttachment
metadata: {name: %s}
spec:
  elasticIPRef: {name: %s}
  targetRef: {networkInterfaceName: natted.eth0}
`
	if r := c.CP.Kubectl(ctx, sprintf(attach, "nat-attach", "nat-eip"), "apply", "-n", ns, "-f", "-"); r.Err != nil {
		t.Fatal(r.Err)
	}
	c.WaitElasticIPWorking(ns, "nat-eip")
	pod := `apiVersion: v1
kind: Pod
metadata:
  name: thief
  annotations: {juneau.loutres.me/elastic-ip: nat-eip}
spec:
  nodeName: node-b
  containers: [{name: app, image: registry.k8s.io/pause:3.10}]
`
	if r := c.CP.Kubectl(ctx, pod, "apply", "-n", ns, "-f", "-"); r.Err == nil || !strings.Contains(r.Stderr, "nat-attach") {
		t.Errorf("a Pod on an ElasticIP attached by NAT: err=%v stderr=%q, want a rejection naming nat-attach", r.Err, r.Stderr)
	}
	c.WaitElasticIPWorking(ns, "dir-eip")
	if r := c.CP.Kubectl(ctx, sprintf(attach, "dir-attach", "dir-eip"), "apply", "-n", ns, "-f", "-"); r.Err == nil || !strings.Contains(r.Stderr, "direct.eth0") {
		t.Errorf("an attachment on an ElasticIP a Pod carries: err=%v stderr=%q, want a rejection naming direct.eth0", r.Err, r.Stderr)
	}
}
