package e2e

import (
	"context"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/e2e/harness"
)

// gate returns the Pod's juneau readiness-gate condition, if set.
func gate(c *harness.Cluster, ns, name string) *corev1.PodCondition {
	pod, err := c.CP.Kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	for i := range pod.Status.Conditions {
		if string(pod.Status.Conditions[i].Type) == v1alpha1.PodConditionElasticIP {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// TestReadinessGate: the node agent sets the gate False until the Pod's ElasticIP is
// programmed on its Node (NAT rules and ARP answer), then True — and traffic from the
// external client reaches the Pod at that point; False again after detachment.
func TestReadinessGate(t *testing.T) {
	c, ns := setup(t)
	ctx := testContext(t)
	p := c.RunPod(harness.PodSpec{Namespace: ns, Name: "gated", Node: "node-a", ReadinessGates: []string{v1alpha1.PodConditionElasticIP}})
	c.ServeTCP(p.NS, "gated", 80)
	c.WaitGone("gate False before any ElasticIP", func(context.Context) bool {
		g := gate(c, ns, "gated")
		return g != nil && g.Status == corev1.ConditionFalse && g.Reason == v1alpha1.ReasonNotProgrammed
	})
	createElasticIP(t, c, ns, "gated-eip")
	attach := `apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIPAttachment
metadata: {name: gated-attach}
spec:
  elasticIPRef: {name: gated-eip}
  targetRef: {networkInterfaceName: gated.eth0}
`
	if r := c.CP.Kubectl(ctx, attach, "apply", "-n", ns, "-f", "-"); r.Err != nil {
		t.Fatal(r.Err)
	}
	c.WaitGone("gate True", func(context.Context) bool {
		g := gate(c, ns, "gated")
		return g != nil && g.Status == corev1.ConditionTrue && g.Reason == v1alpha1.ReasonProgrammed
	})
	eip := c.WaitElasticIPWorking(ns, "gated-eip")
	// Programmed means reachable now: the first attempt must succeed.
	if got, err := harness.Dial(c.Client, eip, 80); err != nil || got != "gated "+harness.ClientIP {
		t.Errorf("right after the gate turned True: %q %v", got, err)
	}
	if err := c.CP.Juneau.JuneauV1alpha1().ElasticIPAttachments(ns).Delete(ctx, "gated-attach", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitGone("gate False after detachment", func(context.Context) bool {
		g := gate(c, ns, "gated")
		return g != nil && g.Status == corev1.ConditionFalse
	})
}

// TestAntiSpoofing: a direct NIC sends only with its ElasticIP as source.
func TestAntiSpoofing(t *testing.T) {
	c, ns := setup(t)
	createElasticIP(t, c, ns, "sp-eip")
	eip := c.WaitElasticIPAvailable(ns, "sp-eip")
	p := c.RunPod(harness.PodSpec{Namespace: ns, Name: "spoofer", Node: "node-a",
		Annotations: map[string]string{v1alpha1.AnnotationElasticIP: "sp-eip"}})
	const spoofed = "10.225.51.99"
	p.NS.MustRun("ip", "addr", "add", spoofed+"/32", "dev", "eth0")

	var recv *net.UDPConn
	c.Client.MustDo(func() error {
		var err error
		recv, err = net.ListenUDP("udp4", &net.UDPAddr{Port: 9100})
		return err
	})
	defer recv.Close()
	send := func(src string) {
		t.Helper()
		p.NS.MustDo(func() error {
			conn, err := net.DialUDP("udp4", &net.UDPAddr{IP: net.ParseIP(src)}, &net.UDPAddr{IP: net.ParseIP(harness.ClientIP), Port: 9100})
			if err != nil {
				return err
			}
			defer conn.Close()
			_, err = conn.Write([]byte(src))
			return err
		})
	}
	// The agent programs anti-spoofing once the NIC holds its address; the genuine source
	// always passes, so wait until it does and check the spoofed one never arrived.
	got := map[string]bool{}
	buf := make([]byte, 64)
	c.WaitGone("a datagram from the ElasticIP", func(context.Context) bool {
		send(eip)
		_ = recv.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		n, _, err := recv.ReadFromUDP(buf)
		if err == nil {
			got[string(buf[:n])] = true
		}
		return got[eip]
	})
	c.WaitGone("anti-spoofing programmed", func(context.Context) bool {
		out, err := c.Nodes["node-a"].NS.Output("nft", "list", "set", "ip", "juneau", "direct_allowed")
		return err == nil && containsAll(out, eip)
	})
	// Drain what the polling above sent, so the marker below is the last one.
	for {
		_ = recv.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if _, _, err := recv.ReadFromUDP(buf); err != nil {
			break
		}
	}
	for range 3 {
		send(spoofed)
	}
	send(eip) // a marker after the spoofed ones
	for {
		_ = recv.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, _, err := recv.ReadFromUDP(buf)
		if err != nil {
			t.Fatal("the marker datagram never arrived")
		}
		if string(buf[:n]) == spoofed {
			t.Fatalf("a datagram with the spoofed source %s reached the client", spoofed)
		}
		if string(buf[:n]) == eip {
			break
		}
	}
}
