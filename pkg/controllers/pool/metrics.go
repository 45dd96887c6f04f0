package pool

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"

	listers "github.com/loutres/juneau/pkg/generated/listers/juneau/v1alpha1"
)

// Collector exports the figures of every AddressPool's status as gauges labelled by
// pool. It reads the informer cache at scrape time, so it needs no updates of its own
// and shows the same numbers on every replica, leader or not.
type Collector struct {
	pools                       listers.AddressPoolLister
	total, allocated, available *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector makes the collector; register it on the registry of the process.
func NewCollector(pools listers.AddressPoolLister) *Collector {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("juneau", "address_pool", name), help, []string{"pool"}, nil)
	}
	return &Collector{
		pools:     pools,
		total:     desc("addresses", "Addresses of the AddressPool that automatic allocation can hand out, plus pinned network/broadcast addresses."),
		allocated: desc("allocated_addresses", "Addresses of the AddressPool reserved by AllocationClaims."),
		available: desc("available_addresses", "Addresses of the AddressPool still free for automatic allocation."),
	}
}

// Describe sends the descriptors of the gauges.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.total
	ch <- c.allocated
	ch <- c.available
}

// Collect sends one value of each gauge per pool.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	pools, err := c.pools.List(labels.Everything())
	if err != nil {
		return
	}
	for _, p := range pools {
		ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(p.Status.Total), p.Name)
		ch <- prometheus.MustNewConstMetric(c.allocated, prometheus.GaugeValue, float64(p.Status.Allocated), p.Name)
		ch <- prometheus.MustNewConstMetric(c.available, prometheus.GaugeValue, float64(p.Status.Available), p.Name)
	}
}
