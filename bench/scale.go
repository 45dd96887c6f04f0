package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/framework"
)

// scalePool is the scale benchmark's address pool: 262,144 addresses, room for the
// largest size. It exists only as an API object of the benchmark's own control plane.
const scalePool = "10.128.0.0/14"

// scaleStep is what was measured once the cluster held n Pods with automatic ElasticIPs.
type scaleStep struct {
	n      int
	batch  podBatch
	ctrl   procUsage     // the controller once idle after the batch
	cpuPer time.Duration // controller CPU per allocation in the batch
	// apiCPU, etcdCPU and webhookCPU are the other processes' CPU per allocation.
	apiCPU, etcdCPU, webhookCPU time.Duration
	reqs                        string    // API requests per allocation in the batch
	api                         procUsage // kube-apiserver once the controller was idle
	etcd                        procUsage
	webhook                     string // the API server's admission webhook latency in the batch
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
// webhook's latency, the API server's and etcd's memory, and a controller restart.
func benchScale(ctx context.Context, e *env) []Row {
	nodes, sizes := e.cfg.scaleNodes, e.cfg.scaleSizes
	if e.cfg.quick {
		nodes, sizes = min(nodes, 50), []int{500, 1500}
	}
	cp := startControlPlane(ctx, e)
	kwok := startKwok(e, cp)
	createKwokNodes(ctx, e, cp, kwok, nodes)
	webhook, _ := cp.StartWebhook(e, cp.Kubeconfig)
	const ns, network = "scale", "scale"
	ensureNamespace(e, cp, ns)
	createNetwork(e, cp, network, scalePool)
	ctrl := startController(e, cp)
	emptyAPI, emptyEtcd := pidUsage(e, cp.APIServerPID()), pidUsage(e, cp.EtcdPID())
	e.Logf("with %d Nodes and no Pods: kube-apiserver RSS %s, etcd RSS %s", nodes, bytesQ(float64(emptyAPI.RSS)), bytesQ(float64(emptyEtcd.RSS)))
	kube := fastKube(e, cp)

	var steps []scaleStep
	have := 0
	for _, n := range sizes {
		s := scaleStep{n: n}
		before, hBefore := requestCounts(e, cp), admissionHistogram(e, cp)
		u0 := ctrl.usage(e)
		api0, etcd0, wh0 := pidUsage(e, cp.APIServerPID()), pidUsage(e, cp.EtcdPID()), pidUsage(e, webhook.PID())
		prof := e.startProfile(ctrl.pid, "scale-controller-"+shortSize(n))
		s.batch = createAutoPods(ctx, e, kube, ns, network, have, n, nodes)
		s.ctrl = waitIdle(e, ctrl.pid, "controller", 15*time.Minute)
		e.stopProfile(prof)
		s.cpuPer = (s.ctrl.CPU - u0.CPU) / time.Duration(n-have)
		s.reqs = requestsPer(before, requestCounts(e, cp), n-have)
		s.webhook = admissionHistogram(e, cp).since(hBefore).summary()
		s.api, s.etcd = pidUsage(e, cp.APIServerPID()), pidUsage(e, cp.EtcdPID())
		per := func(a, b procUsage) time.Duration { return (b.CPU - a.CPU) / time.Duration(n-have) }
		s.apiCPU, s.etcdCPU, s.webhookCPU = per(api0, s.api), per(etcd0, s.etcd), per(wh0, pidUsage(e, webhook.PID()))
		have = n

		ctrl, s.synced, s.rewrites, s.nWrites = restartIdle(e, cp, ctrl)
		ctrl, s.resume = restartAllocating(ctx, e, cp, kube, ctrl, ns, network, n, nodes)
		have++ // the probe Pod of the restart
		e.Logf("N=%d: %.0f/s, p99 %s, controller RSS %s, restart synced in %s, %v writes, first allocation %s",
			n, s.batch.rate(), percentile(s.batch.latencies, 99), bytesQ(float64(s.ctrl.RSS)), s.synced, s.nWrites, s.resume)
		steps = append(steps, s)
	}
	scalePlots(e, steps)
	return scaleRows(steps, nodes, emptyAPI, emptyEtcd)
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

// autoPod is the i-th Pod: an automatic ElasticIP of network, bound to one of the
// nodes kwok Nodes in turn; batch labels the Pods created together.
func autoPod(i, nodes int, network, batch string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: scalePodName(i), Labels: map[string]string{"batch": batch},
			Annotations: map[string]string{v1alpha1.AnnotationPodWithEIP: "true", v1alpha1.AnnotationEIPExternalNetwork: network}},
		Spec: corev1.PodSpec{NodeName: kwokNodeName(i % nodes),
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
}

// watchAllocated watches the Pods of ns labelled batch until want were seen with the
// address of their automatic ElasticIP written back.
func watchAllocated(ctx context.Context, e *env, kube kubernetes.Interface, ns, batch string, want int) *firstSeen {
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
		return ok && p.Annotations[v1alpha1.AnnotationAllocatedEIPAddr] != ""
	}, want)
}

// createAutoPods creates the Pods from..to-1 with as many creators as the controller
// has workers, and waits until each was seen with its address.
func createAutoPods(ctx context.Context, e *env, kube kubernetes.Interface, ns, network string, from, to, nodes int) podBatch {
	n := to - from
	batch := strconv.Itoa(to)
	watcher := watchAllocated(ctx, e, kube, ns, batch, n)
	starts := make([]time.Time, n)
	creates := make([]time.Duration, n)
	idx := make(chan int, n)
	for i := range n {
		idx <- i
	}
	close(idx)
	b := podBatch{creates: creates, creators: 2 * e.cfg.workers}
	var creators sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	begin := time.Now()
	for range b.creators {
		creators.Go(func() {
			for i := range idx {
				starts[i] = time.Now()
				_, err := kube.CoreV1().Pods(ns).Create(ctx, autoPod(from+i, nodes, network, batch), metav1.CreateOptions{})
				creates[i] = time.Since(starts[i])
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
			}
		})
	}
	creators.Wait()
	if firstErr != nil {
		e.Fatalf("creating Pods %d..%d: %v", from, to-1, firstErr)
	}
	bound := max(2*time.Minute, time.Duration(n)*20*time.Millisecond)
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
		e.Fatalf("only %d of %d Pods got their address within %s", b.n, n, bound)
	}
	b.elapsed = last.Sub(begin)
	return b
}

// restartIdle stops the controller and starts it again with nothing to do: how long
// until it serves /readyz (caches synced), and the writes it makes until it is idle
// (want none: every object is already correct). kwok's Lease renewals are left out.
func restartIdle(e *env, cp *framework.ControlPlane, ctrl *controllerProcess) (*controllerProcess, time.Duration, string, float64) {
	ctrl.Stop()
	before := requestCounts(e, cp)
	start := time.Now()
	ctrl = startController(e, cp)
	synced := time.Since(start)
	waitIdle(e, ctrl.pid, "restarted controller", 15*time.Minute)
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
func restartAllocating(ctx context.Context, e *env, cp *framework.ControlPlane, kube kubernetes.Interface, ctrl *controllerProcess, ns, network string, i, nodes int) (*controllerProcess, time.Duration) {
	ctrl.Stop()
	batch := "probe-" + strconv.Itoa(i)
	watcher := watchAllocated(ctx, e, kube, ns, batch, 1)
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, autoPod(i, nodes, network, batch), metav1.CreateOptions{}); err != nil {
		e.Fatal(err)
	}
	start := time.Now()
	ctrl = startController(e, cp)
	seen := watcher.wait(start.Add(10 * time.Minute))
	at, ok := seen[scalePodName(i)]
	if !ok {
		e.Fatalf("the Pod created while the controller was down got no address within 10 minutes of its restart")
	}
	return ctrl, at.Sub(start)
}
