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
}

// Counts reads ARP or NDP counters (arp.Responder, ndp.Responder).
type Counts interface {
	Requests() uint64
	Replies() uint64
}

// ARPCounts are the ARP replier's counters: its Counts and the gratuitous replies.
type ARPCounts interface {
	Counts
	Gratuitous() uint64
}

// NewMetrics registers the agent's metrics on reg; arp and ndp may be nil.
func NewMetrics(reg prometheus.Registerer, arp ARPCounts, ndp Counts) (*Metrics, error) {
	m := &Metrics{
		mappings: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "juneau", Subsystem: "node", Name: "nat_mappings",
			Help: "ElasticIP to Pod IP mappings programmed on this node."}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "juneau", Subsystem: "node", Name: "sync_duration_seconds",
			Help: "Duration of datapath syncs.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "juneau", Subsystem: "node", Name: "sync_errors_total",
			Help: "Failed datapath syncs."}),
	}
	cols := []prometheus.Collector{m.mappings, m.duration, m.errors}
	if arp != nil {
		cols = append(cols,
			prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "juneau", Subsystem: "node", Name: "arp_requests_total",
				Help: "ARP requests seen on the external interface."}, func() float64 { return float64(arp.Requests()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "juneau", Subsystem: "node", Name: "arp_replies_total",
				Help: "ARP replies sent for ElasticIPs."}, func() float64 { return float64(arp.Replies()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "juneau", Subsystem: "node", Name: "arp_gratuitous_total",
				Help: "Gratuitous ARP replies sent for ElasticIPs of networks with spec.gratuitousARP."}, func() float64 { return float64(arp.Gratuitous()) }))
	}
	if ndp != nil {
		cols = append(cols,
			prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "juneau", Subsystem: "node", Name: "ndp_solicitations_total",
				Help: "IPv6 neighbor solicitations seen on the external interface."}, func() float64 { return float64(ndp.Requests()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "juneau", Subsystem: "node", Name: "ndp_advertisements_total",
				Help: "IPv6 neighbor advertisements sent for ElasticIPs."}, func() float64 { return float64(ndp.Replies()) }))
	}
	for _, c := range cols {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
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
