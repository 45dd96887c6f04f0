package elasticip

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	listers "github.com/loutres/juneau/pkg/generated/listers/juneau/v1alpha1"
)

var (
	phaseDesc = prometheus.NewDesc("juneau_elasticips",
		"ElasticIPs by status phase (Pending, Available, Attached, Error; empty before the controller first wrote the status).",
		[]string{"phase"}, nil)
	waitingDesc = prometheus.NewDesc("juneau_elasticips_waiting_for_attach",
		"ElasticIPs that have a user (status.attachment) but whose Attached condition is not True: their user cannot carry traffic yet.",
		nil, nil)
)

// allPhases are exported (as 0) even when no ElasticIP is in them, so that alerts and
// dashboards see a series from the start.
var allPhases = []v1alpha1.ElasticIPPhase{v1alpha1.ElasticIPPending, v1alpha1.ElasticIPAvailable,
	v1alpha1.ElasticIPAttached, v1alpha1.ElasticIPError}

// StateCollector reports the ElasticIPs of the informer cache at scrape time: how many
// are in each phase, and how many wait to be attached. Register it only where the
// cache is synced (the leader).
type StateCollector struct{ lister listers.ElasticIPLister }

// NewStateCollector returns a collector over lister.
func NewStateCollector(lister listers.ElasticIPLister) *StateCollector {
	return &StateCollector{lister: lister}
}

var _ prometheus.Collector = (*StateCollector)(nil)

func (c *StateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- phaseDesc
	ch <- waitingDesc
}

func (c *StateCollector) Collect(ch chan<- prometheus.Metric) {
	eips, err := c.lister.List(labels.Everything())
	if err != nil {
		return
	}
	s := CountStates(eips)
	for phase, n := range s.Phases {
		ch <- prometheus.MustNewConstMetric(phaseDesc, prometheus.GaugeValue, float64(n), string(phase))
	}
	ch <- prometheus.MustNewConstMetric(waitingDesc, prometheus.GaugeValue, float64(s.WaitingForAttach))
}

// States are the counts StateCollector exports.
type States struct {
	Phases           map[v1alpha1.ElasticIPPhase]int
	WaitingForAttach int
}

// CountStates counts ElasticIPs by phase (every phase present, 0 if none) and those
// with a user whose Attached condition is not True.
func CountStates(eips []*v1alpha1.ElasticIP) States {
	s := States{Phases: make(map[v1alpha1.ElasticIPPhase]int, len(allPhases))}
	for _, p := range allPhases {
		s.Phases[p] = 0
	}
	for _, e := range eips {
		s.Phases[e.Status.Phase]++
		if e.Status.Attachment != nil && !meta.IsStatusConditionTrue(e.Status.Conditions, v1alpha1.ConditionAttached) {
			s.WaitingForAttach++
		}
	}
	return s
}
