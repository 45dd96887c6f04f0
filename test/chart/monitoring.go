package chart

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/yaml"
)

// Query is one query of a dashboard panel.
type Query struct {
	Panel, Expr string
}

// DashboardQueries reads every panel query of the Grafana dashboard at path.
func DashboardQueries(path string) ([]Query, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []Query
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			return nil, fmt.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			out = append(out, Query{Panel: p.Title, Expr: tg.Expr})
		}
	}
	return out, nil
}

// Alert is one alerting rule of a rule file.
type Alert struct {
	Name string `json:"alert"`
	Expr string `json:"expr"`
	For  string `json:"for"`
}

// ForDuration is the rule's `for` window (0 when absent).
func (a Alert) ForDuration() (time.Duration, error) {
	if a.For == "" {
		return 0, nil
	}
	return time.ParseDuration(a.For)
}

// Alerts reads the alerting rules of the rule file at path.
func Alerts(path string) ([]Alert, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f struct {
		Groups []struct {
			Rules []Alert `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []Alert
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Name != "" {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// PrometheusConfig is a Prometheus configuration made of juneau's shipped parts:
// the scrape jobs of manifests/monitoring/scrape-config.yaml, each discovering Pods
// through the API server named by kubeconfig (as a Prometheus outside the cluster
// does), scraping with the bearer token in tokenFile (in place of the in-cluster
// ServiceAccount token), and the rule file manifests/monitoring/alerts.yaml; scraped
// and evaluated every interval.
func PrometheusConfig(root string, interval time.Duration, kubeconfig, tokenFile string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(root, "manifests", "monitoring", "scrape-config.yaml"))
	if err != nil {
		return nil, err
	}
	var scrape struct {
		ScrapeConfigs []map[string]any `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal(data, &scrape); err != nil {
		return nil, err
	}
	for _, job := range scrape.ScrapeConfigs {
		sds, _ := job["kubernetes_sd_configs"].([]any)
		for _, sd := range sds {
			sd.(map[string]any)["kubeconfig_file"] = kubeconfig
		}
		auth, ok := job["authorization"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("scrape job %v has no authorization", job["job_name"])
		}
		auth["credentials_file"] = tokenFile
	}
	cfg := map[string]any{
		"global": map[string]any{
			"scrape_interval":     interval.String(),
			"scrape_timeout":      (interval * 4 / 5).String(),
			"evaluation_interval": interval.String(),
		},
		"rule_files":     []string{filepath.Join(root, "manifests", "monitoring", "alerts.yaml")},
		"scrape_configs": scrape.ScrapeConfigs,
	}
	return yaml.Marshal(cfg)
}
