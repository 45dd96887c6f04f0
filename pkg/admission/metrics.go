package admission

import (
	"net/http"
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Metrics of the webhook: requests by kind, verdict and rule, and their latency. A nil
// *Metrics records nothing.
type Metrics struct {
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	refused   *prometheus.CounterVec
	liveReads *prometheus.CounterVec
}

// NewMetrics registers the webhook's metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "juneau", Subsystem: "webhook", Name: "requests_total",
			Help: "Admission reviews answered, by kind, verdict (allowed, denied, error) and rule: the field of the first error " +
				"(list indexes as [*]) for an invalid object, the status reason otherwise, empty when allowed."},
			[]string{"kind", "verdict", "rule"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "juneau", Subsystem: "webhook", Name: "request_duration_seconds",
			Help: "Time to judge one admission review, by kind.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)},
			[]string{"kind"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "juneau", Subsystem: "webhook", Name: "refused_requests_total",
			Help: "Requests refused before they were judged: too_many_in_flight (429), too_many_from_source (429: one client address holds its share, half the bound), too_large (413)."},
			[]string{"reason"}),
		liveReads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "juneau", Subsystem: "webhook", Name: "live_reads_total",
			Help: "Reads of the API server by reviews, by kind and outcome: read (within the budget), shared (a review waiting " +
				"for a list of the kind already asked for), skipped (budget spent)."},
			[]string{"kind", "outcome"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.refused, m.liveReads} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

var listIndex = regexp.MustCompile(`\[[0-9]+\]`)

// observe records one answered review.
func (m *Metrics) observe(kind string, resp *admissionv1.AdmissionResponse, took time.Duration) {
	if m == nil || resp == nil {
		return
	}
	verdict, rule := verdictOf(resp.Result, resp.Allowed)
	m.requests.WithLabelValues(kind, verdict, rule).Inc()
	m.latency.WithLabelValues(kind).Observe(took.Seconds())
}

// verdictOf names the outcome of a review for the metrics: errors are the webhook's
// own failures (5xx), denials the object's.
func verdictOf(st *metav1.Status, allowed bool) (verdict, rule string) {
	if allowed || st == nil {
		return "allowed", ""
	}
	if st.Code >= http.StatusInternalServerError {
		return "error", string(st.Reason)
	}
	if st.Reason == metav1.StatusReasonInvalid && st.Details != nil && len(st.Details.Causes) > 0 {
		return "denied", listIndex.ReplaceAllString(st.Details.Causes[0].Field, "[*]")
	}
	return "denied", string(st.Reason)
}

// refusedRequest records a request refused before it was judged.
func (m *Metrics) refusedRequest(reason string) {
	if m != nil {
		m.refused.WithLabelValues(reason).Inc()
	}
}

// liveRead records a read of the API server a review asked for.
func (m *Metrics) liveRead(kind, outcome string) {
	if m != nil {
		m.liveReads.WithLabelValues(kind, outcome).Inc()
	}
}
