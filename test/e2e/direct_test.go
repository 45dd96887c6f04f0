package e2e

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/e2e/harness"
)

func createElasticIP(t *testing.T, c *harness.Cluster, ns, name string) {
	t.Helper()
	if _, err := c.CP.Juneau.JuneauV1alpha1().ElasticIPs(ns).Create(context.Background(), &v1alpha1.ElasticIP{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ElasticIPSpec{ExternalNetwork: "ext-net"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestDirectEth0: web-eip carried by web's eth0 through the elastic-ip annotation.
func TestDirectEth0(t *testing.T) {
	c, ns := setup(t)
	ctx := testContext(t)
	createElasticIP(t, c, ns, "web-eip")
	eip := c.WaitElasticIPAvailable(ns, "web-eip")
	web := c.RunPod(harness.PodSpec{Namespace: ns, Name: "web", Node: "node-b",
		Annotations: map[string]string{v1alpha1.AnnotationElasticIP: "web-eip"}})
	if web.IP != eip {
		t.Errorf("CNI result IP = %s, want the ElasticIP %s", web.IP, eip)
	}
	addrs := web.NS.MustRun("ip", "-4", "-o", "addr", "show", "dev", "eth0")
	if !strings.Contains(addrs, eip+"/32") || strings.Count(addrs, "inet ") != 1 {
		t.Errorf("eth0 addresses:\n%s\nwant only %s/32", addrs, eip)
	}
	routes := web.NS.MustRun("ip", "-4", "route", "show")
	if !strings.Contains(routes, "default via 169.254.0.1 dev eth0 onlink") {
		t.Errorf("routes:\n%s\nwant default via 169.254.0.1 dev eth0 onlink", routes)
	}
	pod, err := c.CP.Kube.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil || pod.Status.PodIP != eip {
		t.Errorf("pod.status.podIP = %q (%v), want %s", pod.Status.PodIP, err, eip)
	}
	r := c.CP.Kubectl(ctx, "", "get", "networkinterface", "web.eth0", "-n", ns)
	if r.Err != nil || !strings.Contains(strings.Join(strings.Fields(r.Stdout), " "), "node-b web-eip "+eip+"/32 Ready") {
		t.Errorf("kubectl get networkinterface web.eth0:\n%s %v", r.Stdout, r.Err)
	}

	c.ServeTCP(web.NS, "web", 80)
	if got := c.EventuallyDial(c.Client, eip, 80, "web"); got != "web "+harness.ClientIP {
		t.Errorf("web saw %q, want the client's address", got)
	}
	c.ServeTCP(c.Client, "client", 9000)
	if got := c.EventuallyDial(web.NS, harness.ClientIP, 9000, "client"); got != "client "+eip {
		t.Errorf("client saw %q, want the ElasticIP as source", got)
	}
}
