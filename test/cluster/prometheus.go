package cluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/test/framework"
)

// A Prometheus for the cluster: the real server (hack/build-ops-tools.sh), run as a
// process in the control plane's network namespace, where it reaches the API server
// (Kubernetes service discovery), the Pod CIDRs (the controller's and webhook's
// metrics) and the Nodes (the agents' metrics on the host network). It listens on that
// namespace's loopback only; the test reaches it through a dial from inside.

// prometheusAddr is where Prometheus listens, inside the control plane's namespace.
const prometheusAddr = "127.0.0.1:9095"

// Prometheus is a running Prometheus.
type Prometheus struct {
	c    *Cluster
	proc *proc
	http *http.Client
}

// PrometheusKubeconfig is the kubeconfig Prometheus discovers targets with: the API
// server's address on the segment, as seen from the control plane's namespace.
func (c *Cluster) PrometheusKubeconfig() string { return c.run.path("kubeconfigs", "prometheus") }

// StartPrometheus starts Prometheus with config (a prometheus.yml; its Kubernetes
// service discovery should use PrometheusKubeconfig) and waits until it is ready.
// Stop ends it; the cluster's teardown ends it otherwise.
func (c *Cluster) StartPrometheus(ctx context.Context, config []byte) (*Prometheus, error) {
	bin, err := framework.OpsTool("prometheus")
	if err != nil {
		return nil, err
	}
	dir := c.run.path("prometheus")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cfg := c.run.path("prometheus", "prometheus.yml")
	if err := os.WriteFile(cfg, config, 0o644); err != nil {
		return nil, err
	}
	p, err := c.startInNS(ctx, c.CPNS, "prometheus", bin, "--config.file="+cfg,
		"--storage.tsdb.path="+c.run.path("prometheus", "data"), "--web.listen-address="+prometheusAddr)
	if err != nil {
		return nil, err
	}
	prom := &Prometheus{c: c, proc: p, http: c.controlPlaneHTTP(nil)}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if p.exited() {
			return false, p.failure()
		}
		_, last = prom.get(ctx, "/-/ready", nil)
		return last == nil, nil
	})
	if err != nil {
		prom.Stop()
		return nil, fmt.Errorf("prometheus not ready (last: %v): %w\n%s", last, err, tail(p.log, 20))
	}
	return prom, nil
}

// Stop ends Prometheus.
func (p *Prometheus) Stop() { p.proc.stop(10 * time.Second) }

// Log is the end of Prometheus's log.
func (p *Prometheus) Log() string { return tail(p.proc.log, 30) }

func (p *Prometheus) get(ctx context.Context, path string, q url.Values) ([]byte, error) {
	u := "http://" + prometheusAddr + path
	if q != nil {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	return body, err
}

// Sample is one series of an instant query's result.
type Sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// Query runs an instant query and returns its series.
func (p *Prometheus) Query(ctx context.Context, expr string) ([]Sample, error) {
	body, err := p.get(ctx, "/api/v1/query", url.Values{"query": {expr}})
	if err != nil {
		return nil, err
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string   `json:"resultType"`
			Result     []Sample `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", expr, r.Error)
	}
	return r.Data.Result, nil
}

// Alert is one alert of Prometheus's /api/v1/alerts.
type Alert struct {
	Labels   map[string]string `json:"labels"`
	State    string            `json:"state"` // pending, firing
	ActiveAt time.Time         `json:"activeAt"`
}

// Alerts lists the pending and firing alerts.
func (p *Prometheus) Alerts(ctx context.Context) ([]Alert, error) {
	body, err := p.get(ctx, "/api/v1/alerts", nil)
	if err != nil {
		return nil, err
	}
	var r struct {
		Data struct {
			Alerts []Alert `json:"alerts"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, err
	}
	return r.Data.Alerts, nil
}

// Targets counts the active scrape targets by job and health ("up", "down", "unknown").
func (p *Prometheus) Targets(ctx context.Context) (map[string]map[string]int, error) {
	body, err := p.get(ctx, "/api/v1/targets", url.Values{"state": {"active"}})
	if err != nil {
		return nil, err
	}
	var r struct {
		Data struct {
			ActiveTargets []struct {
				ScrapePool string `json:"scrapePool"`
				Health     string `json:"health"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, err
	}
	out := map[string]map[string]int{}
	for _, t := range r.Data.ActiveTargets {
		if out[t.ScrapePool] == nil {
			out[t.ScrapePool] = map[string]int{}
		}
		out[t.ScrapePool][t.Health]++
	}
	return out, nil
}

// MetricsReader is the ServiceAccount the test's scrapers use, as a user's Prometheus
// would: bound to the shipped ClusterRole juneau-metrics-reader, nothing else.
const MetricsReader = "metrics-reader"

// MetricsReaderToken makes sure the ServiceAccount MetricsReader exists in the default
// namespace with its binding to juneau-metrics-reader, and returns a token of it valid
// for two hours.
func (c *Cluster) MetricsReaderToken(ctx context.Context) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: MetricsReader, Namespace: metav1.NamespaceDefault}}
	if _, err := c.Kube.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: MetricsReader},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "juneau-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}},
	}
	if _, err := c.Kube.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	tr, err := c.Kube.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](7200)}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// Metrics reads https://<addr>/metrics as the test's Prometheus does: from the control
// plane's namespace, with a MetricsReader token, the component's self-signed
// certificate not verified.
func (c *Cluster) Metrics(ctx context.Context, addr string) (string, error) {
	token, err := c.MetricsReaderToken(ctx)
	if err != nil {
		return "", err
	}
	client := c.controlPlaneHTTP(&tls.Config{InsecureSkipVerify: true})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET https://%s/metrics: %s: %s", addr, resp.Status, body)
	}
	return string(body), err
}

// controlPlaneHTTP is an HTTP client that dials from the control plane's namespace,
// where Prometheus runs and the Pod CIDRs and Nodes are reachable.
func (c *Cluster) controlPlaneHTTP(tlsConfig *tls.Config) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   tlsConfig,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return inNamespace(c.CPNS, func() (net.Conn, error) {
				return (&net.Dialer{Timeout: 3 * time.Second}).DialContext(ctx, network, addr)
			})
		},
	}}
}
