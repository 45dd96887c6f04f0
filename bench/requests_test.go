package main

import "testing"

const sampleMetrics = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="juneau.loutres.me",resource="allocationclaims",scope="resource",subresource="",verb="POST",version="v1alpha1"} 500
apiserver_request_total{code="409",component="apiserver",dry_run="",group="juneau.loutres.me",resource="allocationclaims",scope="resource",subresource="",verb="POST",version="v1alpha1"} 250
apiserver_request_total{code="200",component="apiserver",dry_run="",group="juneau.loutres.me",resource="elasticips",scope="resource",subresource="status",verb="PUT",version="v1alpha1"} 1000
apiserver_request_total{code="200",component="apiserver",dry_run="",group="juneau.loutres.me",resource="elasticips",scope="namespace",subresource="",verb="WATCH",version="v1alpha1"} 7
apiserver_request_duration_seconds_count{verb="PUT"} 3
`

func TestParseRequestCounts(t *testing.T) {
	got := parseRequestCounts(sampleMetrics)
	want := map[requestKey]float64{
		{"POST", "allocationclaims", "201"}: 500,
		{"POST", "allocationclaims", "409"}: 250,
		{"PUT", "elasticips/status", "200"}: 1000,
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%v = %v, want %v", k, got[k], v)
		}
	}
}

func TestRequestsPer(t *testing.T) {
	before := map[requestKey]float64{{"POST", "allocationclaims", "201"}: 100}
	after := map[requestKey]float64{
		{"POST", "allocationclaims", "201"}: 600,
		{"POST", "allocationclaims", "409"}: 250,
		{"PUT", "elasticips/status", "200"}: 500,
		{"GET", "addresspools", "200"}:      1, // 0.002 per unit: left out of the list
	}
	got := requestsPer(before, after, 500)
	want := "2.50 (POST allocationclaims 201 1.00, PUT elasticips/status 200 1.00, POST allocationclaims 409 0.50)"
	if got != want {
		t.Errorf("requestsPer = %q\nwant          %q", got, want)
	}
}
