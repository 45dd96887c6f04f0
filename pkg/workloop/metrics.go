package workloop

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// queueMetrics exports the workqueue metrics of client-go for every queue of the
// process, labelled by queue name, on the process's own registry (not client-go's
// global provider, so two registries never share a queue's figures).
type queueMetrics struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, workDuration      *prometheus.HistogramVec
	// syncErrors counts failed syncs by loop (controller) name.
	syncErrors *prometheus.CounterVec
}

// syncErrorCounter is what a queue metrics provider of NewQueueMetrics also offers:
// the failed-sync counter of one loop.
type syncErrorCounter interface {
	SyncErrors(name string) ErrorCounter
}

// SyncErrors is the counter of failed syncs of the loop (controller) name.
func (m *queueMetrics) SyncErrors(name string) ErrorCounter {
	return m.syncErrors.WithLabelValues(name)
}

// syncErrorsOf returns the failed-sync counter provider offers for name, if any.
func syncErrorsOf(provider workqueue.MetricsProvider, name string) ErrorCounter {
	if p, ok := provider.(syncErrorCounter); ok {
		return p.SyncErrors(name)
	}
	return nil
}

var _ workqueue.MetricsProvider = (*queueMetrics)(nil)

// NewQueueMetrics registers the workqueue metrics on reg and returns the provider to
// hand to the queues (Config.Metrics, SingleConfig.Metrics).
func NewQueueMetrics(reg prometheus.Registerer) (workqueue.MetricsProvider, error) {
	const ns, sub = "juneau", "workqueue"
	label := []string{"name"}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help}, label)
	}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help}, label)
	}
	histogram := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help,
			Buckets: prometheus.ExponentialBuckets(1e-6, 10, 10)}, label)
	}
	m := &queueMetrics{
		depth:        gauge("depth", "Keys waiting in the queue."),
		adds:         counter("adds_total", "Keys added to the queue."),
		latency:      histogram("queue_duration_seconds", "Time a key waits in the queue before it is processed."),
		workDuration: histogram("work_duration_seconds", "Time one key takes to process."),
		unfinished:   gauge("unfinished_work_seconds", "Seconds of work under way and not yet done; a growing value means a stuck worker."),
		longest:      gauge("longest_running_processor_seconds", "Seconds the longest running worker has been processing its key."),
		retries:      counter("retries_total", "Keys put back for a retry."),
		syncErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "reconcile_errors_total",
			Help: "Failed syncs (reconciles) by controller; the node agent's loop is node-agent."}, []string{"controller"}),
	}
	for _, c := range []prometheus.Collector{m.depth, m.adds, m.latency, m.workDuration, m.unfinished, m.longest, m.retries, m.syncErrors} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering workqueue metrics: %w", err)
		}
	}
	return m, nil
}

func (m *queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return m.depth.WithLabelValues(name)
}

func (m *queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return m.adds.WithLabelValues(name)
}

func (m *queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return m.latency.WithLabelValues(name)
}

func (m *queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return m.workDuration.WithLabelValues(name)
}

func (m *queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.unfinished.WithLabelValues(name)
}

func (m *queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.longest.WithLabelValues(name)
}

func (m *queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return m.retries.WithLabelValues(name)
}
