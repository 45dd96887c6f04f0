package agent

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the node agent. A nil *Metrics records nothing.
type Metrics struct {
	mappings prometheus.Gauge
	duration prometheus.Histogram
	errors   prometheus.Counter
	podReady prometheus.Histogram
	drift    *prometheus.CounterVec
}

// Reasons of drift repairs (the reason label of juneau_node_drift_repairs_total).
const (
	// driftChanged: another process changed the table.
	driftChanged = "changed"
	// driftLost: change notifications were lost, so a change may have gone unseen.
	driftLost = "notifications_lost"
)

// Counts reads ARP counters (arp.Responder).
type Counts interface {
	Requests() uint64
	Replies() uint64
	Gratuitous() uint64
	// Drops counts unanswered frames by reason.
	Drops() map[string]uint64
}

// NewMetrics registers the agent's metrics on reg; arp may be nil.
func NewMetrics(reg prometheus.Registerer, arp Counts) (*Metrics, error) {
	m := &Metrics{
		mappings: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "juneau", Subsystem: "node", Name: "nat_mappings",
			Help: "ElasticIP to Pod IP mappings programmed on this node."}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "juneau", Subsystem: "node", Name: "sync_duration_seconds",
			Help: "Duration of datapath syncs.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "juneau", Subsystem: "node", Name: "sync_errors_total",
			Help: "Failed datapath syncs."}),
		drift: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "juneau", Subsystem: "node", Name: "drift_repairs_total",
			Help: "Full syncs made because another process changed juneau's nftables table (reason=changed) or change notifications were lost (reason=notifications_lost)."},
			[]string{"reason"}),
	}
	m.podReady = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "juneau", Subsystem: "node", Name: "pod_ready_seconds",
		Help:    "Time from a Pod's creation until this agent set its ElasticIP readiness gate True (Pods with the gate).",
		Buckets: prometheus.ExponentialBuckets(0.25, 2, 12)})
	for _, r := range []string{driftChanged, driftLost} {
		m.drift.WithLabelValues(r) // exported at 0 before the first repair
	}
	cols := []prometheus.Collector{m.mappings, m.duration, m.errors, m.podReady, m.drift}
	if arp != nil {
		cols = append(cols,
			prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "juneau", Subsystem: "node", Name: "arp_requests_total",
				Help: "ARP requests seen on the external interface."}, func() float64 { return float64(arp.Requests()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "juneau", Subsystem: "node", Name: "arp_replies_total",
				Help: "ARP replies sent for ElasticIPs."}, func() float64 { return float64(arp.Replies()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "juneau", Subsystem: "node", Name: "arp_gratuitous_total",
				Help: "Gratuitous ARP replies sent for ElasticIPs of networks with spec.gratuitousARP."}, func() float64 { return float64(arp.Gratuitous()) }),
			dropCollector{arp})
	}
	for _, c := range cols {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) observePodReady(d time.Duration) {
	if m != nil {
		m.podReady.Observe(d.Seconds())
	}
}

// dropCollector reports the ARP responder's unanswered frames by reason.
type dropCollector struct{ arp Counts }

var dropDesc = prometheus.NewDesc("juneau_node_arp_dropped_total",
	"ARP frames seen on the external interface and not answered, by reason (not_owned: a request for another address).", []string{"reason"}, nil)

func (dropCollector) Describe(ch chan<- *prometheus.Desc) { ch <- dropDesc }

func (c dropCollector) Collect(ch chan<- prometheus.Metric) {
	for reason, n := range c.arp.Drops() {
		ch <- prometheus.MustNewConstMetric(dropDesc, prometheus.CounterValue, float64(n), reason)
	}
}

func (m *Metrics) observeSync(d time.Duration, mappings int, err error) {
	if m == nil {
		return
	}
	m.duration.Observe(d.Seconds())
	if err != nil {
		m.errors.Inc()
		return
	}
	m.mappings.Set(float64(mappings))
}

func (m *Metrics) driftRepair(reason string) {
	if m == nil {
		return
	}
	m.drift.WithLabelValues(reason).Inc()
}
