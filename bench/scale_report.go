package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/loutres/juneau/test/framework"
)

// histogram is the cumulative count of observations at or under each bucket bound.
type histogram struct {
	le    []float64 // bounds, ascending, +Inf last
	count []float64
}

// admissionHistogram scrapes the API server's own latency of admission webhook calls
// (apiserver_admission_webhook_admission_duration_seconds), all webhooks summed: what a
// request waits for the webhook, the connection and TLS included.
func admissionHistogram(e *env, cp *framework.ControlPlane) histogram {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raw, err := cp.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		e.Fatalf("API server metrics: %v", err)
	}
	h, err := parseHistogram(string(raw), "apiserver_admission_webhook_admission_duration_seconds")
	if err != nil {
		e.Fatal(err)
	}
	return h
}

// parseHistogram sums every series of the histogram family name in a metrics text.
func parseHistogram(text, name string) (histogram, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return histogram{}, fmt.Errorf("parsing metrics: %w", err)
	}
	sums := map[float64]float64{}
	if f := fams[name]; f != nil && f.GetType() == dto.MetricType_HISTOGRAM {
		for _, m := range f.Metric {
			for _, b := range m.GetHistogram().GetBucket() {
				sums[b.GetUpperBound()] += float64(b.GetCumulativeCount())
			}
			// The text format lists the +Inf bucket, which counts every sample.
		}
	}
	var h histogram
	for le := range sums {
		h.le = append(h.le, le)
	}
	slices.Sort(h.le)
	for _, le := range h.le {
		h.count = append(h.count, sums[le])
	}
	return h, nil
}

// since is the histogram of the observations made after before.
func (h histogram) since(before histogram) histogram {
	out := histogram{le: h.le, count: slices.Clone(h.count)}
	for i, le := range h.le {
		if j := slices.Index(before.le, le); j >= 0 {
			out.count[i] -= before.count[j]
		}
	}
	return out
}

// quantile is the upper bound of the bucket holding quantile q; NaN without observations.
func (h histogram) quantile(q float64) float64 {
	if len(h.count) == 0 || h.count[len(h.count)-1] == 0 {
		return math.NaN()
	}
	total := h.count[len(h.count)-1]
	for i, c := range h.count {
		if c >= q*total {
			return h.le[i]
		}
	}
	return math.Inf(1)
}

func (h histogram) summary() string {
	if len(h.count) == 0 || h.count[len(h.count)-1] == 0 {
		return "no webhook calls"
	}
	return fmt.Sprintf("%.0f webhook calls, p50 ≤ %gs, p99 ≤ %gs (the API server's buckets)", h.count[len(h.count)-1], h.quantile(0.5), h.quantile(0.99))
}

// scaleRows is the table of the scale benchmark: each cost at each size.
func scaleRows(steps []scaleStep, nodes int, emptyAPI, emptyEtcd procUsage) []Row {
	var rows []Row
	largest := steps[len(steps)-1].n
	for _, s := range steps {
		at := fmt.Sprintf("N=%s", thousands(s.n))
		id := func(c string) string { return fmt.Sprintf("8%s-%s", c, shortSize(s.n)) }
		rssTarget, rateTarget := Target{}, Target{}
		if s.n == largest {
			rssTarget, rateTarget = below(bytesQ(1<<30)), ratioAtLeast(0.85)
		}
		rows = append(rows,
			Row{ID: id("a"), What: "allocation rate, Pods with automatic ElasticIPs, " + at, Figure: rate(s.batch.rate()),
				Baseline: rate(s.floor.rate()), BaselineWhat: "API-write floor", Target: rateTarget,
				Note: fmt.Sprintf("%d Nodes (kwok); the batch of %s Pods up to N created by %d creators, rate = batch / (first create → last Pod seen with its address by a watch); API requests per allocation %s",
					nodes, thousands(s.batch.n), s.batch.creators, s.reqs)},
			Row{ID: id("b"), What: "Pod created → its ElasticIP's address on it, p99, " + at, Figure: duration(percentile(s.batch.latencies, 99)),
				Baseline: duration(percentile(s.floor.latencies, 99)), BaselineWhat: "API-write floor",
				Note: fmt.Sprintf("the batch created at once; p50 %s (floor %s)", percentile(s.batch.latencies, 50).Round(10*time.Millisecond),
					percentile(s.floor.latencies, 50).Round(10*time.Millisecond))},
			Row{ID: id("c"), What: "controller RSS, " + at, Figure: bytesQ(float64(s.ctrl.RSS)), Target: rssTarget,
				Note: fmt.Sprintf("once idle after the batch; peak %s; %s per ElasticIP", bytesQ(float64(s.ctrl.PeakRSS)), bytesQ(float64(s.ctrl.RSS)/float64(s.n)))},
			Row{ID: id("d"), What: "controller CPU per allocation, " + at, Figure: duration(s.cpuPer),
				Note: fmt.Sprintf("in the batch, until idle; the others per allocation: kube-apiserver %s, etcd %s, webhook %s, kwok %s",
					s.apiCPU.Round(10*time.Microsecond), s.etcdCPU.Round(10*time.Microsecond), s.webhookCPU.Round(10*time.Microsecond), s.kwokCPU.Round(10*time.Microsecond))},
			Row{ID: id("e"), What: "restarted controller → first allocation, " + at, Figure: duration(s.resume), Target: below(duration(time.Minute)),
				Note: fmt.Sprintf("a Pod created while it was down; caches synced (/readyz) after %s in a restart without one", s.synced.Round(10*time.Millisecond))},
			Row{ID: id("f"), What: "writes by a restarted controller, all correct, " + at, Figure: count(s.nWrites), Target: below(count(1)),
				Note: "until idle, Lease renewals left out: " + s.rewrites},
			Row{ID: id("g"), What: "Pod create request p99 (webhook review included), " + at, Figure: duration(percentile(s.batch.creates, 99)),
				Baseline: duration(percentile(s.batch.creates, 50)), BaselineWhat: "p50", Note: s.webhook},
			Row{ID: id("h"), What: "kube-apiserver RSS, " + at, Figure: bytesQ(float64(s.api.RSS)), Baseline: bytesQ(float64(s.plainAPI.RSS)), BaselineWhat: "the same Pods without juneau",
				Note: "the Nodes alone: " + bytesQ(float64(emptyAPI.RSS)).String()},
			Row{ID: id("i"), What: "etcd RSS, " + at, Figure: bytesQ(float64(s.etcd.RSS)), Baseline: bytesQ(float64(s.plainEtcd.RSS)), BaselineWhat: "the same Pods without juneau",
				Note: "the Nodes alone: " + bytesQ(float64(emptyEtcd.RSS)).String()},
			Row{ID: id("j"), What: "webhook RSS, " + at, Figure: bytesQ(float64(s.webhookUse.RSS)),
				Note: fmt.Sprintf("one replica, once the controller was idle; peak %s; %s per ElasticIP: it caches every object of juneau's kinds and the Pods and Nodes",
					bytesQ(float64(s.webhookUse.PeakRSS)), bytesQ(float64(s.webhookUse.RSS)/float64(s.n)))},
		)
	}
	return rows
}

// shortSize writes 10000 as 10k.
func shortSize(n int) string {
	if n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// scalePlots draws each cost against N.
func scalePlots(e *env, steps []scaleStep) {
	line := func(get func(scaleStep) float64) []point {
		return points(steps, func(s scaleStep) int { return s.n }, get)
	}
	p := e.plots
	p.scale("scale-rate", "8. allocation rate against N", "Pods with automatic ElasticIPs", "allocations/s", true,
		map[string][]point{"controller": line(func(s scaleStep) float64 { return s.batch.rate() })})
	p.scale("scale-latency", "8. Pod created → address, against N", "Pods with automatic ElasticIPs", "seconds", true,
		map[string][]point{
			"p50": line(func(s scaleStep) float64 { return percentile(s.batch.latencies, 50).Seconds() }),
			"p99": line(func(s scaleStep) float64 { return percentile(s.batch.latencies, 99).Seconds() })})
	p.scale("scale-memory", "8. memory against N", "Pods with automatic ElasticIPs", "MiB", true,
		map[string][]point{
			"controller":                    line(func(s scaleStep) float64 { return float64(s.ctrl.RSS) / (1 << 20) }),
			"kube-apiserver":                line(func(s scaleStep) float64 { return float64(s.api.RSS) / (1 << 20) }),
			"etcd":                          line(func(s scaleStep) float64 { return float64(s.etcd.RSS) / (1 << 20) }),
			"kube-apiserver without juneau": line(func(s scaleStep) float64 { return float64(s.plainAPI.RSS) / (1 << 20) }),
			"etcd without juneau":           line(func(s scaleStep) float64 { return float64(s.plainEtcd.RSS) / (1 << 20) })})
	p.scale("scale-restart", "8. restarted controller → first allocation, against N", "Pods with automatic ElasticIPs", "seconds", true,
		map[string][]point{
			"first allocation": line(func(s scaleStep) float64 { return s.resume.Seconds() }),
			"caches synced":    line(func(s scaleStep) float64 { return s.synced.Seconds() })})
}
