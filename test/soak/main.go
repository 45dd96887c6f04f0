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
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	juneauinformers "github.com/loutres/juneau/pkg/generated/informers/externalversions"
	listers "github.com/loutres/juneau/pkg/generated/listers/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/node/nft"
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

// poolAddr matches an address of the pool in `nft list table` output.
var poolAddr = regexp.MustCompile(`\b10\.226\.\d+\.\d+\b`)

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

// row is one line of the table: the system after a phase.
type row struct {
	phase                                string
	created, attached, detached, deleted int
	live                                 int
	took                                 time.Duration
	rss                                  map[string]float64 // by component
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

func eipName(i int) string { return fmt.Sprintf("eip-%05d", i) }

func attName(pod string) string { return pod + "-att" }

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

// create creates n new ElasticIPs and waits until each is Available.
func (s *soak) create(ctx context.Context, n int) {
	first := s.next
	err := s.parallel(ctx, n, func(ctx context.Context, i int) error {
		_, err := s.cp.Juneau.JuneauV1alpha1().ElasticIPs(s.ns).Create(ctx, &v1alpha1.ElasticIP{
			ObjectMeta: metav1.ObjectMeta{Name: eipName(first + i)},
			Spec:       v1alpha1.ElasticIPSpec{ExternalNetwork: network},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) { // a retry after a create that timed out but went through
			return nil
		}
		return err
	})
	if err != nil {
		s.r.Fatalf("creating ElasticIPs: %v", err)
	}
	for i := range n {
		s.live = append(s.live, first+i)
	}
	s.next += n
	s.created += n
	s.waitFor(ctx, fmt.Sprintf("%d new ElasticIPs Available", n), func() (bool, string) {
		ok := 0
		for i := first; i < first+n; i++ {
			e, err := s.eips.ElasticIPs(s.ns).Get(eipName(i))
			if err == nil && e.Status.Phase == v1alpha1.ElasticIPAvailable {
				ok++
			}
		}
		return ok == n, fmt.Sprintf("%d of %d", ok, n)
	})
}

// attachNewest attaches the newest ElasticIPs, one to each Pod's eth0, and waits until
// each is Attached and its Node answers for it.
func (s *soak) attachNewest(ctx context.Context) {
	newest := s.live[len(s.live)-len(s.pods):]
	err := s.parallel(ctx, len(s.pods), func(ctx context.Context, i int) error {
		_, err := s.cp.Juneau.JuneauV1alpha1().ElasticIPAttachments(s.ns).Create(ctx, &v1alpha1.ElasticIPAttachment{
			ObjectMeta: metav1.ObjectMeta{Name: attName(s.pods[i])},
			Spec: v1alpha1.ElasticIPAttachmentSpec{ElasticIPRef: v1alpha1.ElasticIPReference{Name: eipName(newest[i])},
				TargetRef: v1alpha1.AttachmentTarget{NetworkInterfaceName: v1alpha1.NetworkInterfaceName(s.pods[i], v1alpha1.DefaultInterface)}},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) { // a retry after a create that timed out but went through
			return nil
		}
		return err
	})
	if err != nil {
		s.r.Fatalf("attaching: %v", err)
	}
	s.attached += len(s.pods)
	s.waitFor(ctx, fmt.Sprintf("%d ElasticIPs Attached and answered", len(newest)), func() (bool, string) {
		ok := 0
		for _, i := range newest {
			e, err := s.eips.ElasticIPs(s.ns).Get(eipName(i))
			if err != nil || e.Status.Phase != v1alpha1.ElasticIPAttached {
				continue
			}
			ad, err := s.ads.Get(advertisement.PreferredName(s.ns, eipName(i)))
			if err != nil {
				continue
			}
			if c := meta.FindStatusCondition(ad.Status.Conditions, v1alpha1.ConditionAnswering); c != nil && c.Status == metav1.ConditionTrue {
				ok++
			}
		}
		return ok == len(newest), fmt.Sprintf("%d of %d", ok, len(newest))
	})
}

// detachAll deletes every attachment and waits until they are gone and no ElasticIP is
// Attached or advertised any more.
func (s *soak) detachAll(ctx context.Context) {
	err := s.parallel(ctx, len(s.pods), func(ctx context.Context, i int) error {
		err := s.cp.Juneau.JuneauV1alpha1().ElasticIPAttachments(s.ns).Delete(ctx, attName(s.pods[i]), metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		s.r.Fatalf("detaching: %v", err)
	}
	s.detached += len(s.pods)
	s.waitFor(ctx, "every attachment gone, no ElasticIP Attached or advertised", func() (bool, string) {
		atts, _ := s.atts.ElasticIPAttachments(s.ns).List(labels.Everything())
		ads, _ := s.ads.List(labels.Everything())
		eips, _ := s.eips.ElasticIPs(s.ns).List(labels.Everything())
		attached := 0
		for _, e := range eips {
			if e.Status.Phase == v1alpha1.ElasticIPAttached {
				attached++
			}
		}
		return len(atts) == 0 && len(ads) == 0 && attached == 0,
			fmt.Sprintf("%d attachments, %d advertisements, %d Attached", len(atts), len(ads), attached)
	})
}

// deleteOldest deletes the n oldest ElasticIPs and waits until they are gone.
func (s *soak) deleteOldest(ctx context.Context, n int) {
	gone := s.live[:n]
	err := s.parallel(ctx, n, func(ctx context.Context, i int) error {
		err := s.cp.Juneau.JuneauV1alpha1().ElasticIPs(s.ns).Delete(ctx, eipName(gone[i]), metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		s.r.Fatalf("deleting ElasticIPs: %v", err)
	}
	s.live = append([]int(nil), s.live[n:]...)
	s.deleted += n
	s.waitFor(ctx, fmt.Sprintf("%d ElasticIPs gone", n), func() (bool, string) {
		left := 0
		for _, i := range gone {
			if _, err := s.eips.ElasticIPs(s.ns).Get(eipName(i)); err == nil {
				left++
			}
		}
		return left == 0, fmt.Sprintf("%d left", left)
	})
}

// deletePods deletes the Pods (gone at once: no kubelet) and waits for their
// interfaces to go.
func (s *soak) deletePods(ctx context.Context) {
	err := s.parallel(ctx, len(s.pods), func(ctx context.Context, i int) error {
		err := s.cp.Kube.CoreV1().Pods(s.ns).Delete(ctx, s.pods[i], metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		s.r.Fatalf("deleting Pods: %v", err)
	}
	s.waitFor(ctx, "every NetworkInterface gone", func() (bool, string) {
		nics, _ := s.nics.NetworkInterfaces(s.ns).List(labels.Everything())
		return len(nics) == 0, fmt.Sprintf("%d left", len(nics))
	})
}

// checkLive asserts that the live ElasticIPs hold distinct addresses, each with exactly
// one claim naming it, and that no other claim exists.
func (s *soak) checkLive() {
	eips, _ := s.eips.ElasticIPs(s.ns).List(labels.Everything())
	claims, _ := s.claims.List(labels.Everything())
	if len(eips) != len(s.live) {
		s.r.Errorf("%d ElasticIPs exist, want %d", len(eips), len(s.live))
	}
	byAddr := map[string]*v1alpha1.AllocationClaim{}
	for _, c := range claims {
		byAddr[c.Name] = c
	}
	seen := map[string]string{}
	for _, e := range eips {
		if other, dup := seen[e.Status.Address]; dup {
			s.r.Errorf("address %q given to both %s and %s", e.Status.Address, other, e.Name)
		}
		seen[e.Status.Address] = e.Name
		if c, ok := byAddr[e.Status.Address]; !ok || c.Spec.Consumer.UID != string(e.UID) {
			s.r.Errorf("ElasticIP %s (%s) has no claim of its own", e.Name, e.Status.Address)
		}
	}
	if len(claims) != len(eips) {
		s.r.Errorf("%d claims for %d ElasticIPs", len(claims), len(eips))
	}
}

// leak is one thing that must be gone after the teardown, and how many are left.
type leak struct {
	what string
	left int
}

// checkNothingLeft asserts that the teardown left nothing, in the API and on the Nodes.
func (s *soak) checkNothingLeft(ctx context.Context) []leak {
	var leaks []leak
	count := func(what string, f func() int) {
		n := f()
		leaks = append(leaks, leak{what, n})
		if n != 0 {
			s.r.Errorf("after the teardown: %d %s left", n, what)
		}
	}
	j := s.cp.Juneau.JuneauV1alpha1()
	count("AllocationClaims", func() int {
		l, err := j.AllocationClaims().List(ctx, metav1.ListOptions{})
		if err != nil {
			s.r.Fatal(err)
		}
		return len(l.Items)
	})
	count("ARPAdvertisements", func() int {
		l, err := j.ARPAdvertisements().List(ctx, metav1.ListOptions{})
		if err != nil {
			s.r.Fatal(err)
		}
		return len(l.Items)
	})
	count("NetworkInterfaces", func() int {
		l, err := j.NetworkInterfaces(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			s.r.Fatal(err)
		}
		return len(l.Items)
	})
	for _, name := range []string{"node-a", "node-b"} {
		n := s.c.Nodes[name]
		count("pool addresses in the nftables table of "+name, func() int {
			var table string
			s.waitFor(ctx, "the table of "+name, func() (bool, string) {
				out, err := n.NS.Output("nft", "list", "table", "ip", nft.TableName)
				table = out
				return err == nil, out
			})
			return len(poolAddr.FindAllString(table, -1))
		})
		count("mappings the agent of "+name+" counts", func() int {
			text, err := n.Metrics(ctx)
			if err != nil {
				s.r.Fatal(err)
			}
			v, ok := harness.MetricValue(text, "juneau_node_nat_mappings")
			if !ok {
				s.r.Fatalf("the agent of %s exposes no juneau_node_nat_mappings", name)
			}
			return int(v)
		})
	}
	return leaks
}

// sample waits until the controller and the agents are idle, then records their RSS.
func (s *soak) sample(ctx context.Context, phase string, took time.Duration) {
	comps := map[string]func(context.Context) (string, error){"controller": s.c.ControllerMetrics}
	for _, name := range []string{"node-a", "node-b"} {
		comps["agent "+name] = s.c.Nodes[name].Metrics
	}
	read := func(series string) map[string]float64 {
		out := map[string]float64{}
		for comp, metrics := range comps {
			text, err := metrics(ctx)
			if err != nil {
				s.r.Fatalf("metrics of %s: %v", comp, err)
			}
			v, ok := harness.MetricValue(text, series)
			if !ok {
				s.r.Fatalf("%s exposes no %s", comp, series)
			}
			out[comp] = v
		}
		return out
	}
	// Idle: less than 5% of a CPU each over two seconds.
	last := read("process_cpu_seconds_total")
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, time.Minute, false, func(context.Context) (bool, error) {
		now := read("process_cpu_seconds_total")
		idle := true
		for comp, v := range now {
			if v-last[comp] > 0.1 {
				idle = false
			}
		}
		last = now
		return idle, nil
	})
	if err != nil {
		s.r.Logf("%s: the components did not go idle within a minute; reading their memory anyway", phase)
	}
	s.rows = append(s.rows, row{phase: phase, created: s.created, attached: s.attached, detached: s.detached, deleted: s.deleted,
		live: len(s.live), took: took, rss: read("process_resident_memory_bytes")})
	rw := s.rows[len(s.rows)-1]
	s.r.Logf("%s in %s: %d created, %d attached, %d detached, %d deleted, %d live; RSS controller %s, agents %s and %s",
		phase, took.Round(time.Second), rw.created, rw.attached, rw.detached, rw.deleted, rw.live,
		mib(rw.rss["controller"]), mib(rw.rss["agent node-a"]), mib(rw.rss["agent node-b"]))
}

func (s *soak) printTable(w io.Writer, growth []string, leaks []leak) {
	cfg := s.cfg
	fmt.Fprintf(w, "\njuneau soak: %d ElasticIPs created in all, %d alive after warm-up and each round, %d churned per round, %d attached and detached per phase, on 2 Nodes; %s in all\n\n",
		s.created, cfg.population, cfg.churn, cfg.attach, time.Since(s.started).Round(time.Second))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tcreated\tattached\tdetached\tdeleted\tlive\ttook\tcontroller RSS\tagent node-a RSS\tagent node-b RSS\t")
	for _, rw := range s.rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t\n", rw.phase, rw.created, rw.attached, rw.detached, rw.deleted, rw.live,
			rw.took.Round(time.Second), mib(rw.rss["controller"]), mib(rw.rss["agent node-a"]), mib(rw.rss["agent node-b"]))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nRSS after the last round against warm-up (limit %+.0f%%): %s\n", 100*cfg.maxGrowth, strings.Join(growth, ", "))
	fmt.Fprintf(w, "requests retried after a transient error (timeout, internal error, throttling): %d\n\nleft after the teardown:\n", s.retried.Load())
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, l := range leaks {
		fmt.Fprintf(tw, "  %s\t%d\n", l.what, l.left)
	}
	tw.Flush()
}

func mib(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

// transient tells the errors a client retries: the API server or the webhook timing
// out or failing internally on a loaded machine, throttling. Anything else (a refusal)
// is an error of the soak.
func transient(err error) bool {
	return apierrors.IsInternalError(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) || errors.Is(err, context.DeadlineExceeded) ||
		strings.Contains(err.Error(), "context deadline exceeded")
}

// parallel runs fn for 0..n-1 on the configured number of workers and returns the first
// error. Transient errors are retried with a back-off, and counted.
func (s *soak) parallel(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	work := make(chan int, n)
	for i := range n {
		work <- i
	}
	close(work)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range s.cfg.workers {
		wg.Go(func() {
			for i := range work {
				backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 6, Cap: 10 * time.Second}
				err := retry.OnError(backoff, func(err error) bool {
					if transient(err) && ctx.Err() == nil {
						s.retried.Add(1)
						return true
					}
					return false
				}, func() error { return fn(ctx, i) })
				if err != nil {
					mu.Lock()
					first = errors.Join(first, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// waitFor polls cond (which reads the local caches, or the Nodes) until it holds, for
// at most settleTimeout.
func (s *soak) waitFor(ctx context.Context, what string, cond func() (bool, string)) {
	var state string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, settleTimeout, true, func(context.Context) (bool, error) {
		var ok bool
		ok, state = cond()
		return ok, nil
	})
	if err != nil {
		s.r.Fatalf("waiting for %s: %v (%s)", what, err, state)
	}
}
