package framework

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
	got := ParseRequestCounts(sampleMetrics)
	want := map[RequestKey]float64{
		{Verb: "POST", Resource: "allocationclaims", Code: "201"}: 500,
		{Verb: "POST", Resource: "allocationclaims", Code: "409"}: 250,
		{Verb: "PUT", Resource: "elasticips/status", Code: "200"}: 1000,
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
