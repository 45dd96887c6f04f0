package main

import (
	"testing"
	"time"
)

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

func TestPercentile(t *testing.T) {
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100..1, unsorted
	}
	for _, tc := range []struct {
		name    string
		samples []time.Duration
		p       float64
		want    time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one sample", ms(7), 99, 7 * time.Millisecond},
		{"median of odd", ms(3, 1, 2), 50, 2 * time.Millisecond},
		{"p50 of 100", ms(hundred...), 50, 50 * time.Millisecond},
		{"p99 of 100", ms(hundred...), 99, 99 * time.Millisecond},
		{"p100 is the maximum", ms(hundred...), 100, 100 * time.Millisecond},
		{"p99 of 10 is the maximum", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := append([]time.Duration(nil), tc.samples...)
			if got := percentile(tc.samples, tc.p); got != tc.want {
				t.Errorf("percentile(%v) = %v, want %v", tc.p, got, tc.want)
			}
			for i := range before {
				if before[i] != tc.samples[i] {
					t.Fatal("percentile reordered its input")
				}
			}
		})
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{5}, 5},
		{[]float64{9, 1, 5}, 5},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if got := medianDuration(ms(30, 10, 20)); got != 20*time.Millisecond {
		t.Errorf("medianDuration = %v", got)
	}
}
