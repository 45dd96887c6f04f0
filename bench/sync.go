package main

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/loutres/juneau/pkg/node/nft"
	"github.com/loutres/juneau/test/netns"
	"github.com/loutres/juneau/test/require"
)

// benchSync (row 4) times programming 10,000 mappings into an empty namespace and
// changing one mapping on top of 10,000: juneau's nftables Programmer against
// iptables-restore doing the same with DNAT/SNAT rules, each in a fresh namespace.
func benchSync(ctx context.Context, e *env) []Row {
	require.Root(e)
	iptablesRestoreBin := require.Binary(e, "iptables-restore")
	n, reps, changes := 10000, 5, 200
	if e.cfg.quick {
		reps, changes = 2, 20
	}
	mappings := benchMappings(n)

	j := juneauSync(ctx, e, mappings, reps, changes, true)
	iFull, iChange := iptablesSync(e, iptablesRestoreBin, mappings, reps, changes/4)

	e.plots.cdf("sync-change", "4. one mapping changed on top of 10,000", dist{"juneau nftables", j.change}, dist{"iptables-restore --noflush", iChange})
	note := fmt.Sprintf("median of %d runs; baseline: iptables-restore (%s) of %d DNAT + %d SNAT rules, started from a thread in the namespace as kube-proxy would",
		reps, iptablesVersion(), n, n)
	return append([]Row{
		{ID: "4a", What: "program 10,000 mappings from empty", Figure: duration(medianDuration(j.full)),
			Baseline: duration(medianDuration(iFull)), BaselineWhat: "iptables-restore", Target: below(duration(time.Second)), Note: note},
		{ID: "4b", What: "one change on top of 10,000 (median)", Figure: duration(medianDuration(j.change)),
			Baseline: duration(medianDuration(iChange)), BaselineWhat: "iptables-restore --noflush", Target: below(duration(time.Millisecond)),
			Note: fmt.Sprintf("%d changes (iptables %d), each moving one mapping to a new Pod IP, the whole desired state of 10,000 mappings given to Sync each time as the agent does (juneau: 6 map elements out, 6 in, the five NAT maps and the in-cluster map; iptables: 2 rules replaced); juneau per change: %s CPU in this process (user %s, system %s); one mapping added without a removal: median %s, p99 %s",
				len(j.change), len(iChange),
				(j.user + j.system).Round(time.Microsecond), j.user.Round(time.Microsecond), j.system.Round(time.Microsecond),
				medianDuration(j.added).Round(time.Microsecond), percentile(j.added, 99).Round(time.Microsecond))},
		{ID: "4c", What: "one change on top of 10,000 (p99)", Figure: duration(percentile(j.change, 99)),
			Baseline: duration(percentile(iChange, 99)), BaselineWhat: "iptables-restore --noflush", Target: below(duration(5 * time.Millisecond))},
	}, largeSyncRows(ctx, e, j)...)
}

// largeSyncRows (4d–4g) time the Programmer at 50,000 and 100,000 mappings, against its
// own figures at 10,000 (j): the growth of a full sync and of one change. The goal of
// one change at 100,000 is under 1 ms at the median.
func largeSyncRows(ctx context.Context, e *env, j juneauTimes) []Row {
	if e.cfg.quick {
		return nil
	}
	var rows []Row
	ids := [][2]string{{"4d", "4e"}, {"4f", "4g"}}
	for i, n := range []int{50000, 100000} {
		big := juneauSync(ctx, e, scaledMappings(n), 2, 100, false)
		target := Target{}
		if n == 100000 {
			target = below(duration(time.Millisecond))
		}
		rows = append(rows,
			Row{ID: ids[i][0], What: fmt.Sprintf("program %s mappings from empty", thousands(n)), Figure: duration(medianDuration(big.full)),
				Baseline: duration(medianDuration(j.full)), BaselineWhat: "10,000, same run",
				Note: fmt.Sprintf("median of %d runs; one change: p99 %s; CPU per change %s", len(big.full),
					percentile(big.change, 99).Round(time.Microsecond), (big.user + big.system).Round(time.Microsecond))},
			Row{ID: ids[i][1], What: fmt.Sprintf("one change on top of %s (median)", thousands(n)), Figure: duration(medianDuration(big.change)),
				Baseline: duration(medianDuration(j.change)), BaselineWhat: "10,000, same run", Target: target},
		)
	}
	return rows
}

// juneauTimes are the Programmer's timings.
type juneauTimes struct {
	full, change, added []time.Duration
	// user and system are the CPU time this process used per change.
	user, system time.Duration
}

// juneauSync times full syncs of mappings into an empty table, then single changes,
// then single additions.
func juneauSync(ctx context.Context, e *env, mappings []nft.Mapping, reps, changes int, profile bool) (t juneauTimes) {
	ns := netns.New(e, "sync")
	state := natState(mappings)
	var p *nft.Programmer
	for range reps {
		if err := nft.NewProgrammer(nft.Options{NetNS: ns.FD()}).Remove(ctx); err != nil {
			e.Fatalf("removing the table: %v", err)
		}
		p = nft.NewProgrammer(nft.Options{NetNS: ns.FD()})
		start := time.Now()
		if err := p.Sync(ctx, state); err != nil {
			e.Fatalf("sync of %d mappings: %v", len(mappings), err)
		}
		t.full = append(t.full, time.Since(start))
		if st := p.LastSync(); !st.Full || st.Mappings != len(mappings) {
			e.Fatalf("not a full sync of %d mappings: %+v", len(mappings), st)
		}
	}
	before := rusage(e)
	t.change = changeEach(ctx, e, p, state, changes, 0)
	after := rusage(e)
	t.user = (after.user - before.user) / time.Duration(changes)
	t.system = (after.system - before.system) / time.Duration(changes)
	if e.prof != nil && profile {
		// Profiles come from an extra, uncounted series: recording every context
		// switch slows the process down. More changes than the timed series, so
		// that the CPU profile (100 samples a second) has something to show.
		stop := e.profileSelf("sync-one-change")
		e.perfOffCPU("sync-one-change-offcpu", func() { changeEach(ctx, e, p, state, 10*changes, changes) })
		stop()
	}
	for i := range changes {
		state.Mappings = append(state.Mappings, nft.Mapping{ElasticIP: netip.AddrFrom4([4]byte{10, 225, 100, byte(i)}), PodIP: movedPod(5000 + i)})
		start := time.Now()
		if err := p.Sync(ctx, state); err != nil {
			e.Fatalf("one addition: %v", err)
		}
		t.added = append(t.added, time.Since(start))
		if st := p.LastSync(); st.Full || st.Added != 1 || st.Removed != 0 {
			e.Fatalf("not an incremental one-mapping addition: %+v", st)
		}
	}
	return t
}

// changeEach moves one mapping at a time to a new Pod IP and times each sync; the
// changes are numbered from first on, each giving a Pod IP of its own.
func changeEach(ctx context.Context, e *env, p *nft.Programmer, state nft.DesiredState, changes, first int) []time.Duration {
	out := make([]time.Duration, 0, changes)
	for i := first; i < first+changes; i++ {
		j := (i * 97) % len(state.Mappings)
		if state.Mappings[j].ElasticIP == elasticIP {
			j = (j + 1) % len(state.Mappings)
		}
		state.Mappings[j].PodIP = movedPod(i)
		start := time.Now()
		if err := p.Sync(ctx, state); err != nil {
			e.Fatalf("one change: %v", err)
		}
		out = append(out, time.Since(start))
		if st := p.LastSync(); st.Full || st.Added != 1 || st.Removed != 1 {
			e.Fatalf("not an incremental one-mapping sync: %+v", st)
		}
	}
	return out
}

type cpuTimes struct{ user, system time.Duration }

// rusage is the CPU time this process used so far.
func rusage(e *env) cpuTimes {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		e.Fatal(err)
	}
	return cpuTimes{user: time.Duration(ru.Utime.Nano()), system: time.Duration(ru.Stime.Nano())}
}

// movedPod is a Pod IP no mapping uses yet, distinct for every change.
func movedPod(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 244, byte(200 + i/256), byte(i)}) }

// iptablesSync does the same with iptables-restore: the whole nat table from empty, then
// one mapping's two rules replaced with --noflush.
func iptablesSync(e *env, bin string, mappings []nft.Mapping, reps, changes int) (full, change []time.Duration) {
	ns := netns.New(e, "ipt")
	rules := iptablesRestore(mappings)
	for range reps {
		runIn(e, ns, bin, emptyNAT) // untimed: start from an empty nat table
		full = append(full, runIn(e, ns, bin, rules))
	}
	for i := range changes {
		j := (i * 97) % len(mappings)
		change = append(change, runIn(e, ns, bin, iptablesChange(mappings, j, movedPod(i)), "--noflush"))
	}
	out := ns.MustRun("iptables", "-t", "nat", "-S", "PREROUTING")
	if got := strings.Count(out, "-j DNAT"); got != len(mappings) {
		e.Fatalf("after the changes the nat table holds %d DNAT rules, want %d", got, len(mappings))
	}
	return full, change
}

// runIn runs bin with input on stdin from a thread inside ns (the child inherits the
// thread's network namespace, without `ip netns exec` setting up a mount namespace)
// and returns how long it took.
func runIn(e *env, ns *netns.NS, bin, input string, args ...string) time.Duration {
	var took time.Duration
	ns.MustDo(func() error {
		cmd := exec.Command(bin, args...)
		cmd.Stdin = strings.NewReader(input)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		took = time.Since(start)
		if err != nil {
			return fmt.Errorf("%s %s: %w\n%s", bin, strings.Join(args, " "), err, out)
		}
		return nil
	})
	return took
}

func iptablesVersion() string {
	out, err := exec.Command("iptables", "-V").Output()
	if err != nil {
		return "iptables"
	}
	return strings.TrimSpace(string(out))
}
