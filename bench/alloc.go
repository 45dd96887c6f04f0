package main

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	juneauclient "github.com/loutres/juneau/pkg/generated/clientset/versioned"
)

// allocResult is one bulk allocation: ElasticIPs created at once.
type allocResult struct {
	n         int             // ElasticIPs seen Available
	elapsed   time.Duration   // first create sent → last ElasticIP seen Available (or the bound)
	latencies []time.Duration // per ElasticIP seen: create sent → seen Available
	// created is the number of ElasticIPs created; more than n when the bound stopped
	// the run first.
	created int
}

func (r allocResult) rate() float64 { return float64(r.n) / r.elapsed.Seconds() }

func (r allocResult) perAllocation() time.Duration { return r.elapsed / time.Duration(r.n) }

// floorWriter does, without any controller, the API writes the controller makes for an
// allocation: the AllocationClaim (named after the address) and the status write.
type floorWriter struct {
	pool netip.Prefix
	next chan netip.Addr
}

// newFloorWriter hands out n addresses of pool, after the first skip ones (those of
// earlier rounds on the same pool).
func newFloorWriter(pool netip.Prefix, skip, n int) *floorWriter {
	f := &floorWriter{pool: pool, next: make(chan netip.Addr, n)}
	a := pool.Addr().Next() // the network address is skipped, as automatic allocation does
	for range skip {
		a = a.Next()
	}
	for range n {
		f.next <- a
		a = a.Next()
	}
	return f
}

func (f *floorWriter) allocate(ctx context.Context, c juneauclient.Interface, eip *v1alpha1.ElasticIP) error {
	addr := (<-f.next).String()
	j := c.JuneauV1alpha1()
	if _, err := j.AllocationClaims().Create(ctx, &v1alpha1.AllocationClaim{
		ObjectMeta: metav1.ObjectMeta{Name: addr},
		Spec: v1alpha1.AllocationClaimSpec{AddressPool: eip.Spec.ExternalNetwork, Address: addr,
			Consumer: v1alpha1.ConsumerReference{Kind: v1alpha1.ConsumerKindElasticIP, Namespace: eip.Namespace, Name: eip.Name, UID: string(eip.UID)}},
	}, metav1.CreateOptions{FieldManager: v1alpha1.FieldManagerController}); err != nil {
		return fmt.Errorf("claim %s: %w", addr, err)
	}
	eip.Status = availableStatus(addr, eip.Spec.ExternalNetwork, eip.Generation)
	_, err := j.ElasticIPs(eip.Namespace).UpdateStatus(ctx, eip, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManagerController})
	return err
}

// availableStatus is the status the controller writes for a reserved, unused address.
func availableStatus(addr, pool string, gen int64) v1alpha1.ElasticIPStatus {
	now := metav1.Now()
	return v1alpha1.ElasticIPStatus{
		Phase: v1alpha1.ElasticIPAvailable, Address: addr,
		Conditions: []metav1.Condition{
			{Type: v1alpha1.ConditionAllocated, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAllocated, ObservedGeneration: gen,
				LastTransitionTime: now, Message: fmt.Sprintf("address %q reserved from AddressPool %q", addr, pool)},
			{Type: v1alpha1.ConditionAttached, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonUnused, ObservedGeneration: gen,
				LastTransitionTime: now, Message: "no ElasticIPAttachment or NetworkInterface uses this ElasticIP"},
		},
	}
}

// bulkAllocate creates n ElasticIPs in namespace ns on network, with e.cfg.workers
// concurrent creators, and times until a watch has seen every one Available. With a
// floorWriter, as many writers do the controller's writes (no controller may run).
func bulkAllocate(ctx context.Context, e *env, c juneauclient.Interface, ns, network string, n int, floor *floorWriter) allocResult {
	return bulkAllocateSpec(ctx, e, c, ns, v1alpha1.ElasticIPSpec{ExternalNetwork: network}, n, floor)
}

// bulkAllocateSpec is bulkAllocate of ElasticIPs with the given spec.
func bulkAllocateSpec(ctx context.Context, e *env, c juneauclient.Interface, ns string, spec v1alpha1.ElasticIPSpec, n int, floor *floorWriter) allocResult {
	watcher := watchAvailable(ctx, e, c, ns, n)
	starts := make([]time.Time, n)
	idx := make(chan int, n)
	for i := range n {
		idx <- i
	}
	close(idx)
	created := make(chan *v1alpha1.ElasticIP, n)
	errs := make(chan error, 2*e.cfg.workers)
	var creators, writers sync.WaitGroup
	begin := time.Now()
	for range e.cfg.workers {
		creators.Go(func() {
			for i := range idx {
				starts[i] = time.Now()
				eip, err := c.JuneauV1alpha1().ElasticIPs(ns).Create(ctx, &v1alpha1.ElasticIP{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("eip-%d", i)},
					Spec:       spec,
				}, metav1.CreateOptions{})
				if err != nil {
					errs <- err
					return
				}
				created <- eip
			}
		})
		if floor != nil {
			writers.Go(func() {
				for eip := range created {
					if err := floor.allocate(ctx, c, eip); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	creators.Wait()
	close(created)
	writers.Wait()
	select {
	case err := <-errs:
		e.Fatalf("allocating %d ElasticIPs: %v", n, err)
	default:
	}
	// Bounded, so that a slow controller cannot stretch the whole run: what was
	// allocated by then is reported.
	bound := max(90*time.Second, time.Duration(n)*12*time.Millisecond)
	seen := watcher.wait(begin.Add(bound))
	res := allocResult{n: len(seen), created: n, latencies: make([]time.Duration, 0, n)}
	var last time.Time
	for i := range n {
		at, ok := seen[fmt.Sprintf("eip-%d", i)]
		if !ok {
			continue
		}
		res.latencies = append(res.latencies, at.Sub(starts[i]))
		if at.After(last) {
			last = at
		}
	}
	res.elapsed = last.Sub(begin)
	if res.n < n {
		res.elapsed = bound
		e.Logf("only %d of %d ElasticIPs became Available within %s", res.n, n, bound)
	}
	if res.n == 0 {
		e.Fatalf("no ElasticIP became Available within %s", bound)
	}
	return res
}

// partial says how much of a bounded run completed, or nothing when all did.
func (r allocResult) partial() string {
	if r.n == r.created {
		return ""
	}
	return fmt.Sprintf(" (stopped after %s: %d of %d Available)", r.elapsed.Round(time.Second), r.n, r.created)
}

// Address pools of the allocation benchmark. They exist only as API objects of a
// benchmark's own control plane; nothing is routed to them.
var (
	allocPools = map[int]netip.Prefix{1000: netip.MustParsePrefix("10.225.0.0/16"), 10000: netip.MustParsePrefix("10.226.0.0/16")}
	emptyPool  = netip.MustParsePrefix("10.227.0.0/16")
	fullPool   = netip.MustParsePrefix("10.228.0.0/16")
)

// benchAllocation (row 1): bulk allocation through the controller against the floor of
// the same API writes done directly, allocation time in an empty against a 90% full
// pool, and create→Available latency. The floor and the controller run back to back for
// each size (the smaller one in several rounds), each on a control plane of its own that
// stays up for the whole series, so that both see the same load of a shared machine; the
// ratios are medians of the per-round ratios.
func benchAllocation(ctx context.Context, e *env) []Row {
	sizes := []int{1000, 10000}
	occupancyRounds, occupancyN, occupancyPool := 3, 400, fullPool
	if e.cfg.quick {
		sizes, occupancyRounds, occupancyN = []int{200, 1000}, 1, 100
		occupancyPool = netip.MustParsePrefix("10.228.0.0/20")
	}
	small, large := sizes[0], sizes[1]
	// Both sizes in three rounds: a round of N=10,000 takes a minute or two per side,
	// long enough for the load of a shared machine to change between the floor and the
	// controller, so one round alone gave 0.66 to 1.12 for the same tree in one hour.
	rounds := map[int]int{small: 3, large: 3}
	pools := map[int]netip.Prefix{small: allocPools[1000], large: allocPools[10000]}
	series := allocPairs(ctx, e, sizes, rounds, pools)
	empty, full, occupancyNote := occupancy(ctx, e, occupancyPool, occupancyRounds, occupancyN)

	p := func(r allocResult, q float64) time.Duration {
		return percentile(r.latencies, q).Round(time.Millisecond)
	}
	smallPairs, largePairs := series.runs[small], series.runs[large]
	mid, largePair := medianPair(smallPairs), medianPair(largePairs)
	// 1d shows the round whose p99 ratio is the median: its figure, baseline and ratio
	// come from the same round.
	p99Ratio := func(x allocPair) float64 {
		return float64(percentile(x.ctrl.latencies, 99)) / float64(percentile(x.floor.latencies, 99))
	}
	midP99 := medianPairBy(smallPairs, p99Ratio)
	ratios := func(pairs []allocPair) string {
		return roundRatios(pairs, func(x allocPair) float64 { return x.ctrl.rate() / x.floor.rate() })
	}
	e.plots.cdf("alloc-latency", fmt.Sprintf("1d. ElasticIP created → Available, N=%s", thousands(small)),
		dist{"controller", midP99.ctrl.latencies}, dist{"API-write floor", midP99.floor.latencies})
	e.plots.scale("alloc-scale", "1a/1b. allocations per second against N", "ElasticIPs created at once (N)", "allocations per second", true, map[string][]point{
		"controller":      {{float64(small), mid.ctrl.rate()}, {float64(large), largePair.ctrl.rate()}},
		"API-write floor": {{float64(small), mid.floor.rate()}, {float64(large), largePair.floor.rate()}},
	})
	e.plots.scale("alloc-p99-scale", "1d. created → Available p99 against N", "ElasticIPs created at once (N)", "p99 (ms)", true, map[string][]point{
		"controller":      {{float64(small), millis(percentile(midP99.ctrl.latencies, 99))}, {float64(large), millis(percentile(largePair.ctrl.latencies, 99))}},
		"API-write floor": {{float64(small), millis(percentile(midP99.floor.latencies, 99))}, {float64(large), millis(percentile(largePair.floor.latencies, 99))}},
	})
	how := fmt.Sprintf("rate = N / (first create → last seen Available by a watch); %d creators; the floor does the controller's writes (claim create + status write) with as many writers and no controller, on its own control plane; the controller writes the same two for a routine allocation (no finalizer, no Event), plus each pool's counts at most once a second; floor and controller run back to back, %d rounds at this size: ratio = median of the per-round ratios (%s), figures of the median round%s",
		e.cfg.workers, len(smallPairs), ratios(smallPairs), mid.ctrl.partial())
	return []Row{
		{ID: "1a", What: fmt.Sprintf("allocation, N=%s in a /16", thousands(small)), Figure: rate(mid.ctrl.rate()), Baseline: rate(mid.floor.rate()),
			BaselineWhat: "API-write floor", Target: ratioAtLeast(0.85), Note: how,
			PairedRatio: median(pairValues(smallPairs, func(x allocPair) float64 { return x.ctrl.rate() / x.floor.rate() }))},
		{ID: "1b", What: fmt.Sprintf("allocation, N=%s in a /16", thousands(large)), Figure: rate(largePair.ctrl.rate()), Baseline: rate(largePair.floor.rate()),
			BaselineWhat: "API-write floor", Target: ratioAtLeast(0.85),
			PairedRatio: median(pairValues(largePairs, func(x allocPair) float64 { return x.ctrl.rate() / x.floor.rate() })),
			Note: fmt.Sprintf("as 1a, %d rounds: ratio = median of the per-round ratios (%s), figures of the median round%s; API requests per allocation at N=%d (the benchmark's own create included): controller %s; floor %s; controller CPU per allocation %s (%s in %d rounds)",
				len(largePairs), ratios(largePairs), largePair.ctrl.partial(), large, series.ctrlRequests, series.floorRequests,
				(series.cpu / time.Duration(max(1, series.allocated))).Round(10*time.Microsecond), series.cpu.Round(10*time.Millisecond), len(largePairs))},
		{ID: "1c", What: "time per allocation, pool 90% vs 0% full", Figure: duration(full), Baseline: duration(empty),
			BaselineWhat: "empty pool", Target: ratioAtMost(1.2),
			Note: fmt.Sprintf("%d ElasticIPs at once into a %s pool whose first 90%% of addresses are reserved vs an empty one, alternating, median of %d rounds; %s",
				occupancyN, occupancyPool, occupancyRounds, occupancyNote)},
		{ID: "1d", What: fmt.Sprintf("create → Available p99, N=%s", thousands(small)), Figure: duration(percentile(midP99.ctrl.latencies, 99)),
			Baseline: duration(percentile(midP99.floor.latencies, 99)), BaselineWhat: "API-write floor", Target: ratioAtMost(1.3),
			Note: fmt.Sprintf("all N created at once; figure, baseline and ratio are those of the round with the median ratio of p99s (per-round ratios %s); p50 %s (floor %s); N=%d: p50 %s, p99 %s (floor %s, %s)",
				roundRatios(smallPairs, p99Ratio), p(midP99.ctrl, 50), p(midP99.floor, 50), large,
				p(largePair.ctrl, 50), p(largePair.ctrl, 99), p(largePair.floor, 50), p(largePair.floor, 99))},
	}
}

// allocPair is one round: the floor, then the controller, back to back.
type allocPair struct {
	floor, ctrl allocResult
}

// allocSeries is the rounds of every size.
type allocSeries struct {
	runs map[int][]allocPair
	// requests made per allocation in the last run of the largest size, and the
	// controller's CPU time over all runs of that size, which allocated that many.
	floorRequests, ctrlRequests string
	cpu                         time.Duration
	allocated                   int
}

// allocPairs runs, for each size, rounds of the floor followed by the controller, each
// on a control plane of its own (the floor's without any controller).
func allocPairs(ctx context.Context, e *env, sizes []int, rounds map[int]int, pools map[int]netip.Prefix) allocSeries {
	fcp := startControlPlane(ctx, e)
	defer fcp.Stop()
	ccp := startControlPlane(ctx, e)
	defer ccp.Stop()
	fclient, cclient := fastClient(fcp), fastClient(ccp)
	for _, n := range sizes {
		createNetwork(e, ccp, fmt.Sprintf("alloc-%d", n), pools[n].String())
	}
	ctrl := startController(e, ccp)
	defer ctrl.Stop()
	out := allocSeries{runs: map[int][]allocPair{}}
	for _, n := range sizes {
		for r := range rounds[n] {
			var pair allocPair
			ns := fmt.Sprintf("floor-%d-%d", n, r)
			ensureNamespace(e, fcp, ns)
			before := requestCounts(e, fcp)
			pair.floor = bulkAllocate(ctx, e, fclient, ns, "floor", n, newFloorWriter(pools[n], r*n, n))
			out.floorRequests = requestsPer(before, requestCounts(e, fcp), pair.floor.n)
			logAlloc(e, "floor", n, pair.floor)

			ns = fmt.Sprintf("alloc-%d-%d", n, r)
			ensureNamespace(e, ccp, ns)
			name := fmt.Sprintf("allocation-%d", n)
			if rounds[n] > 1 {
				name += fmt.Sprintf("-round-%d", r)
			}
			prof := e.startProfile(ctrl.pid, name)
			before, usage := requestCounts(e, ccp), ctrl.usage(e)
			pair.ctrl = bulkAllocate(ctx, e, cclient, ns, fmt.Sprintf("alloc-%d", n), n, nil)
			out.ctrlRequests = requestsPer(before, requestCounts(e, ccp), pair.ctrl.n)
			if n == sizes[len(sizes)-1] {
				out.cpu += ctrl.usage(e).CPU - usage.CPU
				out.allocated += pair.ctrl.n
			}
			e.stopProfile(prof)
			logAlloc(e, "controller", n, pair.ctrl)
			out.runs[n] = append(out.runs[n], pair)
		}
	}
	return out
}

// medianPair is the round whose controller/floor rate ratio is the median one.
func medianPair(pairs []allocPair) allocPair {
	return medianPairBy(pairs, func(x allocPair) float64 { return x.ctrl.rate() / x.floor.rate() })
}

// medianPairBy is the round whose ratio f is the median (the upper one of an even count).
func medianPairBy(pairs []allocPair, f func(allocPair) float64) allocPair {
	sorted := slices.Clone(pairs)
	slices.SortFunc(sorted, func(a, b allocPair) int { return cmp.Compare(f(a), f(b)) })
	return sorted[len(sorted)/2]
}

func pairValues(pairs []allocPair, f func(allocPair) float64) []float64 {
	out := make([]float64, len(pairs))
	for i, x := range pairs {
		out[i] = f(x)
	}
	return out
}

// roundRatios lists the per-round ratios, in the order the rounds ran.
func roundRatios(pairs []allocPair, f func(allocPair) float64) string {
	parts := make([]string, len(pairs))
	for i, v := range pairValues(pairs, f) {
		parts[i] = fmt.Sprintf("%.2f", v)
	}
	return strings.Join(parts, ", ")
}

func logAlloc(e *env, what string, n int, r allocResult) {
	e.Logf("%-10s N=%-6d %8.0f/s  p50 %v  p99 %v%s", what, n, r.rate(), percentile(r.latencies, 50), percentile(r.latencies, 99), r.partial())
}

// occupancy measures the time per allocation in an empty pool and in one whose first 90%
// of addresses are reserved, alternating rounds, and returns the medians.
func occupancy(ctx context.Context, e *env, pool netip.Prefix, rounds, n int) (empty, full time.Duration, note string) {
	cp := startControlPlane(ctx, e)
	client := fastClient(cp)
	size := 1<<(32-pool.Bits()) - 2 // without network and broadcast addresses
	reserved := size * 9 / 10
	createNetwork(e, cp, "empty", emptyPool.String())
	createNetwork(e, cp, "full", pool.String())
	start := time.Now()
	prefill(ctx, e, client, pool, "full", reserved)
	e.Logf("reserved %d of %d addresses of %s in %s", reserved, size, pool, time.Since(start).Round(100*time.Millisecond))
	// The reservations belong to no ElasticIP: keep the controller from collecting them.
	ctrl := startController(e, cp, "--orphan-claim-grace=24h")
	var emptyTimes, fullTimes []time.Duration
	requests, cpu := map[string]string{}, map[string]time.Duration{}
	for r := range rounds {
		for _, network := range []string{"empty", "full"} {
			ns := fmt.Sprintf("%s-%d", network, r)
			ensureNamespace(e, cp, ns)
			prof := e.startProfile(ctrl.pid, fmt.Sprintf("allocation-%s-pool-round-%d", network, r))
			before, usage := requestCounts(e, cp), ctrl.usage(e)
			res := bulkAllocate(ctx, e, client, ns, network, n, nil)
			requests[network] = requestsPer(before, requestCounts(e, cp), n)
			cpu[network] += ctrl.usage(e).CPU - usage.CPU
			e.stopProfile(prof)
			if network == "empty" {
				emptyTimes = append(emptyTimes, res.perAllocation())
			} else {
				fullTimes = append(fullTimes, res.perAllocation())
			}
			e.Logf("%-5s pool round %d: %v per allocation", network, r, res.perAllocation())
		}
	}
	perAlloc := func(d time.Duration) time.Duration { return (d / time.Duration(rounds*n)).Round(10 * time.Microsecond) }
	note = fmt.Sprintf("controller CPU per allocation: empty %s, full %s; API requests per allocation: empty %s; full %s",
		perAlloc(cpu["empty"]), perAlloc(cpu["full"]), requests["empty"], requests["full"])
	return medianDuration(emptyTimes), medianDuration(fullTimes), note
}

// prefill reserves the first count addresses of pool with claims of made-up consumers,
// written concurrently.
func prefill(ctx context.Context, e *env, c juneauclient.Interface, pool netip.Prefix, poolName string, count int) {
	g, gctx := errgroup.WithContext(ctx)
	addrs := make(chan netip.Addr, 1024)
	g.Go(func() error {
		defer close(addrs)
		a := pool.Addr().Next()
		for range count {
			select {
			case addrs <- a:
			case <-gctx.Done():
				return gctx.Err()
			}
			a = a.Next()
		}
		return nil
	})
	for range 32 {
		g.Go(func() error {
			for a := range addrs {
				_, err := c.JuneauV1alpha1().AllocationClaims().Create(gctx, &v1alpha1.AllocationClaim{
					ObjectMeta: metav1.ObjectMeta{Name: a.String()},
					Spec: v1alpha1.AllocationClaimSpec{AddressPool: poolName, Address: a.String(),
						Consumer: v1alpha1.ConsumerReference{Kind: v1alpha1.ConsumerKindElasticIP, Namespace: "prefill",
							Name: "prefill-" + a.String(), UID: string(uuid.NewUUID())}},
				}, metav1.CreateOptions{})
				if err != nil {
					return fmt.Errorf("claim %s: %w", a, err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		e.Fatalf("reserving addresses: %v", err)
	}
}
