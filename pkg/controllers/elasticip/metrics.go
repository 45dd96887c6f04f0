package elasticip

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loutres/juneau/pkg/workloop"
)

// Metrics of the ElasticIP controller. A nil *Metrics records nothing.
type Metrics struct {
	allocations   prometheus.Counter
	toAllocated   prometheus.Histogram
	orphanClaims  prometheus.Counter
	reconcileErrs prometheus.Counter
	attach        prometheus.Histogram
}

// NewMetrics registers the controller's metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		allocations: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "juneau", Subsystem: "elasticip", Name: "allocations_total",
			Help: "Addresses reserved for ElasticIPs (AllocationClaims created).",
		}),
		toAllocated: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "juneau", Subsystem: "elasticip", Name: "allocation_duration_seconds",
			Help:    "Time from an ElasticIP's creation to the status write that first shows its address reserved (Allocated True).",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}),
		orphanClaims: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "juneau", Subsystem: "elasticip", Name: "orphan_claims_deleted_total",
			Help: "AllocationClaims deleted because their ElasticIP no longer exists.",
		}),
		reconcileErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "juneau", Subsystem: "elasticip", Name: "sync_errors_total",
			Help: "Failed ElasticIP and claim syncs.",
		}),
		attach: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "juneau", Subsystem: "elasticip", Name: "attach_seconds",
			Help:    "Time from an ElasticIP's creation until its Attached condition turned True (its user can carry traffic).",
			Buckets: prometheus.ExponentialBuckets(0.25, 2, 12),
		}),
	}
	for _, col := range []prometheus.Collector{m.allocations, m.toAllocated, m.orphanClaims, m.reconcileErrs, m.attach} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) errorCounter() workloop.ErrorCounter {
	if m == nil {
		return nil
	}
	return m.reconcileErrs
}

func (m *Metrics) allocated() {
	if m != nil {
		m.allocations.Inc()
	}
}

func (m *Metrics) allocatedAfter(d time.Duration) {
	if m != nil {
		m.toAllocated.Observe(d.Seconds())
	}
}

func (m *Metrics) attached(d time.Duration) {
	if m != nil {
		m.attach.Observe(d.Seconds())
	}
}

func (m *Metrics) orphan() {
	if m != nil {
		m.orphanClaims.Inc()
	}
}
