package main

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/status"
	"github.com/loutres/juneau/test/framework"
)

// scalePool is the scale benchmark's address pool: 262,144 addresses, room for the
// largest size. It exists only as an API object of the benchmark's own control plane.
const scalePool = "10.128.0.0/14"

// scaleStep is what was measured once the cluster held n Pods with automatic ElasticIPs.
type scaleStep struct {
	n      int
	batch  podBatch
	floor  podBatch      // the same batch by the API-write floor
	ctrl   procUsage     // the controller once idle after the batch
	cpuPer time.Duration // controller CPU per allocation in the batch
	// apiCPU, etcdCPU, webhookCPU and kwokCPU are the other processes' CPU per allocation.
	apiCPU, etcdCPU, webhookCPU, kwokCPU time.Duration
	reqs                                 string    // API requests per allocation in the batch
	api                                  procUsage // kube-apiserver once the controller was idle
	webhookUse                           procUsage // the webhook then
	etcd                                 procUsage
	// plainAPI and plainEtcd are the API server and etcd with the same Pods and no juneau.
	plainAPI, plainEtcd procUsage
	webhook             string // the API server's admission webhook latency in the batch
	// synced is how long a restarted controller took to serve /readyz (caches synced);
	// rewrites the writes it made, idle, for objects already correct.
	synced   time.Duration
	rewrites string
	nWrites  float64
	// resume is restart → the first new Pod allocated (created while it was down).
	resume time.Duration
}

// benchScale (row 8, make scale; not part of make bench): the real control plane with
// kwok's simulated Nodes, the real webhook and controller, and Pods with automatic
// ElasticIPs created in batches up to each size; at each size the allocation rate and
// latency, the controller's memory and CPU, the API requests per allocation, the
// webhook's latency, the API server's and etcd's memory, and a controller restart. The
// same Pods without juneau run first, then the API-write floor, the same batches with
// the controller's writes made directly (podFloor), each on a cluster of its own that is
// gone before the next starts.
func benchScale(ctx context.Context, e *env) []Row {
	nodes, sizes := e.cfg.scaleNodes, e.cfg.scaleSizes
	if e.cfg.quick {
		nodes, sizes = min(nodes, 50), []int{500, 1500}
	}
	plainAPI, plainEtcd := plainSeries(ctx, e, nodes, sizes)
	floor := floorSeries(ctx, e, nodes, sizes)

	c := startScaleCluster(ctx, e, nodes)
	c.startAgents(ctx, e, nil)
	ctrl := startController(e, c.cp)
	emptyAPI, emptyEtcd := pidUsage(e, c.cp.APIServerPID()), pidUsage(e, c.cp.EtcdPID())
	e.Logf("with %d Nodes and no Pods: kube-apiserver RSS %s, etcd RSS %s", nodes, bytesQ(float64(emptyAPI.RSS)), bytesQ(float64(emptyEtcd.RSS)))
	var steps []scaleStep
	have := 0
	for i, n := range sizes {
		s := scaleStep{n: n, floor: floor[i], plainAPI: plainAPI[i], plainEtcd: plainEtcd[i]}
		before, hBefore := requestCounts(e, c.cp), admissionHistogram(e, c.cp)
		u0 := ctrl.usage(e)
		api0, etcd0, wh0, kwok0 := pidUsage(e, c.cp.APIServerPID()), pidUsage(e, c.cp.EtcdPID()), pidUsage(e, c.webhook.PID()), pidUsage(e, c.kwok.PID())
		prof := e.startProfile(ctrl.pid, "scale-controller-"+shortSize(n))
		whProf := e.startProfile(c.webhook.PID(), "scale-webhook-"+shortSize(n))
		s.batch = c.createAutoPods(ctx, e, have, n, nil)
		s.ctrl = waitIdle(e, ctrl.pid, "controller", 15*time.Minute)
		e.stopProfile(prof)
		e.stopProfile(whProf)
		e.heapProfile(ctrl.pid, "scale-controller-heap-"+shortSize(n))
		e.heapProfile(c.webhook.PID(), "scale-webhook-heap-"+shortSize(n))
		s.cpuPer = (s.ctrl.CPU - u0.CPU) / time.Duration(n-have)
		s.reqs = requestsPer(before, requestCounts(e, c.cp), n-have)
		s.webhook = admissionHistogram(e, c.cp).since(hBefore).summary()
		s.api, s.etcd = pidUsage(e, c.cp.APIServerPID()), pidUsage(e, c.cp.EtcdPID())
		per := func(a, b procUsage) time.Duration { return (b.CPU - a.CPU) / time.Duration(n-have) }
		s.apiCPU, s.etcdCPU = per(api0, s.api), per(etcd0, s.etcd)
		s.webhookUse = pidUsage(e, c.webhook.PID())
		s.webhookCPU, s.kwokCPU = per(wh0, s.webhookUse), per(kwok0, pidUsage(e, c.kwok.PID()))
		have = n

		ctrl, s.synced, s.rewrites, s.nWrites = restartIdle(e, c.cp, ctrl, "scale-controller-restart-"+shortSize(n))
		ctrl, s.resume = c.restartAllocating(ctx, e, ctrl, n)
		have++ // the probe Pod of the restart
		e.Logf("N=%d: %s; %s", n, c.agents, c.attached(ctx, e))
		e.Logf("N=%d: %.0f/s (floor %.0f/s), p99 %s, controller RSS %s, restart synced in %s, %v writes, first allocation %s",
			n, s.batch.rate(), s.floor.rate(), percentile(s.batch.latencies, 99), bytesQ(float64(s.ctrl.RSS)), s.synced, s.nWrites, s.resume)
		steps = append(steps, s)
	}
	scalePlots(e, steps)
	return scaleRows(steps, nodes, emptyAPI, emptyEtcd)
}

// scaleCluster is a control plane with kwok's Nodes, the webhook, and the network and
// namespace of the Pods.
type scaleCluster struct {
	cp      *framework.ControlPlane
	kwok    *framework.Component
	webhook *framework.Webhook
	kube    kubernetes.Interface
	nodes   int
	agents  *agentLoad
}

const scaleNS, scaleNetwork = "scale", "scale"

// startScaleCluster starts the cluster; its agents' load starts with startAgents.
func startScaleCluster(ctx context.Context, e *env, nodes int) *scaleCluster {
	c := &scaleCluster{cp: startControlPlane(ctx, e), nodes: nodes}
	c.kwok = startKwok(e, c.cp)
	createKwokNodes(ctx, e, c.cp, c.kwok, nodes)
	c.webhook, _ = c.cp.StartWebhook(e, c.cp.Kubeconfig)
	ensureNamespace(e, c.cp, scaleNS)
	createNetwork(e, c.cp, scaleNetwork, scalePool)
	c.kube = fastKube(c.cp)
	return c
}

// startAgents starts the agents' load of the Nodes (see startAgentLoad).
func (c *scaleCluster) startAgents(ctx context.Context, e *env, answered func(context.Context, *v1alpha1.ARPAdvertisement) error) {
	c.agents = startAgentLoad(ctx, e, c.cp, scaleNS, c.nodes, answered)
}

// attached says how many of the ElasticIPs of the Pods are Attached (their address
// answered on their Pod's Node), once the controller is idle.
func (c *scaleCluster) attached(ctx context.Context, e *env) string {
	list, err := fastClient(c.cp).JuneauV1alpha1().ElasticIPs(scaleNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		e.Fatal(err)
	}
	n := 0
	for _, eip := range list.Items {
		if meta.IsStatusConditionTrue(eip.Status.Conditions, v1alpha1.ConditionAttached) {
			n++
		}
	}
	return fmt.Sprintf("%d of %d ElasticIPs Attached", n, len(list.Items))
}

func (c *scaleCluster) stop() {
	if c.agents != nil {
		c.agents.stop()
	}
	c.webhook.Stop()
	c.kwok.Stop()
	c.cp.Stop()
}

// floorSeries runs the batches of the sizes with podFloor instead of a controller and
// returns each batch; its cluster is stopped when it returns.
func floorSeries(ctx context.Context, e *env, nodes int, sizes []int) []podBatch {
	c := startScaleCluster(ctx, e, nodes)
	defer c.stop()
	f := newPodFloor(c.kube, fastClient(c.cp), scaleNetwork)
	c.startAgents(ctx, e, f.answered)
	var out []podBatch
	have := 0
	for _, n := range sizes {
		b := c.createAutoPods(ctx, e, have, n, f)
		e.Logf("floor N=%d: %.0f/s, p99 %s; %s", n, b.rate(), percentile(b.latencies, 99), c.agents)
		out = append(out, b)
		have = n
	}
	return out
}

// plainSeries creates the same Pods without juneau, in the same batches, on a cluster
// of its own with the same Nodes (and the webhook, which has nothing to review), and
// reads the API server's and etcd's usage after each batch: the baseline of their memory.
func plainSeries(ctx context.Context, e *env, nodes int, sizes []int) (api, etcd []procUsage) {
	c := startScaleCluster(ctx, e, nodes)
	defer c.stop()
	have := 0
	for _, n := range sizes {
		b := c.createPlainPods(ctx, e, have, n)
		api, etcd = append(api, pidUsage(e, c.cp.APIServerPID())), append(etcd, pidUsage(e, c.cp.EtcdPID()))
		e.Logf("without juneau N=%d: %.0f Pods/s running; kube-apiserver RSS %s, etcd RSS %s", n, b.rate(),
			bytesQ(float64(api[len(api)-1].RSS)), bytesQ(float64(etcd[len(etcd)-1].RSS)))
		have = n
	}
	return api, etcd
}

// pidUsage reads the usage of a process the benchmark started.
func pidUsage(e *env, pid int) procUsage {
	u, err := readUsage(pid)
	if err != nil {
		e.Fatal(err)
	}
	return u
}

// podBatch is a batch of Pods with automatic ElasticIPs created at once.
type podBatch struct {
	n         int             // Pods seen with their address
	elapsed   time.Duration   // first create sent → last Pod seen with its address
	latencies []time.Duration // create sent → the Pod seen with its address
	creates   []time.Duration // each create request (the webhook's review included)
	creators  int
}

func (b podBatch) rate() float64 { return float64(b.n) / b.elapsed.Seconds() }

// scalePodName names the i-th Pod of the benchmark.
func scalePodName(i int) string { return "pod-" + strconv.Itoa(i) }

// autoPod is the i-th Pod: an automatic ElasticIP of network and juneau's readiness
// gate, bound to one of the nodes kwok Nodes in turn; batch labels the Pods created
// together.
func autoPod(i, nodes int, network, batch string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: scalePodName(i), Labels: map[string]string{"batch": batch},
			Annotations: map[string]string{v1alpha1.AnnotationPodWithEIP: "true", v1alpha1.AnnotationEIPExternalNetwork: network}},
		Spec: corev1.PodSpec{NodeName: kwokNodeName(i % nodes),
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: v1alpha1.PodConditionElasticIP}},
			Containers:     []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
}

// allocated says the Pod is told it holds its automatic ElasticIP: its condition
// elastic-ip-assigned True, or the address written back on it, whichever comes first
// (the controller writes the address on a gated Pod only once the gate is True,
// docs/automatic.md#what-the-controller-does; the floor writes it before the condition).
func allocated(p *corev1.Pod) bool {
	if p.Annotations[v1alpha1.AnnotationAllocatedEIPAddr] != "" {
		return true
	}
	c := status.PodCondition(p, v1alpha1.PodConditionElasticIPAssigned)
	return c != nil && c.Status == corev1.ConditionTrue
}

// watchPods watches the Pods of ns labelled batch until want were seen done.
func watchPods(ctx context.Context, e *env, kube kubernetes.Interface, ns, batch string, want int, done func(*corev1.Pod) bool) *firstSeen {
	pods := kube.CoreV1().Pods(ns)
	sel := func(o metav1.ListOptions) metav1.ListOptions { o.LabelSelector = "batch=" + batch; return o }
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return pods.List(ctx, sel(o)) },
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return pods.Watch(ctx, sel(o))
		},
	}
	return watchFirstSeen(ctx, e, lw, func(o runtime.Object) bool {
		p, ok := o.(*corev1.Pod)
		return ok && done(p)
	}, want)
}

// createAutoPods creates the Pods from..to-1 with twice as many creators as the
// controller has workers, and waits until each was seen with its address. With a floor,
// as many writers make the controller's writes for each Pod created.
func (c *scaleCluster) createAutoPods(ctx context.Context, e *env, from, to int, floor *podFloor) podBatch {
	return c.createPods(ctx, e, from, to, autoPod, allocated, floor)
}

// createPlainPods creates the Pods from..to-1 without juneau's annotations and gate, as
// createAutoPods does, and waits until each runs.
func (c *scaleCluster) createPlainPods(ctx context.Context, e *env, from, to int) podBatch {
	plain := func(i, nodes int, network, batch string) *corev1.Pod {
		p := autoPod(i, nodes, network, batch)
		p.Annotations, p.Spec.ReadinessGates = nil, nil
		return p
	}
	return c.createPods(ctx, e, from, to, plain, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }, nil)
}

// createPods creates the Pods from..to-1 made by mk and waits until each was seen done.
func (c *scaleCluster) createPods(ctx context.Context, e *env, from, to int,
	mk func(i, nodes int, network, batch string) *corev1.Pod, done func(*corev1.Pod) bool, floor *podFloor) podBatch {
	n := to - from
	batch := strconv.Itoa(to)
	watcher := watchPods(ctx, e, c.kube, scaleNS, batch, n, done)
	starts := make([]time.Time, n)
	creates := make([]time.Duration, n)
	idx := make(chan int, n)
	for i := range n {
		idx <- i
	}
	close(idx)
	b := podBatch{creates: creates, creators: 2 * e.cfg.workers}
	created := make(chan *corev1.Pod, n)
	var creators, writers sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	fail := func(err error) {
		mu.Lock()
		firstErr = cmp.Or(firstErr, err)
		mu.Unlock()
	}
	begin := time.Now()
	for range b.creators {
		creators.Go(func() {
			for i := range idx {
				starts[i] = time.Now()
				pod, err := c.kube.CoreV1().Pods(scaleNS).Create(ctx, mk(from+i, c.nodes, scaleNetwork, batch), metav1.CreateOptions{})
				creates[i] = time.Since(starts[i])
				if err != nil {
					fail(fmt.Errorf("creating Pod %d: %w", from+i, err))
					return
				}
				created <- pod
			}
		})
		if floor != nil {
			writers.Go(func() {
				for pod := range created {
					if err := floor.allocate(ctx, pod); err != nil {
						fail(fmt.Errorf("floor writes for Pod %s: %w", pod.Name, err))
						return
					}
				}
			})
		}
	}
	creators.Wait()
	close(created)
	writers.Wait()
	if firstErr != nil {
		e.Fatal(firstErr)
	}
	// At least 10 allocations a second, or the run stops.
	bound := max(2*time.Minute, time.Duration(n)*100*time.Millisecond)
	seen := watcher.wait(begin.Add(bound))
	b.n = len(seen)
	var last time.Time
	for i := range n {
		at, ok := seen[scalePodName(from+i)]
		if !ok {
			continue
		}
		b.latencies = append(b.latencies, at.Sub(starts[i]))
		if at.After(last) {
			last = at
		}
	}
	if b.n < n {
		e.Fatalf("only %d of %d Pods were done within %s", b.n, n, bound)
	}
	b.elapsed = last.Sub(begin)
	return b
}

// restartIdle stops the controller and starts it again with nothing to do: how long
// until it serves /readyz (caches synced), and the writes it makes until it is idle
// (want none: every object is already correct). kwok's Lease renewals are left out.
// With -cpuprofile the restarted controller's CPU is profiled from its start until idle
// (profile).
func restartIdle(e *env, cp *framework.ControlPlane, ctrl *controllerProcess, profile string) (*controllerProcess, time.Duration, string, float64) {
	ctrl.Stop()
	before := requestCounts(e, cp)
	start := time.Now()
	prof := e.profiledFromStart(profile, func() int {
		ctrl = startController(e, cp)
		return ctrl.pid
	})
	synced := time.Since(start)
	waitIdle(e, ctrl.pid, "restarted controller", 15*time.Minute)
	e.stopProfile(prof)
	after := requestCounts(e, cp)
	var parts []string
	total := 0.0
	for k, v := range after {
		if d := v - before[k]; d > 0 && k.Mutating() && k.Resource != "leases" {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, d))
			total += d
		}
	}
	if len(parts) == 0 {
		return ctrl, synced, "none", 0
	}
	return ctrl, synced, strings.Join(parts, ", "), total
}

// restartAllocating stops the controller, creates one more Pod with an automatic
// ElasticIP and starts the controller again: the time from the start to the Pod seen
// with its address.
func (c *scaleCluster) restartAllocating(ctx context.Context, e *env, ctrl *controllerProcess, i int) (*controllerProcess, time.Duration) {
	ctrl.Stop()
	batch := "probe-" + strconv.Itoa(i)
	watcher := watchPods(ctx, e, c.kube, scaleNS, batch, 1, allocated)
	if _, err := c.kube.CoreV1().Pods(scaleNS).Create(ctx, autoPod(i, c.nodes, scaleNetwork, batch), metav1.CreateOptions{}); err != nil {
		e.Fatal(err)
	}
	start := time.Now()
	ctrl = startController(e, c.cp)
	seen := watcher.wait(start.Add(10 * time.Minute))
	at, ok := seen[scalePodName(i)]
	if !ok {
		e.Fatalf("the Pod created while the controller was down got no address within 10 minutes of its restart")
	}
	return ctrl, at.Sub(start)
}
