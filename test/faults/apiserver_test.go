package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"

	"github.com/loutres/juneau/test/e2e/harness"
	"github.com/loutres/juneau/test/framework"
)

// apiOutage is how long the API server stays away.
const apiOutage = 60 * time.Second

// convergeTimeout bounds the wait for a change made once the API server is back.
const convergeTimeout = 3 * time.Minute

// TestAPIServerOutage: the API server stops for a minute and starts again. Throughout,
// the external client's UDP through the NAT, ICMP echo and ARP requests (its neighbour
// entry deleted before every UDP probe, so the Nodes' ARP responders answer all the
// time) reach both ElasticIPs, the NAT one on node-a and the direct one on node-b;
// afterwards the controller, the webhook and both agents still run as the same
// processes, apply a change made once the API server is back, and the claims are one
// per ElasticIP.
//
// Harness, not the real cluster: the fault is in the control plane, which the harness
// owns as processes it can stop and restart on the same port, data and keys; what must
// survive it (juneau's processes and the datapath they programmed in the kernel) is the
// same in both. On the real cluster the kubelets, controller-manager and scheduler
// would lose the API server too, for no additional coverage of juneau, and the test
// would share that cluster with every other real-cluster test.
func TestAPIServerOutage(t *testing.T) {
	cp := ownControlPlane(t)
	s := newScenario(t, cp, harness.Options{})
	c := s.c
	// A Pod for the change made after the outage, started while the API is up.
	late := c.RunPod(harness.PodSpec{Namespace: s.ns, Name: "late", Node: "node-b"})
	c.ServeUDP(late.NS, "late", udpPort)
	components := []*framework.Component{c.Controller, c.Webhook.Component, c.Nodes["node-a"].Agent, c.Nodes["node-b"].Agent}
	pids := map[string]int{}
	for _, comp := range components {
		pids[comp.Name] = comp.PID()
	}

	probes := c.StartProbes(probeInterval, s.targets()...)
	probing := time.Now()
	cp.StopAPIServer()
	if !apiDown(cp) {
		t.Fatal("the API server still accepts connections after it was stopped")
	}
	start := time.Now()
	// The outage lasts apiOutage; it ends early only if a component exits.
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, apiOutage, false, func(context.Context) (bool, error) {
		for _, comp := range components {
			if done, err := comp.Exited(); done {
				return false, fmt.Errorf("%s exited during the outage: %v\n%s", comp.Name, err, comp.LogTail(20))
			}
		}
		return false, nil
	})
	if !wait.Interrupted(err) {
		t.Fatal(err)
	}
	outage := time.Since(start)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	c.ExpectRefusals(probing, time.Now())
	t.Logf("the API server was stopped for %s, and ready again %s later", outage.Round(time.Second), (time.Since(start) - outage).Round(time.Second))

	// A change made once the API server is back is applied: the agents and the
	// controller resumed their watches. That can take a while: client-go's reflectors
	// back off while the API server is away, up to 30 s between attempts plus as much
	// jitter, so the first one after the restart may come a minute later.
	back := time.Now()
	createEIP(t, c, s.ns, "late-eip")
	attach(t, c, s.ns, "late-attach", "late-eip", "late.eth0")
	var lateEIP string
	framework.EventuallyWithin(t, convergeTimeout, "late-eip attached after the outage", func(ctx context.Context) (bool, string) {
		eip, err := c.CP.Juneau.JuneauV1alpha1().ElasticIPs(s.ns).Get(ctx, "late-eip", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		lateEIP = eip.Status.Address
		cond := meta.FindStatusCondition(eip.Status.Conditions, v1alpha1.ConditionAttached)
		return cond != nil && cond.Status == metav1.ConditionTrue && answering(ctx, c, s.ns, "late-eip"), string(eip.Status.Phase)
	}, components...)
	s.waitReachable(t, harness.ProbeTarget{Addr: lateEIP, Port: udpPort, Name: "late"})
	t.Logf("a change made after the outage was applied and answered %s after the API server was ready", time.Since(back).Round(100*time.Millisecond))
	checkProbes(t, probes.Stop(), time.Since(probing))

	for _, comp := range components {
		if done, err := comp.Exited(); done {
			t.Errorf("%s exited: %v", comp.Name, err)
		}
		if comp.PID() != pids[comp.Name] {
			t.Errorf("%s runs as process %d, was %d: restarted", comp.Name, comp.PID(), pids[comp.Name])
		}
	}
	for _, n := range c.Nodes {
		if starts := strings.Count(n.Agent.Log(), "Starting node agent"); starts != 1 {
			t.Errorf("the agent of %s started %d times", n.Name, starts)
		}
	}
	checkClaims(t, cp)
}
