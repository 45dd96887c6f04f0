package framework

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// RequestKey is one series of the API server's apiserver_request_total.
type RequestKey struct {
	Verb, Resource, Code string
}

func (k RequestKey) String() string { return k.Verb + " " + k.Resource + " " + k.Code }

// Mutating reports whether the request changed (or tried to change) an object.
func (k RequestKey) Mutating() bool {
	switch k.Verb {
	case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
		return true
	}
	return false
}

var requestLine = regexp.MustCompile(`^apiserver_request_total\{(.*)\} ([0-9.e+]+)$`)
var labelPair = regexp.MustCompile(`(\w+)="([^"]*)"`)

// ParseRequestCounts reads apiserver_request_total from the API server's metrics text,
// without WATCH requests (long-running, not work). The resource includes the
// subresource ("elasticips/status").
func ParseRequestCounts(metrics string) map[RequestKey]float64 {
	out := map[RequestKey]float64{}
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
		out[RequestKey{Verb: labels["verb"], Resource: res, Code: labels["code"]}] += v
	}
	return out
}

// RequestCounts scrapes the API server's request counters (as admin). They count from
// the API server's start.
func (cp *ControlPlane) RequestCounts(ctx context.Context) (map[RequestKey]float64, error) {
	raw, err := cp.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("API server metrics: %w", err)
	}
	return ParseRequestCounts(string(raw)), nil
}
