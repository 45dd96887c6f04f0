package main

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/controllers/ipam"
)

// allocatorN is the number of reservations of row 1e.
const allocatorN = 10000

// allocatorRun is the allocator's heap and time for n reservations in one pool.
type allocatorRun struct {
	heap    uint64        // live heap the Index holds after n Takes
	perTake time.Duration // mean time of one Take
	holes   uint64        // live heap once every other reservation is freed again
}

// benchAllocator (row 1e): the memory the controller's allocator (pkg/controllers/ipam)
// holds for 10,000 reservations from an IPv6 /64 against the same from an IPv4 /16. It
// runs in the benchmark process, with no control plane: what is measured is the
// allocator's own state, which must follow the reservations, not the pool's size.
func benchAllocator(_ context.Context, e *env) []Row {
	rounds := 5
	if e.cfg.quick {
		rounds = 1
	}
	var v4, v6 []allocatorRun
	for range rounds { // alternating, medians below
		v4 = append(v4, allocatorRound(e, "10.226.0.0/16", allocatorN))
		v6 = append(v6, allocatorRound(e, "fd00:226::/64", allocatorN))
	}
	med := func(runs []allocatorRun, f func(allocatorRun) float64) float64 {
		vals := make([]float64, len(runs))
		for i, r := range runs {
			vals[i] = f(r)
		}
		return median(vals)
	}
	heap := func(r allocatorRun) float64 { return float64(r.heap) }
	holes := func(r allocatorRun) float64 { return float64(r.holes) }
	take := func(r allocatorRun) float64 { return float64(r.perTake) }
	e.Logf("allocator: /16 %s (%s per Take), /64 %s (%s per Take)", bytesQ(med(v4, heap)), time.Duration(med(v4, take)),
		bytesQ(med(v6, heap)), time.Duration(med(v6, take)))
	return []Row{{
		ID: "1e", What: fmt.Sprintf("allocator memory, %s reservations in an IPv6 /64", thousands(allocatorN)),
		Figure: bytesQ(med(v6, heap)), Baseline: bytesQ(med(v4, heap)), BaselineWhat: "the same in an IPv4 /16",
		Target: ratioAtMost(1.2),
		Note: fmt.Sprintf("live heap of the allocator's Index after %d Takes from one pool (runtime.MemStats after a GC), median of %d alternating rounds; "+
			"a /64 holds 2^48 times the addresses of a /16; per Take: /64 %s, /16 %s; with every other reservation freed again (5,000 holes): /64 %s, /16 %s",
			allocatorN, rounds, time.Duration(med(v6, take)).Round(10*time.Nanosecond), time.Duration(med(v4, take)).Round(10*time.Nanosecond),
			bytesQ(med(v6, holes)), bytesQ(med(v4, holes))),
	}}
}

// allocatorRound takes n addresses from a fresh Index holding one pool of prefix.
func allocatorRound(e *env, prefix string, n int) allocatorRun {
	pool, err := ipam.NewPool("bench", []string{prefix})
	if err != nil {
		e.Fatalf("pool %s: %v", prefix, err)
	}
	pools := []ipam.Pool{pool}
	before := liveHeap()
	idx := ipam.NewIndex()
	taken := make([]ipam.Candidate, 0, n)
	start := time.Now()
	for range n {
		c, ok := idx.Take(pools)
		if !ok {
			e.Fatalf("pool %s exhausted after %d reservations", prefix, len(taken))
		}
		taken = append(taken, c)
	}
	elapsed := time.Since(start)
	// taken is counted in both figures alike; the Index is what differs.
	run := allocatorRun{perTake: elapsed / time.Duration(n), heap: sub(liveHeap(), before)}
	for i := 0; i < len(taken); i += 2 {
		idx.Unmark(taken[i].Addr)
	}
	run.holes = sub(liveHeap(), before)
	runtime.KeepAlive(idx)
	runtime.KeepAlive(taken)
	return run
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// familyRun is one bulk allocation through a fresh controller on a fresh control plane.
type familyRun struct {
	res   allocResult
	usage procUsage // the controller's at the end
	cpu   time.Duration
}

// benchAllocation6 (rows 1f, 1g): 10,000 ElasticIPs allocated through the controller
// from an IPv6 /64 against the same from an IPv4 /16, each on a control plane and
// controller of its own: the rate, and the controller's peak memory, which must not
// follow the size of the pool.
func benchAllocation6(ctx context.Context, e *env) []Row {
	n := allocatorN
	if e.cfg.quick {
		n = 1000
	}
	run := func(name, prefix string, family v1alpha1.IPFamily) familyRun {
		cp := startControlPlane(ctx, e)
		defer cp.Stop()
		client := fastClient(cp)
		createNetwork(e, cp, name, prefix)
		ensureNamespace(e, cp, name)
		ctrl := startController(e, cp)
		defer ctrl.Stop()
		before := ctrl.usage(e)
		res := bulkAllocateSpec(ctx, e, client, name, v1alpha1.ElasticIPSpec{ExternalNetwork: name, IPFamily: family}, n, nil)
		after := ctrl.usage(e)
		logAlloc(e, name, n, res)
		return familyRun{res: res, usage: after, cpu: after.CPU - before.CPU}
	}
	v4 := run("alloc-v4", "10.226.0.0/16", v1alpha1.IPv4)
	v6 := run("alloc-v6", "fd00:226::/64", v1alpha1.IPv6)
	return []Row{
		{ID: "1f", What: fmt.Sprintf("allocation, N=%s in an IPv6 /64", thousands(n)), Figure: rate(v6.res.rate()), Baseline: rate(v4.res.rate()),
			BaselineWhat: "N in an IPv4 /16", Target: ratioAtLeast(0.8),
			Note: fmt.Sprintf("each on a control plane and controller of its own, %d creators, rate as in 1b; controller CPU: /64 %s, /16 %s; p99 create → Available: /64 %s, /16 %s; Available: /64 %d, /16 %d of %d",
				e.cfg.workers, v6.cpu.Round(10*time.Millisecond), v4.cpu.Round(10*time.Millisecond),
				percentile(v6.res.latencies, 99).Round(time.Millisecond), percentile(v4.res.latencies, 99).Round(time.Millisecond),
				v6.res.n, v4.res.n, n)},
		{ID: "1g", What: fmt.Sprintf("controller peak RSS after N=%s in an IPv6 /64", thousands(n)), Figure: bytesQ(float64(v6.usage.PeakRSS)),
			Baseline: bytesQ(float64(v4.usage.PeakRSS)), BaselineWhat: "N in an IPv4 /16", Target: ratioAtMost(1.2),
			Note: fmt.Sprintf("VmHWM of `juneau controller` at the end of the runs of 1f (VmRSS: /64 %s, /16 %s); the /64 holds 2^48 times the addresses of the /16",
				bytesQ(float64(v6.usage.RSS)), bytesQ(float64(v4.usage.RSS)))},
	}
}
