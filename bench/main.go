// Command bench measures juneau on this machine and prints one table: every figure next
// to a baseline measured in the same run, their ratio, the target and whether it is met.
// Absolute numbers vary between machines; the ratios are what is tracked.
//
//	go run ./bench                      all seven benchmarks (make bench)
//	go run ./bench -only datapath,arp   some of them
//	go run ./bench -cpuprofile DIR      also write CPU profiles of the controller to DIR
//	go run ./bench -only scale          the scale benchmark (make scale), never run by default
//
// Benchmarks: allocation (1), attach (2), datapath (3), sync (4), arp (5), memory (6),
// bgp (7); scale (8) only when named.
// Everything runs in network namespaces and on a loopback control plane the benchmark
// creates and removes, also on Ctrl-C. See docs/performance.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/loutres/juneau/test/framework"
	"github.com/loutres/juneau/test/runner"
)

// benchmark is one numbered row group of the table.
type benchmark struct {
	id, name, what string
	run            func(ctx context.Context, e *env) []Row
	// optIn: run only when -only names it (make scale), not by default (make bench).
	optIn bool
}

// allBenchmarks lists the rows of the table in order.
func allBenchmarks() []benchmark {
	return []benchmark{
		{"1", "allocation", "allocation against the API-write floor", benchAllocation, false},
		{"1e", "allocator", "allocator memory: an IPv6 /64 against an IPv4 /16", benchAllocator, false},
		{"1f", "allocation6", "allocation through the controller: an IPv6 /64 against an IPv4 /16", benchAllocation6, false},
		{"2", "attach", "time to attach (pod-with-eip on the e2e harness)", benchAttach, false},
		{"3", "datapath", "datapath: plain routing, juneau NAT, iptables DNAT/SNAT", benchDatapath, false},
		{"4", "sync", "rule sync: juneau nftables vs iptables-restore", benchSync, false},
		{"5", "arp", "ARP replies: juneau responder vs the kernel", benchARP, false},
		{"6", "memory", "controller memory at 10,000 of each", benchMemory, false},
		{"7", "bgp", "bgp network: Pod created → /32 in BIRD's table vs arp: → first ARP reply", benchBGP, false},
		{"8", "scale", "scale: kwok Nodes, Pods with automatic ElasticIPs up to each size (make scale)", benchScale, true},
		{"9", "agent-scale", "scale: one real node agent with the mappings of each size (make scale)", benchAgentScale, true},
	}
}

// config holds the command-line settings shared by the benchmarks.
type config struct {
	quick   bool
	workers int
	// scaleNodes and scaleSizes are the kwok Nodes and the sizes of the scale benchmark.
	scaleNodes int
	scaleSizes []int
	// agentSizes are the mappings on the one Node of the agent-scale benchmark, and
	// agentIPv6 makes them IPv6 ones (answered by NDP).
	agentSizes []int
	agentIPv6  bool
	juneau     string // binary every juneau process runs
	root       string // repository root
}

// env is what one benchmark gets: its runner (a testing.TB for the test helpers), the
// configuration and the profiler.
type env struct {
	*runner.Runner
	cfg   config
	prof  *profiler
	plots *plots
}

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case responderCommand:
			os.Exit(responderMain(os.Args[2:]))
		case informersCommand:
			os.Exit(informersMain(os.Args[2:]))
		}
	}
	os.Exit(run())
}

func run() int {
	var (
		only       = flag.String("only", "", "comma-separated benchmarks to run (allocation, allocator, allocation6, attach, datapath, sync, arp, memory, bgp, scale, agent-scale); default all but scale and agent-scale")
		quick      = flag.Bool("quick", false, "smaller sizes and shorter runs, to check that everything works (figures are not comparable)")
		workers    = flag.Int("workers", 4, "controller workers per controller; the API-write floor uses as many writers")
		profileDir = flag.String("cpuprofile", "", "write profiles of the measured phases to this directory: pprof CPU profiles of the controller and of in-process work, and perf data when perf is installed")
		markdown   = flag.String("markdown", "", "also write the table as Markdown to this file")
		scaleNodes = flag.Int("scale-nodes", 1000, "scale: simulated Nodes (kwok)")
		scaleSizes = flag.String("scale-sizes", "10000,30000,100000", "scale: Pods with automatic ElasticIPs at each measurement, comma-separated, ascending")
		agentSizes = flag.String("agent-sizes", "10000,50000,100000", "agent-scale: mappings on the agent's Node at each measurement, comma-separated, ascending")
		agentIPv6  = flag.Bool("agent-ipv6", false, "agent-scale: IPv6 mappings, answered by NDP (rows 9-ipv6), instead of IPv4 ones answered by ARP")
		plotDir    = flag.String("plots", "_output/bench-plots", "write SVG plots of the distributions and of cost against scale to this directory (relative to the repository); empty: none")
	)
	flag.Parse()
	selected, err := selectBenchmarks(*only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	cfg := config{quick: *quick, workers: *workers, scaleNodes: *scaleNodes, agentIPv6: *agentIPv6}
	if cfg.scaleSizes, err = parseSizes(*scaleSizes); err != nil {
		fmt.Fprintln(os.Stderr, "bench: -scale-sizes:", err)
		return 2
	}
	if cfg.agentSizes, err = parseSizes(*agentSizes); err != nil {
		fmt.Fprintln(os.Stderr, "bench: -agent-sizes:", err)
		return 2
	}
	if cfg.root, err = framework.RepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var prof *profiler
	if *profileDir != "" {
		fmt.Fprintln(os.Stderr, "building juneau with the profiling hook...")
		if cfg.juneau, prof, err = buildProfiledJuneau(ctx, cfg.root, *profileDir); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		defer prof.cleanup()
		// The harness and the framework start juneau from $JUNEAU_BINARY.
		_ = os.Setenv("JUNEAU_BINARY", cfg.juneau)
	}

	pics := &plots{}
	guard := newTeardownGuard(cancel, prof)
	defer guard.stop()
	var rows []Row
	failed := false
	for _, b := range selected {
		fmt.Fprintf(os.Stderr, "\n== %s. %s\n", b.id, b.what)
		start := time.Now()
		got := runBench(ctx, b, cfg, prof, pics, guard)
		for _, r := range got {
			failed = failed || r.Err != ""
		}
		rows = append(rows, got...)
		fmt.Fprintf(os.Stderr, "== %s done in %s\n", b.name, time.Since(start).Round(time.Second))
		if ctx.Err() != nil {
			break
		}
	}
	fmt.Println()
	printTable(os.Stdout, rows)
	if *markdown != "" {
		if err := writeMarkdown(*markdown, rows); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
	}
	if *plotDir != "" {
		dir := *plotDir
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cfg.root, dir)
		}
		files, err := pics.write(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: plots:", err)
			failed = true
		}
		for _, f := range files {
			fmt.Fprintln(os.Stderr, "wrote", f)
		}
	}
	framework.RemoveBuiltBinary()
	if failed {
		return 1
	}
	return 0
}

func selectBenchmarks(only string) ([]benchmark, error) {
	benchmarks := allBenchmarks()
	if only == "" {
		return slices.DeleteFunc(benchmarks, func(b benchmark) bool { return b.optIn }), nil
	}
	var out []benchmark
	for _, name := range strings.Split(only, ",") {
		i := slices.IndexFunc(benchmarks, func(b benchmark) bool { return b.name == strings.TrimSpace(name) || b.id == strings.TrimSpace(name) })
		if i < 0 {
			return nil, fmt.Errorf("unknown benchmark %q", name)
		}
		out = append(out, benchmarks[i])
	}
	return out, nil
}

// parseSizes reads a comma-separated list of ascending positive counts.
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || (len(out) > 0 && n <= out[len(out)-1]) {
			return nil, fmt.Errorf("%q: want ascending positive counts", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// runBench runs one benchmark with a runner of its own; a failure (Fatal, panic) becomes
// an error row and everything the benchmark created is removed.
func runBench(ctx context.Context, b benchmark, cfg config, prof *profiler, pics *plots, guard *teardownGuard) (rows []Row) {
	r, err := runner.New("bench-" + b.name)
	if err != nil {
		return []Row{{ID: b.id, What: b.what, Err: err.Error()}}
	}
	guard.set(r)
	defer func() {
		if p := recover(); p != nil {
			msg := fmt.Sprint(p)
			if f, ok := p.(runner.Abort); ok {
				msg = f.Msg
			} else {
				fmt.Fprintf(os.Stderr, "panic in %s: %v\n%s", b.name, p, debug.Stack())
			}
			rows = []Row{{ID: b.id, What: b.what, Err: msg}}
		}
		r.Teardown()
		guard.set(nil)
	}()
	if cfg.juneau == "" {
		cfg.juneau = framework.JuneauBinary(r)
	}
	return b.run(ctx, &env{Runner: r, cfg: cfg, prof: prof, plots: pics})
}

// teardownGuard removes what the running benchmark created when the process gets
// SIGINT or SIGTERM, then exits, whatever the benchmark is doing at that moment.
type teardownGuard struct {
	mu      sync.Mutex
	current *runner.Runner
	sigs    chan os.Signal
}

func newTeardownGuard(cancel context.CancelFunc, prof *profiler) *teardownGuard {
	g := &teardownGuard{sigs: make(chan os.Signal, 1)}
	signal.Notify(g.sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		if _, ok := <-g.sigs; !ok {
			return
		}
		cancel()
		fmt.Fprintln(os.Stderr, "\ninterrupted: removing what the benchmark created")
		g.mu.Lock()
		r := g.current
		g.mu.Unlock()
		if r != nil {
			r.Teardown()
		}
		framework.RemoveBuiltBinary()
		prof.cleanup()
		os.Exit(130)
	}()
	return g
}

func (g *teardownGuard) set(r *runner.Runner) {
	g.mu.Lock()
	g.current = r
	g.mu.Unlock()
}

func (g *teardownGuard) stop() {
	signal.Stop(g.sigs)
	close(g.sigs)
}

func writeMarkdown(path string, rows []Row) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	printMarkdown(f, rows)
	return f.Close()
}
