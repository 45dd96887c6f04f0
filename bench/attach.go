package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/e2e/harness"
	"github.com/loutres/juneau/test/framework"
	"github.com/loutres/juneau/test/netns"
	"github.com/loutres/juneau/test/require"
)

// probePort is where each Pod of row 2 listens for its first datagram.
const probePort = 7777

// podTimes records, per Pod, when it was created and when things were first seen.
type podTimes struct {
	mu      sync.Mutex
	created map[string]time.Time
	ready   map[string]time.Time // juneau's gate True (ElasticIP Pods) or Ready (plain Pods)
	packet  map[string]time.Time // first datagram received in the Pod
	target  map[string]netip.Addr
	errs    []error
}

func newPodTimes() *podTimes {
	return &podTimes{created: map[string]time.Time{}, ready: map[string]time.Time{}, packet: map[string]time.Time{}, target: map[string]netip.Addr{}}
}

func (pt *podTimes) set(m map[string]time.Time, name string, at time.Time) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if _, ok := m[name]; !ok {
		m[name] = at
	}
}

func (pt *podTimes) fail(err error) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.errs = append(pt.errs, err)
}

// watchPods records when each Pod of ns is first seen ready: juneau's readiness-gate
// condition True for Pods that list it, the Ready condition for the others. It also
// learns each automatic ElasticIP's address, from the ElasticIP made for the Pod (as a
// client told the address by the API would): the annotation written back on the Pod
// comes only once its gate is True (docs/automatic.md#what-the-controller-does), so
// it would hold back the first packet.
func (pt *podTimes) watchPods(ctx context.Context, e *env, cp *framework.ControlPlane, ns string) {
	w, err := cp.Kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		e.Fatal(err)
	}
	e.Cleanup(w.Stop)
	eips, err := cp.Juneau.JuneauV1alpha1().ElasticIPs(ns).Watch(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelPod})
	if err != nil {
		e.Fatal(err)
	}
	e.Cleanup(eips.Stop)
	go func() {
		for ev := range eips.ResultChan() {
			eip, ok := ev.Object.(*v1alpha1.ElasticIP)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			if a, err := netip.ParseAddr(eip.Status.Address); err == nil {
				pt.mu.Lock()
				pt.target[eip.Labels[v1alpha1.LabelPod]] = a
				pt.mu.Unlock()
			}
		}
	}()
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			now := time.Now()
			want := corev1.PodReady
			if len(pod.Spec.ReadinessGates) > 0 {
				want = corev1.PodConditionType(v1alpha1.PodConditionElasticIP)
			}
			for _, c := range pod.Status.Conditions {
				if c.Type == want && c.Status == corev1.ConditionTrue {
					pt.set(pt.ready, pod.Name, now)
				}
			}
		}
	}()
}

// listen records when the first datagram reaches the Pod.
func (pt *podTimes) listen(e *env, p *harness.Pod) {
	var conn *net.UDPConn
	p.NS.MustDo(func() (err error) {
		conn, err = net.ListenUDP("udp4", &net.UDPAddr{Port: probePort})
		return err
	})
	e.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 64)
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Minute))
		if _, _, err := conn.ReadFromUDP(buf); err == nil {
			pt.set(pt.packet, p.Spec.Name, time.Now())
		}
	}()
}

// prober sends a datagram every 5 ms to every Pod that has a target and has not
// received one yet, from a socket in the given namespace.
func (pt *podTimes) prober(ctx context.Context, e *env, from *netns.NS, pods func() []string) {
	var conn *net.UDPConn
	from.MustDo(func() (err error) { conn, err = net.ListenUDP("udp4", &net.UDPAddr{}); return err })
	e.Cleanup(func() { conn.Close() })
	go func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for _, name := range pods() {
				pt.mu.Lock()
				addr, ok := pt.target[name]
				_, done := pt.packet[name]
				pt.mu.Unlock()
				if ok && !done {
					_, _ = conn.WriteToUDP([]byte(name), &net.UDPAddr{IP: addr.AsSlice(), Port: probePort})
				}
			}
		}
	}()
}

// latencies returns, for the named Pods, the time from creation to what m recorded.
func (pt *podTimes) latencies(m map[string]time.Time, names []string) []time.Duration {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	out := make([]time.Duration, 0, len(names))
	for _, n := range names {
		if at, ok := m[n]; ok {
			out = append(out, at.Sub(pt.created[n]))
		}
	}
	return out
}

func (pt *podTimes) complete(names []string) bool {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	for _, n := range names {
		_, r := pt.ready[n]
		_, p := pt.packet[n]
		if !r || !p {
			return false
		}
	}
	return true
}

// usageOf reads the usage of the child process with these arguments.
func usageOf(e *env, args ...string) (int, procUsage) {
	pid, err := childProcess(args...)
	if err != nil {
		e.Fatal(err)
	}
	u, err := readUsage(pid)
	if err != nil {
		e.Fatal(err)
	}
	return pid, u
}

// benchAttach (row 2): Pods asking for an automatic ElasticIP are created at a steady
// rate on the end-to-end harness, interleaved with plain Pods; for each, the time from
// creation to juneau's readiness gate True and to the first datagram from the external
// client, against the plain Pods' time to Ready and to the first datagram from their
// Node.
func benchAttach(ctx context.Context, e *env) []Row {
	require.Root(e)
	n, interval := 40, 250*time.Millisecond
	if e.cfg.quick {
		n = 8
	}
	cp := startControlPlane(ctx, e)
	c := harness.New(e, cp, harness.Options{Nodes: attachNodes})
	const ns, network = "attach", "attach-net"
	ensureNamespace(e, cp, ns)
	createNetwork(e, cp, network, "10.225.51.5-10.225.51.99")
	// The client stands for the upstream router; it retries address resolution every
	// 10 ms instead of every second, so the figure is juneau's, not the retry timer's.
	c.Client.Sysctl("net/ipv4/neigh/eth0/retrans_time_ms", "10")

	procs := watchProcesses(e)
	prof := e.startProfile(procs.controller, "attach-controller")
	pt := newPodTimes()
	pt.watchPods(ctx, e, cp, ns)
	eipPods, plainPods := pt.run(ctx, e, c, ns, network, n, interval)
	e.stopProfile(prof)
	ctrl, agentRSS, agentStartRSS, agentCPU := procs.end(e)

	eipReady, plainReady := pt.latencies(pt.ready, eipPods), pt.latencies(pt.ready, plainPods)
	eipPacket, plainPacket := pt.latencies(pt.packet, eipPods), pt.latencies(pt.packet, plainPods)
	p50 := func(d []time.Duration) time.Duration { return percentile(d, 50).Round(time.Millisecond) }
	e.plots.cdf("attach-ready", "2a. Pod created → Ready", dist{"pod-with-eip → readiness gate True", eipReady}, dist{"plain Pod → Ready", plainReady})
	e.plots.cdf("attach-packet", "2b. Pod created → first packet", dist{"from outside, through the ElasticIP", eipPacket}, dist{"plain Pod, from its Node", plainPacket})
	return []Row{
		{ID: "2a", What: "Pod created → readiness gate True, p99", Figure: duration(percentile(eipReady, 99)),
			Baseline: duration(percentile(plainReady, 99)), BaselineWhat: "plain Pod → Ready",
			Note: fmt.Sprintf("%d Pods with pod-with-eip and %d plain Pods, interleaved, one every %s over 2 Nodes (CNI ADD through ptp + host-local + juneau included); p50 %s (plain %s)",
				n, n, interval, p50(eipReady), p50(plainReady))},
		{ID: "2b", What: "Pod created → first packet from outside, p99", Figure: duration(percentile(eipPacket, 99)),
			Baseline: duration(percentile(plainPacket, 99)), BaselineWhat: "plain Pod, from its Node",
			Note: fmt.Sprintf("a datagram every 5 ms from the external client to the ElasticIP once its address is published; p50 %s (plain %s)", p50(eipPacket), p50(plainPacket))},
		{ID: "2c", What: "controller RSS at the end", Figure: bytesQ(float64(ctrl.RSS)), Baseline: bytesQ(float64(procs.controllerStart.RSS)),
			BaselineWhat: "at the start", Note: fmt.Sprintf("controller CPU during the run %s", (ctrl.CPU - procs.controllerStart.CPU).Round(10*time.Millisecond))},
		{ID: "2d", What: "node agent RSS at the end (larger of 2)", Figure: bytesQ(float64(agentRSS)), Baseline: bytesQ(float64(agentStartRSS)),
			BaselineWhat: "at the start", Note: fmt.Sprintf("agents' CPU during the run %s in all", agentCPU.Round(10*time.Millisecond))},
	}
}

var attachNodes = []string{"node-a", "node-b"}

// run creates 2n Pods, one every interval, alternately with an automatic ElasticIP
// (probed from the external client) and plain (probed from their Node), and waits until
// every one is ready and reached. It returns the names of both kinds.
func (pt *podTimes) run(ctx context.Context, e *env, c *harness.Cluster, ns, network string, n int, interval time.Duration) (eipPods, plainPods []string) {
	var mu sync.Mutex
	plainOn := map[string]*[]string{}
	snapshot := func(list *[]string) func() []string {
		return func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), *list...) }
	}
	probeCtx, stopProbes := context.WithCancel(ctx)
	defer stopProbes()
	pt.prober(probeCtx, e, c.Client, snapshot(&eipPods))
	for _, name := range attachNodes {
		plainOn[name] = &[]string{}
		pt.prober(probeCtx, e, c.Nodes[name].NS, snapshot(plainOn[name]))
	}
	var wg sync.WaitGroup
	tick := time.NewTicker(interval)
	for i := range 2 * n {
		<-tick.C
		withEIP := i%2 == 0
		spec := harness.PodSpec{Namespace: ns, Node: attachNodes[(i/2)%2], Name: fmt.Sprintf("plain-%d", i/2)}
		if withEIP {
			spec.Name = fmt.Sprintf("eip-%d", i/2)
			spec.Annotations = map[string]string{v1alpha1.AnnotationPodWithEIP: "true", v1alpha1.AnnotationEIPExternalNetwork: network}
			spec.ReadinessGates = []string{v1alpha1.PodConditionElasticIP}
		}
		mu.Lock()
		if withEIP {
			eipPods = append(eipPods, spec.Name)
		} else {
			plainPods = append(plainPods, spec.Name)
			*plainOn[spec.Node] = append(*plainOn[spec.Node], spec.Name)
		}
		mu.Unlock()
		wg.Go(func() { pt.startPod(e, c, spec, withEIP) })
	}
	tick.Stop()
	wg.Wait()
	all := append(snapshot(&eipPods)(), snapshot(&plainPods)()...)
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		pt.mu.Lock()
		failed := len(pt.errs) > 0
		pt.mu.Unlock()
		return failed || pt.complete(all), nil
	})
	pt.mu.Lock()
	errs := pt.errs
	pt.mu.Unlock()
	if len(errs) > 0 {
		e.Fatalf("%d Pods failed to start, first: %v", len(errs), errs[0])
	}
	if err != nil {
		e.Fatalf("not every Pod became ready and reachable: %v", err)
	}
	return snapshot(&eipPods)(), snapshot(&plainPods)()
}

// clusterProcesses are the controller and agents of the harness, with their usage when
// the benchmark began.
type clusterProcesses struct {
	controller      int
	controllerStart procUsage
	agents          map[string]int
	agentStart      map[string]procUsage
}

func watchProcesses(e *env) clusterProcesses {
	p := clusterProcesses{agents: map[string]int{}, agentStart: map[string]procUsage{}}
	p.controller, p.controllerStart = usageOf(e, "controller")
	for _, name := range attachNodes {
		p.agents[name], p.agentStart[name] = usageOf(e, "node", "--node-name="+name)
	}
	return p
}

// end reads the usage now: the controller's, the larger agent RSS now and at the start,
// and the CPU time all agents used meanwhile.
func (p clusterProcesses) end(e *env) (ctrl procUsage, agentRSS, agentStartRSS int64, agentCPU time.Duration) {
	ctrl, err := readUsage(p.controller)
	if err != nil {
		e.Fatal(err)
	}
	for name, pid := range p.agents {
		u, err := readUsage(pid)
		if err != nil {
			e.Fatal(err)
		}
		agentCPU += u.CPU - p.agentStart[name].CPU
		agentRSS, agentStartRSS = max(agentRSS, u.RSS), max(agentStartRSS, p.agentStart[name].RSS)
	}
	return ctrl, agentRSS, agentStartRSS, agentCPU
}

// startPod creates a Pod and starts its network as the kubelet would, then listens for
// its first datagram; the Pod IP is the target of plain Pods. A failure is recorded,
// never fatal: this runs on its own goroutine.
func (pt *podTimes) startPod(e *env, c *harness.Cluster, spec harness.PodSpec, withEIP bool) {
	defer func() {
		if p := recover(); p != nil {
			pt.fail(fmt.Errorf("Pod %s: %v", spec.Name, p))
		}
	}()
	pt.set(pt.created, spec.Name, time.Now())
	p := c.CreatePod(spec)
	if err := p.Start(); err != nil {
		pt.fail(fmt.Errorf("Pod %s: %w", spec.Name, err))
		return
	}
	pt.listen(e, p)
	if !withEIP {
		a, err := netip.ParseAddr(p.IP)
		if err != nil {
			pt.fail(err)
			return
		}
		pt.mu.Lock()
		pt.target[spec.Name] = a
		pt.mu.Unlock()
	}
}
