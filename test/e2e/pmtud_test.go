package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/loutres/juneau/test/e2e/harness"
	"github.com/loutres/juneau/test/framework"
	"github.com/loutres/juneau/test/netns"
)

// TestPMTUDThroughNAT: the router before the far client has a 1280-byte link; its
// "fragmentation needed" errors, addressed to the ElasticIP, are rewritten to the Pod,
// whose kernel learns the path MTU, and a large transfer from the Pod completes.
func TestPMTUDThroughNAT(t *testing.T) {
	cp := framework.Shared(t)
	c := harness.New(t, cp, harness.Options{FarClient: true})
	ns := cp.NewNamespace(t, "pmtud")
	ctx := testContext(t)
	c.CreateExternalNetwork()
	p := c.RunPod(harness.PodSpec{Namespace: ns, Name: "big", Node: "node-a"})
	manifest := `apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIP
metadata: {name: big-eip}
spec: {externalNetwork: ext-net}
---
apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIPAttachment
metadata: {name: big-attach}
spec:
  elasticIPRef: {name: big-eip}
  targetRef: {networkInterfaceName: big.eth0}
`
	if r := cp.Kubectl(ctx, manifest, "apply", "-n", ns, "-f", "-"); r.Err != nil {
		t.Fatal(r.Err)
	}
	eip := c.WaitElasticIPWorking(ns, "big-eip")
	// The NAT is in place once the far client sees the ElasticIP as source.
	c.ServeTCP(c.Far, "far", 9400)
	c.EventuallyDial(p.NS, harness.FarClientIP, 9400, "far "+eip)

	transferLearnsPathMTU(t, c, p.NS, "tcp4", harness.FarClientIP)
}

// transferLearnsPathMTU sends 2 MiB from the Pod's namespace to a sink on the far client
// at farIP over network ("tcp4" or "tcp6") until one transfer arrives whole, then checks
// that the Pod's kernel learned the path MTU of the router's far link towards farIP.
func transferLearnsPathMTU(t *testing.T, c *harness.Cluster, pod *netns.NS, network, farIP string) {
	t.Helper()
	family, over := "-4", ""
	if network == "tcp6" {
		family, over = "-6", " over IPv6"
	}
	// A sink on the far client counts the bytes of each connection.
	var l net.Listener
	c.Far.MustDo(func() error {
		var err error
		l, err = net.Listen(network, ":9500")
		return err
	})
	defer l.Close()
	got := make(chan int64, 4)
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			n, _ := io.Copy(io.Discard, conn)
			conn.Close()
			got <- n
		}
	}()
	const size = 2 << 20
	c.WaitGone("a 2 MiB transfer from the Pod to the far client"+over, func(context.Context) bool {
		err := pod.Do(func() error {
			conn, err := net.DialTimeout(network, net.JoinHostPort(farIP, "9500"), 2*time.Second)
			if err != nil {
				return err
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			_, err = conn.Write(make([]byte, size))
			return err
		})
		if err != nil {
			return false
		}
		select {
		case n := <-got:
			return n == size
		case <-time.After(10 * time.Second):
			return false
		}
	})
	out := pod.MustRun("ip", family, "route", "get", farIP)
	if !strings.Contains(out, fmt.Sprintf("mtu %d", harness.RouterMTU)) {
		t.Errorf("the Pod did not learn the path MTU: %s", out)
	}
}
