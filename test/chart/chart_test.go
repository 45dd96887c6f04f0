package chart

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/loutres/juneau/test/framework"
	"github.com/loutres/juneau/test/require"
)

func repoRoot(t *testing.T) string { return framework.RepoRootOf(t) }

func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := framework.OpsTool(name)
	if err != nil {
		require.Unmet(t, "%v", err)
	}
	return p
}

// run runs a command and returns its stdout; stderr goes into the error.
func run(t *testing.T, dir string, argv ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s: %w\n%s%s", strings.Join(argv, " "), err, out.String(), errOut.String())
	}
	return out.String(), nil
}

// helmTemplate renders the chart as `helm install` would into juneau-system, CRDs
// included, with extra arguments (--set ...).
func helmTemplate(t *testing.T, extra ...string) map[string]*unstructured.Unstructured {
	t.Helper()
	root := repoRoot(t)
	args := append([]string{tool(t, "helm"), "template", "juneau", "charts/juneau", "--namespace", "juneau-system", "--include-crds"}, extra...)
	out, err := run(t, root, args...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Objects([]byte(out))
	if err != nil {
		t.Fatalf("decoding helm template: %v", err)
	}
	return objs
}

// TestChartRendersTheKustomizeManifests: with default values the chart renders exactly
// the objects of `kubectl kustomize manifests/`, each with Helm's labels added and
// otherwise equal, field by field.
func TestChartRendersTheKustomizeManifests(t *testing.T) {
	bins, err := framework.FindBinaries()
	if err != nil {
		require.Unmet(t, "%v", err)
	}
	chart := helmTemplate(t)
	out, err := run(t, repoRoot(t), bins.Kubectl(), "kustomize", "manifests/")
	if err != nil {
		t.Fatal(err)
	}
	kust, err := Objects([]byte(out))
	if err != nil {
		t.Fatalf("decoding kubectl kustomize: %v", err)
	}
	if m := Missing(kust, chart); len(m) > 0 {
		t.Errorf("the chart does not render %v", m)
	}
	if m := Missing(chart, kust); len(m) > 0 {
		t.Errorf("the chart renders objects the manifests do not have: %v", m)
	}
	for _, k := range SortedKeys(kust) {
		c, ok := chart[k]
		if !ok {
			continue
		}
		if c.GetKind() != "CustomResourceDefinition" {
			if missing := HasLabels(c); missing != "" {
				t.Errorf("%s: Helm labels %s missing", k, missing)
			}
		}
		Normalize(c)
		if d := cmp.Diff(kust[k].Object, c.Object); d != "" {
			t.Errorf("%s differs between kubectl kustomize manifests/ (-) and the chart (+):\n%s", k, d)
		}
	}
	t.Logf("%d objects compared", len(kust))
}

// TestChartValues: each value lands where it says, and leaves the rest as it was.
func TestChartValues(t *testing.T) {
	objs := helmTemplate(t,
		"--set", "image.repository=registry.example/juneau", "--set", "image.tag=v0.2.0",
		"--set", "controller.replicas=3", "--set", "controller.logVerbosity=4",
		"--set", "controller.extraArgs={--workers=8}",
		"--set", "controller.nodeSelector.role=infra",
		"--set", "webhook.failurePolicy=Ignore", "--set", "webhook.timeoutSeconds=9", "--set", "webhook.podsTimeoutSeconds=8",
		"--set", "webhook.priorityClassName=system-cluster-critical",
		"--set", "node.nodeSelector.juneau=yes", "--set", "node.tolerations=null",
		"--set", "node.extraArgs={--cluster-cidr=10.244.0.0/16}",
		"--set", "node.resources.limits.memory=1Gi",
		"--set", "metrics.nodePort=19091", "--set", "metrics.podAnnotations=true",
		"--set", "monitoring.rules=true", "--set", "monitoring.dashboard=true",
		"--set", "namespace.create=false", "--set", "node.namespace=edge-node")
	get := func(key string, fields ...string) any {
		t.Helper()
		o, ok := objs[key]
		if !ok {
			t.Fatalf("%s not rendered", key)
		}
		v, _, err := unstructured.NestedFieldNoCopy(o.Object, fields...)
		if err != nil {
			t.Fatalf("%s %v: %v", key, fields, err)
		}
		return v
	}
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	const (
		ctrl = "apps/v1 Deployment juneau-system/juneau-controller"
		wh   = "apps/v1 Deployment juneau-system/juneau-webhook"
		ds   = "apps/v1 DaemonSet edge-node/juneau-node"
		vwc  = "admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration /juneau-webhook"
	)
	for _, c := range []struct {
		key    string
		fields []string
		want   string
	}{
		{ctrl, []string{"spec", "replicas"}, `3`},
		{ctrl, []string{"spec", "template", "spec", "nodeSelector"}, `{"role":"infra"}`},
		{ctrl, []string{"spec", "template", "spec", "priorityClassName"}, `"system-cluster-critical"`},
		{ctrl, []string{"spec", "template", "metadata", "annotations", "prometheus.io/port"}, `"9090"`},
		{wh, []string{"spec", "template", "spec", "priorityClassName"}, `"system-cluster-critical"`},
		{ds, []string{"spec", "template", "spec", "nodeSelector"}, `{"juneau":"yes"}`},
		{ds, []string{"spec", "template", "spec", "tolerations"}, `null`},
		{ds, []string{"spec", "template", "metadata", "annotations", "prometheus.io/port"}, `"19091"`},
		{vwc, []string{"webhooks"}, ""},
	} {
		if c.want == "" {
			continue
		}
		if got := js(get(c.key, c.fields...)); got != c.want {
			t.Errorf("%s %s: %s, want %s", c.key, strings.Join(c.fields, "."), got, c.want)
		}
	}
	containers := func(key string) []any {
		return get(key, "spec", "template", "spec", "containers").([]any)
	}
	args := func(key string, i int) string { return js(containers(key)[i].(map[string]any)["args"]) }
	if a := args(ctrl, 0); !strings.HasSuffix(a, `"-v=4","--workers=8"]`) {
		t.Errorf("controller args %s, want -v=4 then the extra --workers=8 last", a)
	}
	if a := args(ds, 0); !strings.Contains(a, `"--metrics-bind-address=[$(NODE_IP)]:19091"`) || !strings.HasSuffix(a, `"--cluster-cidr=10.244.0.0/16"]`) {
		t.Errorf("agent args %s, want the metrics port 19091 and the extra --cluster-cidr last", a)
	}
	agent := containers(ds)[0].(map[string]any)
	if got := js(agent["resources"]); got != `{"limits":{"memory":"1Gi"},"requests":{"cpu":"50m","memory":"64Mi"}}` {
		t.Errorf("agent resources %s", got)
	}
	if got := js(agent["readinessProbe"].(map[string]any)["httpGet"]); !strings.Contains(got, `"port":19091`) {
		t.Errorf("agent readiness probe %s, want port 19091", got)
	}
	for _, key := range []string{ctrl, wh, ds} {
		for _, c := range containers(key) {
			if img := c.(map[string]any)["image"]; img != "registry.example/juneau:v0.2.0" {
				t.Errorf("%s: image %v", key, img)
			}
		}
	}
	for _, w := range get(vwc, "webhooks").([]any) {
		w := w.(map[string]any)
		want := "9"
		if w["name"] == "pods.validate.juneau.loutres.me" {
			want = "8"
		}
		if w["failurePolicy"] != "Ignore" || js(w["timeoutSeconds"]) != want {
			t.Errorf("webhook %v: failurePolicy %v timeoutSeconds %v, want Ignore and %s", w["name"], w["failurePolicy"], w["timeoutSeconds"], want)
		}
	}
	for _, ns := range []string{"juneau-system", "edge-node"} {
		if _, ok := objs["v1 Namespace /"+ns]; ok {
			t.Errorf("namespace.create=false still renders the Namespace %s", ns)
		}
	}
	// node.namespace moves the agent, and everything naming it, out of the release's.
	if a := args(ctrl, 0); !strings.Contains(a, `"--heartbeat-lease-namespace=edge-node"`) {
		t.Errorf("controller args %s, want the heartbeats read in edge-node", a)
	}
	for _, key := range []string{"v1 ConfigMap edge-node/juneau-node-scripts", "v1 ServiceAccount edge-node/juneau-node",
		"rbac.authorization.k8s.io/v1 Role edge-node/juneau-node", "rbac.authorization.k8s.io/v1 Role edge-node/juneau-controller-heartbeats",
		"rbac.authorization.k8s.io/v1 Role juneau-system/juneau-node-bgp-passwords"} {
		if _, ok := objs[key]; !ok {
			t.Errorf("%s not rendered", key)
		}
	}
	scope := js(get("admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy /juneau-node-scope", "spec", "matchConditions"))
	if !strings.Contains(scope, "system:serviceaccount:edge-node:juneau-node") {
		t.Errorf("node-scope policy matches %s, want the agent's ServiceAccount in edge-node", scope)
	}
	rules := get("v1 ConfigMap juneau-system/juneau-alert-rules", "data", "juneau-alerts.yaml").(string)
	want, err := os.ReadFile(filepath.Join(repoRoot(t), "manifests", "monitoring", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if rules != string(want) {
		t.Error("the alert rules ConfigMap does not hold manifests/monitoring/alerts.yaml as it is")
	}
	dash := get("v1 ConfigMap juneau-system/juneau-dashboard", "data", "juneau.json").(string)
	if !json.Valid([]byte(dash)) || !strings.Contains(dash, `"uid": "juneau-overview"`) {
		t.Error("the dashboard ConfigMap does not hold the dashboard JSON")
	}
}

// TestHelmLint: helm lint finds nothing to say, warnings included (--strict), with the
// default values and with every optional part on.
func TestHelmLint(t *testing.T) {
	helm := tool(t, "helm")
	for _, extra := range [][]string{nil, {"--set", "monitoring.rules=true,monitoring.dashboard=true,metrics.podAnnotations=true"}} {
		out, err := run(t, repoRoot(t), append([]string{helm, "lint", "--strict", "charts/juneau"}, extra...)...)
		if err != nil {
			t.Fatalf("helm lint %v: %v", extra, err)
		}
		if !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") || strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
			t.Errorf("helm lint %v:\n%s", extra, out)
		}
	}
}

// TestChartCopies: the chart carries manifests/crds and manifests/monitoring as they are
// (Helm reads only files inside the chart; hack/update-chart.sh copies them).
func TestChartCopies(t *testing.T) {
	root := repoRoot(t)
	for _, pair := range [][2]string{{"manifests/crds", "charts/juneau/crds"}, {"manifests/monitoring", "charts/juneau/files"}} {
		src, _ := filepath.Glob(filepath.Join(root, pair[0], "*"))
		dst, _ := filepath.Glob(filepath.Join(root, pair[1], "*"))
		if len(src) == 0 || len(src) != len(dst) {
			t.Errorf("%s has %d files, %s %d: run hack/update-chart.sh", pair[0], len(src), pair[1], len(dst))
		}
		for _, f := range src {
			a, _ := os.ReadFile(f)
			b, err := os.ReadFile(filepath.Join(root, pair[1], filepath.Base(f)))
			if err != nil || !bytes.Equal(a, b) {
				t.Errorf("%s/%s differs from %s (%v): run hack/update-chart.sh", pair[1], filepath.Base(f), f, err)
			}
		}
	}
}

// TestAlertRules: promtool accepts the rule file, and the scrape configuration as part
// of a Prometheus configuration.
func TestAlertRules(t *testing.T) {
	promtool := tool(t, "promtool")
	root := repoRoot(t)
	out, err := run(t, root, promtool, "check", "rules", "manifests/monitoring/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "SUCCESS: 7 rules found") {
		t.Errorf("promtool check rules:\n%s", out)
	}
	dir := t.TempDir()
	cfg, err := PrometheusConfig(root, 5*time.Second, filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), []byte("apiVersion: v1\nkind: Config\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("a-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yaml"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, dir, promtool, "check", "config", "--syntax-only", "prometheus.yaml"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestDashboardQueries: every panel query of the dashboard is valid PromQL (promtool
// checks each as a recording rule); the real-cluster tier runs them against Prometheus.
func TestDashboardQueries(t *testing.T) {
	promtool := tool(t, "promtool")
	queries, err := DashboardQueries(filepath.Join(repoRoot(t), "manifests", "monitoring", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(queries) < 20 {
		t.Fatalf("%d dashboard queries, want every panel's", len(queries))
	}
	var rules []map[string]string
	for i, q := range queries {
		rules = append(rules, map[string]string{"record": fmt.Sprintf("juneau:dashboard_query_%d", i), "expr": q.Expr})
	}
	data, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(f, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, "", promtool, "check", "rules", f); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
