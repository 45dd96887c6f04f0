package agent

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/node/bgp"
)

// Metrics of the node agent. A nil *Metrics records nothing.
type Metrics struct {
	mappings prometheus.Gauge
	duration prometheus.Histogram
	errors   prometheus.Counter
	podReady prometheus.Histogram
	drift    *prometheus.CounterVec
	ignored  *prometheus.CounterVec
	sessions *prometheus.GaugeVec
	prefixes prometheus.Gauge
}

// Reasons of drift repairs (the reason label of juneau_node_drift_repairs_total).
const (
	// driftChanged: another process changed the table.
	driftChanged = "changed"
	// driftLost: change notifications were lost, so a change may have gone unseen.
	driftLost = "notifications_lost"
)

// Reasons of update events that start no sync (the reason label of
// juneau_node_updates_ignored_total).
const (
	// ignoredUnchanged: nothing the caches keep changed (a Node's heartbeat).
	ignoredUnchanged = "unchanged"
	// ignoredOwnWrite: the echo of the agent's own write.
	ignoredOwnWrite = "own_write"
)

// Counts reads ARP or NDP counters (arp.Responder, ndp.Responder).
type Counts interface {
	Requests() uint64
	Replies() uint64
}

// ARPCounts are the ARP replier's counters: its Counts and the gratuitous replies.
type ARPCounts interface {
	Counts
	Gratuitous() uint64
	// Drops counts unanswered frames by reason.
	Drops() map[string]uint64
	// Path says where requests are answered: "kernel", "socket", or "" while
	// not running (docs/arp.md#replies-in-the-kernel).
	Path() string
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
		drift: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "juneau", Subsystem: "node", Name: "drift_repairs_total",
			Help: "Full syncs made because another process changed juneau's nftables table (reason=changed) or change notifications were lost (reason=notifications_lost)."},
			[]string{"reason"}),
		ignored: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "juneau", Subsystem: "node", Name: "updates_ignored_total",
			Help: "Update events that started no sync: nothing kept changed (reason=unchanged), or the watch echoed the agent's own write (reason=own_write)."},
			[]string{"reason"}),
		sessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "juneau", Subsystem: "node", Name: "bgp_sessions",
			Help: "BGP sessions of this node by state (Established, Connecting, or the last error)."}, []string{"state"}),
		prefixes: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "juneau", Subsystem: "node", Name: "bgp_prefixes_announced",
			Help: "ElasticIP /32s this node announces to its BGP peers."}),
	}
	m.podReady = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "juneau", Subsystem: "node", Name: "pod_ready_seconds",
		Help:    "Time from a Pod's creation until this agent set its ElasticIP readiness gate True (Pods with the gate).",
		Buckets: prometheus.ExponentialBuckets(0.25, 2, 12)})
	for _, r := range []string{driftChanged, driftLost} {
		m.drift.WithLabelValues(r) // exported at 0 before the first repair
	}
	for _, r := range []string{ignoredUnchanged, ignoredOwnWrite} {
		m.ignored.WithLabelValues(r)
	}
	cols := []prometheus.Collector{m.mappings, m.duration, m.errors, m.podReady, m.drift, m.ignored, m.sessions, m.prefixes}
	if arp != nil {
		cols = append(cols,
			prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "juneau", Subsystem: "node", Name: "arp_requests_total",
				Help: "ARP requests seen on the external interface."}, func() float64 { return float64(arp.Requests()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "juneau", Subsystem: "node", Name: "arp_replies_total",
				Help: "ARP replies sent for ElasticIPs."}, func() float64 { return float64(arp.Replies()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "juneau", Subsystem: "node", Name: "arp_gratuitous_total",
				Help: "Gratuitous ARP replies sent for ElasticIPs of networks with spec.gratuitousARP."}, func() float64 { return float64(arp.Gratuitous()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "juneau", Subsystem: "node", Name: "arp_kernel_path",
				Help: "1 while ARP requests are answered in the kernel (TCX program), 0 while from user space (raw socket) or not at all."},
				func() float64 {
					if arp.Path() == "kernel" {
						return 1
					}
					return 0
				}),
			dropCollector{arp})
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

func (m *Metrics) observePodReady(d time.Duration) {
	if m != nil {
		m.podReady.Observe(d.Seconds())
	}
}

// dropCollector reports the ARP responder's unanswered frames by reason.
type dropCollector struct{ arp ARPCounts }

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

// allSessionStates are every value of the state label, so each is exported (as 0) before
// it first happens.
var allSessionStates = []v1alpha1.BGPSessionState{v1alpha1.BGPSessionEstablished, v1alpha1.BGPSessionConnecting,
	v1alpha1.BGPSessionRefused, v1alpha1.BGPSessionWrongASN, v1alpha1.BGPSessionAuthenticationFailed,
	v1alpha1.BGPSessionUnreachable, v1alpha1.BGPSessionFailed}

func (m *Metrics) observeBGP(st bgp.Status) {
	if m == nil {
		return
	}
	count := map[v1alpha1.BGPSessionState]int{}
	for _, p := range st.Peers {
		count[p.State]++
	}
	for _, s := range allSessionStates {
		m.sessions.WithLabelValues(string(s)).Set(float64(count[s]))
	}
	m.prefixes.Set(float64(len(st.Announced)))
}

func (m *Metrics) ignoredUpdate(reason string) {
	if m == nil {
		return
	}
	m.ignored.WithLabelValues(reason).Inc()
}

func (m *Metrics) driftRepair(reason string) {
	if m == nil {
		return
	}
	m.drift.WithLabelValues(reason).Inc()
}
