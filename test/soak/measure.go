package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/test/e2e/harness"
)

// row is one line of the table: the system after a phase.
type row struct {
	phase                                string
	created, attached, detached, deleted int
	live                                 int
	took                                 time.Duration
	rss                                  map[string]float64 // by component
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
