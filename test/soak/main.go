// Command soak runs juneau under a long churn of ElasticIPs and checks that nothing
// leaks (`make soak`; docs/performance.md records a run). It is not part of `make test`
// and is bounded in time (-time, 15 minutes by default).
//
// On a control plane of its own (etcd, kube-apiserver) it runs the system as the
// end-to-end tests do (test/e2e/harness): the controller and the webhook as processes,
// two simulated Nodes, each a network namespace with `juneau node` inside. It creates
// -pods Pods (API objects bound to the Nodes, with Pod IPs of the Nodes' ranges: no
// container runs), whose eth0 NetworkInterfaces are the attachment targets, then:
//
//  1. warm-up: -population ElasticIPs are created and -attach of them attached, each
//     attachment Answering on its Node;
//  2. rounds until -total ElasticIPs have been created: every attachment deleted, the
//     -churn oldest ElasticIPs deleted and as many new ones created, -attach of the new
//     ones attached; the live state at the end of each round is the warm-up's;
//  3. teardown: everything deleted.
//
// After every phase, once the controller and the agents are idle, it reads their
// resident memory (process_resident_memory_bytes of their /metrics). It fails when a
// component's RSS after the last round exceeds its RSS after warm-up by more than
// -max-growth, when the live state is inconsistent (an address given twice, an
// ElasticIP without exactly one claim), or when anything is left after the teardown:
// an AllocationClaim, an ARPAdvertisement, a NetworkInterface, an element of juneau's
// nftables table on a Node, or a mapping the agent still counts.
//
// Everything stays on this machine: the pool (10.226.0.0/17) and the Pod IPs exist only
// as API objects and as elements of the Nodes' tables, in namespaces the harness makes;
// no packet is sent to them.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	juneauinformers "github.com/loutres/juneau/pkg/generated/informers/externalversions"
	listers "github.com/loutres/juneau/pkg/generated/listers/juneau/v1alpha1"
	"github.com/loutres/juneau/test/e2e/harness"
	"github.com/loutres/juneau/test/framework"
	"github.com/loutres/juneau/test/runner"
)

type config struct {
	total, population, churn, attach, pods, workers int
	limit                                           time.Duration
	maxGrowth                                       float64
}

const (
	poolRange = "10.226.0.0/17"
	network   = "soak-net"
	// settleTimeout bounds every wait for the system to catch up with a phase.
	settleTimeout = 5 * time.Minute
)

func main() {
	var cfg config
	flag.IntVar(&cfg.total, "total", 10000, "ElasticIPs created in all")
	flag.IntVar(&cfg.population, "population", 2000, "ElasticIPs alive at the end of warm-up and of every round")
	flag.IntVar(&cfg.churn, "churn", 800, "ElasticIPs deleted and created in each round")
	flag.IntVar(&cfg.attach, "attach", 200, "ElasticIPs attached (and detached) in each phase")
	flag.IntVar(&cfg.workers, "workers", 16, "concurrent API writers")
	flag.DurationVar(&cfg.limit, "time", 15*time.Minute, "the most the whole run may take; the churn stops early to keep within it")
	flag.Float64Var(&cfg.maxGrowth, "max-growth", 0.10, "largest allowed RSS growth of a component from warm-up to the last round")
	flag.Parse()
	cfg.pods = cfg.attach
	if cfg.population < cfg.churn || cfg.churn < cfg.attach || cfg.total < cfg.population {
		fmt.Fprintln(os.Stderr, "soak: want -total ≥ -population ≥ -churn ≥ -attach")
		os.Exit(2)
	}
	os.Exit(run(cfg))
}

func run(cfg config) (code int) {
	r, err := runner.New("soak")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.limit)
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		if _, ok := <-sigs; ok {
			fmt.Fprintln(os.Stderr, "\ninterrupted: removing what the soak created")
			r.Teardown()
			framework.RemoveBuiltBinary()
			os.Exit(130)
		}
	}()
	defer func() {
		if p := recover(); p != nil {
			if a, ok := p.(runner.Abort); ok {
				fmt.Fprintln(os.Stderr, "soak: FAILED:", a.Msg)
			} else {
				fmt.Fprintf(os.Stderr, "soak: panic: %v\n%s", p, debug.Stack())
			}
			code = 1
		}
		signal.Stop(sigs)
		close(sigs)
		r.Teardown()
		framework.RemoveBuiltBinary()
	}()
	s := setup(ctx, r, cfg)
	s.soak(ctx)
	if r.Failed() {
		fmt.Fprintln(os.Stderr, "soak: FAILED (see above)")
		return 1
	}
	fmt.Println("soak: PASS")
	return 0
}

// soak is one run.
type soak struct {
	r   *runner.Runner
	cfg config
	cp  *framework.ControlPlane
	c   *harness.Cluster
	ns  string

	eips    listers.ElasticIPLister
	atts    listers.ElasticIPAttachmentLister
	nics    listers.NetworkInterfaceLister
	ads     listers.ARPAdvertisementLister
	claims  listers.AllocationClaimLister
	pods    []string // attachment targets: their eth0 NetworkInterfaces
	live    []int    // ElasticIPs alive, oldest first, by number
	next    int      // number of the next ElasticIP
	started time.Time

	rows []row
	// done counts what the churn did so far.
	created, deleted, attached, detached int
	// retried counts requests retried after a transient error.
	retried atomic.Int64
}

func setup(ctx context.Context, r *runner.Runner, cfg config) *soak {
	began := time.Now()
	cp, err := framework.Start(ctx)
	if err != nil {
		r.Fatalf("starting the control plane: %v", err)
	}
	r.Cleanup(cp.Stop)
	c := harness.New(r, cp, harness.Options{})
	s := &soak{r: r, cfg: cfg, cp: cp, c: c, ns: cp.NewNamespace(r, "soak"), started: began}
	j := cp.Juneau.JuneauV1alpha1()
	if _, err := j.AddressPools().Create(ctx, &v1alpha1.AddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: "soak-pool"},
		Spec:       v1alpha1.AddressPoolSpec{AdvertiseMode: v1alpha1.AdvertiseARP, Addresses: []string{poolRange}},
	}, metav1.CreateOptions{}); err != nil {
		r.Fatal(err)
	}
	if _, err := j.ExternalNetworks().Create(ctx, &v1alpha1.ExternalNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: network},
		Spec:       v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseARP, AddressPools: []string{"soak-pool"}},
	}, metav1.CreateOptions{}); err != nil {
		r.Fatal(err)
	}
	inf := juneauinformers.NewSharedInformerFactory(cp.Juneau, 0)
	v := inf.Juneau().V1alpha1()
	s.eips, s.atts, s.nics = v.ElasticIPs().Lister(), v.ElasticIPAttachments().Lister(), v.NetworkInterfaces().Lister()
	s.ads, s.claims = v.ARPAdvertisements().Lister(), v.AllocationClaims().Lister()
	stop := make(chan struct{})
	r.Cleanup(func() { close(stop) })
	inf.Start(stop)
	for typ, ok := range inf.WaitForCacheSync(stop) {
		if !ok {
			r.Fatalf("caching %v", typ)
		}
	}
	s.createPods(ctx)
	r.Logf("set up in %s: control plane, controller, webhook, 2 Nodes, %d Pods with Ready interfaces", time.Since(began).Round(time.Second), len(s.pods))
	return s
}

// createPods makes the attachment targets: Pods bound to the Nodes in turn, Running
// with a Pod IP of their Node's range, as a kubelet reports them.
func (s *soak) createPods(ctx context.Context) {
	nodes := []*harness.Node{s.c.Nodes["node-a"], s.c.Nodes["node-b"]}
	s.pods = make([]string, s.cfg.pods)
	err := s.parallel(ctx, s.cfg.pods, func(ctx context.Context, i int) error {
		n := nodes[i%len(nodes)]
		prefix := netip.MustParsePrefix(n.PodCIDR)
		ip := prefix.Addr().As4()
		ip[3] = byte(10 + i/len(nodes))
		name := fmt.Sprintf("pod-%04d", i)
		s.pods[i] = name
		pods := s.cp.Kube.CoreV1().Pods(s.ns)
		pod, err := pods.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeName: n.Name, TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) { // a retry after a create that timed out but went through
			pod, err = pods.Get(ctx, name, metav1.GetOptions{})
		}
		if err != nil {
			return err
		}
		addr := netip.AddrFrom4(ip).String()
		now := metav1.Now()
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: addr, PodIPs: []corev1.PodIP{{IP: addr}}, StartTime: &now,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
		_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		s.r.Fatalf("creating Pods: %v", err)
	}
	s.waitFor(ctx, "every Pod's eth0 Ready", func() (bool, string) {
		ready := 0
		for _, p := range s.pods {
			nic, err := s.nics.NetworkInterfaces(s.ns).Get(v1alpha1.NetworkInterfaceName(p, v1alpha1.DefaultInterface))
			if err == nil && nic.Status.Phase == v1alpha1.NetworkInterfaceReady {
				ready++
			}
		}
		return ready == len(s.pods), fmt.Sprintf("%d of %d", ready, len(s.pods))
	})
}

// soak runs the phases and the checks.
func (s *soak) soak(ctx context.Context) {
	phase := time.Now()
	s.create(ctx, s.cfg.population)
	s.attachNewest(ctx)
	s.sample(ctx, "warm-up", time.Since(phase))
	warm := s.rows[0]
	// The teardown deletes as many ElasticIPs as the warm-up created.
	teardown := warm.took + 30*time.Second
	var longest time.Duration
	round := 0
	for s.next+s.cfg.churn <= s.cfg.total {
		// Keep time for the teardown: stop when another round may not fit.
		if round > 0 {
			longest = max(longest, time.Since(phase))
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < longest+teardown {
			s.r.Errorf("out of time after %d rounds: %d of %d ElasticIPs created; raise -time or lower -total", round, s.next, s.cfg.total)
			break
		}
		round++
		phase = time.Now()
		s.detachAll(ctx)
		s.deleteOldest(ctx, s.cfg.churn)
		s.create(ctx, s.cfg.churn)
		s.attachNewest(ctx)
		s.sample(ctx, fmt.Sprintf("round %d", round), time.Since(phase))
	}
	s.checkLive()
	last := s.rows[len(s.rows)-1]
	var growth []string
	for comp, base := range warm.rss {
		g := last.rss[comp]/base - 1
		growth = append(growth, fmt.Sprintf("%s %+.1f%%", comp, 100*g))
		if g > s.cfg.maxGrowth {
			s.r.Errorf("%s: RSS %s after the last round, %s after warm-up: %+.1f%%, more than %+.0f%%", comp, mib(last.rss[comp]), mib(base), 100*g, 100*s.cfg.maxGrowth)
		}
	}
	sort.Strings(growth)

	phase = time.Now()
	s.detachAll(ctx)
	s.deleteOldest(ctx, len(s.live))
	s.deletePods(ctx)
	s.sample(ctx, "teardown", time.Since(phase))
	leaks := s.checkNothingLeft(ctx)

	s.printTable(os.Stdout, growth, leaks)
}
