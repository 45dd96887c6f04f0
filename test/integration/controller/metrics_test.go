package controller

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/framework"
)

var servingAddr = regexp.MustCompile(`Serving metrics and health.*address="([^"]+)"`)

// metricsURL reads the address the component logged it serves metrics on.
func metricsURL(t *testing.T, c *framework.Component) string {
	t.Helper()
	var addr string
	framework.Eventually(t, "metrics address in the log", func(context.Context) (bool, string) {
		m := servingAddr.FindStringSubmatch(c.Log())
		if m != nil {
			addr = m[1]
		}
		return m != nil, c.LogTail(5)
	})
	return "http://" + addr
}

func get(ctx context.Context, url string) (int, string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestMetricsAndHealth(t *testing.T) {
	cp := framework.Shared(t)
	ctrl := startController(t, cp, "controller")
	ns := cp.NewNamespace(t, "metrics")
	network(t, cp, "metrics-net", v1alpha1.AdvertiseARP, "10.225.56.0/30")
	createEIP(t, cp, ns, "e", "metrics-net", "")
	waitEIP(t, cp, ns, "e", "Available", phaseReason(v1alpha1.ElasticIPAvailable, v1alpha1.ConditionAllocated, v1alpha1.ReasonAllocated))

	base := metricsURL(t, ctrl)
	for _, path := range []string{"/healthz", "/readyz"} {
		framework.Eventually(t, path, func(ctx context.Context) (bool, string) {
			code, body := get(ctx, base+path)
			return code == http.StatusOK, body
		})
	}
	want := []string{
		`juneau_elasticip_allocations_total`,
		// The routine allocation is a metric, not an Event.
		`juneau_elasticip_allocation_duration_seconds_count`,
		`juneau_address_pool_addresses{pool="metrics-net-pool"} 2`,
		`juneau_address_pool_allocated_addresses{pool="metrics-net-pool"} 1`,
		// Every controller's work queue reports on the same registry.
		`juneau_workqueue_adds_total{name="elasticip"}`,
		`juneau_workqueue_depth{name="networkinterface"}`,
		`juneau_workqueue_work_duration_seconds_count{name="addresspool"}`,
	}
	var body string
	framework.Eventually(t, "metrics", func(ctx context.Context) (bool, string) {
		_, body = get(ctx, base+"/metrics")
		for _, w := range want {
			if !strings.Contains(body, w) {
				return false, body
			}
		}
		return true, body
	})
	evs, err := cp.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=e"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		t.Errorf("Event %s %s %q for a routine allocation", e.Type, e.Reason, e.Message)
	}
}
