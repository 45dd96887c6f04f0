package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/test/framework"
	"github.com/loutres/juneau/test/images"
)

// Where the manifests install juneau: the controller and the webhook in SystemNamespace
// (Pod Security "restricted"), the node agent's DaemonSet in NodeNamespace ("privileged").
const (
	SystemNamespace = framework.SystemNamespace
	NodeNamespace   = framework.NodeNamespace
)

// KubectlRun runs the built kubectl as the admin; stdin may be empty. The error carries
// kubectl's stderr.
func (c *Cluster) KubectlRun(ctx context.Context, stdin string, args ...string) (string, error) {
	r := framework.RunKubectl(ctx, c.Kubectl, c.Kubeconfig, stdin, args...)
	return r.Stdout, r.Err
}

// overlay writes a kustomization in the run directory that takes base (a directory of
// the clone) and overrides images the way kustomize does, as a user would to install
// their own image.
func (c *Cluster) overlay(name, base string, imageOverrides map[string]string) (string, error) {
	dir := c.run.path("kustomize", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	rel, err := filepath.Rel(dir, filepath.Join(c.opts.RepoRoot, base))
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n")
	fmt.Fprintf(&b, "resources:\n  - %s\nimages:\n", rel)
	for from, to := range imageOverrides {
		newName, newTag, _ := strings.Cut(to, ":")
		fmt.Fprintf(&b, "  - name: %s\n    newName: %s\n    newTag: %q\n", from, newName, newTag)
	}
	return dir, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(b.String()), 0o644)
}

// installDir is the kustomization Install applies: manifests/ with the juneau image
// replaced by the one loaded into the Nodes.
func (c *Cluster) installDir() (string, error) {
	return c.overlay("install", "manifests", map[string]string{images.JuneauRepository: c.JuneauImage})
}

// Install installs juneau as the README says, `kubectl apply -k`, and waits until the
// controller, the webhook and the node DaemonSet are rolled out and the webhook answers
// through its Service. It returns what kubectl printed.
func (c *Cluster) Install(ctx context.Context) (string, error) {
	dir, err := c.installDir()
	if err != nil {
		return "", err
	}
	out, err := c.KubectlRun(ctx, "", "apply", "-k", dir)
	if err != nil {
		return out, err
	}
	for _, w := range []struct{ namespace, name string }{
		{NodeNamespace, "daemonset/juneau-node"}, {SystemNamespace, "deployment/juneau-controller"}, {SystemNamespace, "deployment/juneau-webhook"},
	} {
		if _, err := c.KubectlRun(ctx, "", "-n", w.namespace, "rollout", "status", w.name, "--timeout=5m"); err != nil {
			return out, fmt.Errorf("%w\n%s", err, c.describeSystem(ctx))
		}
	}
	return out, c.WaitWebhook(ctx)
}

// WaitWebhook waits until the webhook answers through its Service: a server-side dry
// run of a Pod with an invalid juneau annotation is denied by it.
func (c *Cluster) WaitWebhook(ctx context.Context) error {
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "juneau-webhook-probe", Namespace: "default",
			Annotations: map[string]string{"juneau.loutres.me/pod-with-eip": "maybe"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: images.Box}}},
	}
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, last = c.Kube.CoreV1().Pods("default").Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return last != nil && strings.Contains(last.Error(), `admission webhook "pods.validate.juneau.loutres.me" denied the request`), nil
	})
	if err != nil {
		return fmt.Errorf("the webhook does not answer through its Service (last: %v): %w", last, err)
	}
	return nil
}

// describeSystem summarises juneau's two namespaces for an error message.
func (c *Cluster) describeSystem(ctx context.Context) string {
	var b strings.Builder
	for _, ns := range []string{SystemNamespace, NodeNamespace} {
		out, _ := c.KubectlRun(ctx, "", "-n", ns, "get", "pods", "-o", "wide")
		events, _ := c.KubectlRun(ctx, "", "-n", ns, "get", "events", "--sort-by=.lastTimestamp")
		lines := strings.Split(strings.TrimSpace(events), "\n")
		if len(lines) > 25 {
			lines = lines[len(lines)-25:]
		}
		b.WriteString(out + strings.Join(lines, "\n") + "\n")
	}
	return b.String()
}

// ApplyExamples applies manifests/examples and then manifests/examples/ipv6 as they are
// (the nginx:1.27 they name is served by the cluster: images.DocNginx, which answers
// HTTP on port 80) and returns what kubectl printed. With flannel, whose bridged Pods
// cannot carry an ElasticIP on eth0 (docs/guide-direct.md#which-primary-cnis-work),
// through overlays that move each direct ElasticIP to an extra interface, ext0.
func (c *Cluster) ApplyExamples(ctx context.Context) (string, error) {
	var all strings.Builder
	for _, set := range []struct{ dir, overlay string }{
		{"manifests/examples", "examples"}, {"manifests/examples/ipv6", "examples-ipv6"},
	} {
		dir := filepath.Join(c.opts.RepoRoot, set.dir)
		if c.opts.CNI == CNIFlannel {
			var err error
			if dir, err = c.extraInterfaceOverlay(set.overlay, set.dir); err != nil {
				return all.String(), err
			}
		}
		out, err := c.KubectlRun(ctx, "", "apply", "-k", dir)
		all.WriteString(out)
		if err != nil {
			return all.String(), err
		}
	}
	return all.String(), nil
}

// DirectPods are the example Pods carrying an ElasticIP directly, and the ElasticIP each
// carries.
var DirectPods = map[string]string{"web": "web-eip", "web6": "web6-eip"}

// DirectInterface is the interface of the example Pods' direct ElasticIPs: eth0, or,
// with flannel, the extra interface ext0.
func (c *Cluster) DirectInterface() string {
	if c.opts.CNI == CNIFlannel {
		return "ext0"
	}
	return "eth0"
}

// extraInterfaceOverlay writes a kustomization over base (a directory of the clone)
// that replaces the juneau.loutres.me/elastic-ip annotation of its direct Pods with a
// juneau.loutres.me/networks entry for ext0, as a user of a bridged primary CNI would.
func (c *Cluster) extraInterfaceOverlay(name, base string) (string, error) {
	dir, err := c.overlay(name, base, nil)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("sortOptions:\n  order: fifo\npatches:\n")
	for pod, eip := range DirectPods {
		fmt.Fprintf(&b, `  - target: {kind: Pod, name: %s}
    patch: |
      - op: remove
        path: /metadata/annotations/juneau.loutres.me~1elastic-ip
      - op: add
        path: /metadata/annotations/juneau.loutres.me~1networks
        value: '[{"interface":"ext0","elasticIP":"%s"}]'
`, pod, eip)
	}
	f, err := os.OpenFile(filepath.Join(dir, "kustomization.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(b.String())
	return dir, errors.Join(err, f.Close())
}
