package main

import (
	"slices"
	"time"
)

// percentile returns the p-th percentile (0 < p ≤ 100) of samples by the nearest-rank
// method; zero for no samples. samples is not modified.
func percentile(samples []time.Duration, p float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	rank := int(float64(len(s))*p/100 + 0.999999999)
	return s[min(max(rank, 1), len(s))-1]
}

// median of float values; zero for none.
func median(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	s := slices.Clone(values)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// medianDuration is median for durations.
func medianDuration(values []time.Duration) time.Duration {
	f := make([]float64, len(values))
	for i, v := range values {
		f[i] = float64(v)
	}
	return time.Duration(median(f))
}
