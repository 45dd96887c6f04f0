package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/loutres/juneau/test/framework"
)

// requestKey is one series of the API server's apiserver_request_total.
type requestKey struct {
	verb, resource, code string
}

func (k requestKey) String() string { return k.verb + " " + k.resource + " " + k.code }

var requestLine = regexp.MustCompile(`^apiserver_request_total\{(.*)\} ([0-9.e+]+)$`)
var labelPair = regexp.MustCompile(`(\w+)="([^"]*)"`)

// parseRequestCounts reads apiserver_request_total from the API server's metrics text,
// without WATCH requests (long-running, not work). The resource includes the
// subresource ("elasticips/status").
func parseRequestCounts(metrics string) map[requestKey]float64 {
	out := map[requestKey]float64{}
	for _, line := range strings.Split(metrics, "\n") {
		m := requestLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for _, p := range labelPair.FindAllStringSubmatch(m[1], -1) {
			labels[p[1]] = p[2]
		}
		if labels["verb"] == "WATCH" {
			continue
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			continue
		}
		res := labels["resource"]
		if s := labels["subresource"]; s != "" {
			res += "/" + s
		}
		out[requestKey{verb: labels["verb"], resource: res, code: labels["code"]}] += v
	}
	return out
}

// requestCounts scrapes the API server of cp.
func requestCounts(e *env, cp *framework.ControlPlane) map[requestKey]float64 {
	raw, err := cp.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		e.Fatalf("API server metrics: %v", err)
	}
	return parseRequestCounts(string(raw))
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
