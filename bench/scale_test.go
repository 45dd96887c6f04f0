package main

import (
	"math"
	"testing"
)

const admissionMetrics = `# HELP apiserver_admission_webhook_admission_duration_seconds x
# TYPE apiserver_admission_webhook_admission_duration_seconds histogram
apiserver_admission_webhook_admission_duration_seconds_bucket{name="a",le="0.005"} 1
apiserver_admission_webhook_admission_duration_seconds_bucket{name="a",le="0.025"} 8
apiserver_admission_webhook_admission_duration_seconds_bucket{name="a",le="+Inf"} 10
apiserver_admission_webhook_admission_duration_seconds_sum{name="a"} 1
apiserver_admission_webhook_admission_duration_seconds_count{name="a"} 10
apiserver_admission_webhook_admission_duration_seconds_bucket{name="b",le="0.005"} 0
apiserver_admission_webhook_admission_duration_seconds_bucket{name="b",le="0.025"} 0
apiserver_admission_webhook_admission_duration_seconds_bucket{name="b",le="+Inf"} 90
apiserver_admission_webhook_admission_duration_seconds_sum{name="b"} 1
apiserver_admission_webhook_admission_duration_seconds_count{name="b"} 90
`

func TestParseHistogramSumsSeries(t *testing.T) {
	h, err := parseHistogram(admissionMetrics, "apiserver_admission_webhook_admission_duration_seconds")
	if err != nil {
		t.Fatal(err)
	}
	if got := h.count[len(h.count)-1]; got != 100 {
		t.Fatalf("total %v, want 100 (the +Inf buckets of both series)", got)
	}
	if q := h.quantile(0.05); q != 0.025 {
		t.Errorf("p5 %v, want 0.025", q)
	}
	if q := h.quantile(0.5); !math.IsInf(q, 1) {
		t.Errorf("p50 %v, want +Inf", q)
	}
	before, _ := parseHistogram(admissionMetrics, "apiserver_admission_webhook_admission_duration_seconds")
	if d := h.since(before); !math.IsNaN(d.quantile(0.5)) {
		t.Errorf("no observation since: p50 %v, want NaN", d.quantile(0.5))
	}
}

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("10000, 30000,100000")
	if err != nil || len(got) != 3 || got[2] != 100000 {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "10,5", "0", "x"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
