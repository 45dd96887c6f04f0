package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/loutres/juneau/test/framework"
)

// requestKey is one series of the API server's apiserver_request_total.
type requestKey = framework.RequestKey

// requestCounts scrapes the API server of cp.
func requestCounts(e *env, cp *framework.ControlPlane) map[requestKey]float64 {
	counts, err := cp.RequestCounts(context.Background())
	if err != nil {
		e.Fatalf("%v", err)
	}
	return counts
}

// requestsPer summarises the requests made between two scrapes per unit of work (say,
// per allocation): the total, then each kind of request, most frequent first.
func requestsPer(before, after map[requestKey]float64, units int) string {
	type kind struct {
		key requestKey
		n   float64
	}
	var kinds []kind
	total := 0.0
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			kinds = append(kinds, kind{k, d})
			total += d
		}
	}
	slices.SortFunc(kinds, func(a, b kind) int {
		if a.n != b.n {
			if a.n > b.n {
				return -1
			}
			return 1
		}
		return strings.Compare(a.key.String(), b.key.String())
	})
	parts := make([]string, 0, len(kinds))
	for _, k := range kinds {
		if per := k.n / float64(units); per >= 0.05 {
			parts = append(parts, fmt.Sprintf("%s %.2f", k.key, per))
		}
	}
	return fmt.Sprintf("%.2f (%s)", total/float64(units), strings.Join(parts, ", "))
}
