package realcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/test/cluster"
	"github.com/loutres/juneau/test/images"
)

func testContext(t *testing.T, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// namespace creates a namespace for one test; it is deleted (with everything in it)
// when the test ends.
func namespace(t *testing.T, c *cluster.Cluster, prefix string) string {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	name := prefix + "-" + hex.EncodeToString(b)
	if _, err := c.Kube.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		showNamespace(t, c, name)
		_ = c.Kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// showNamespace logs what the namespace holds and its Events when the test failed.
func showNamespace(t *testing.T, c *cluster.Cluster, name string) {
	if t.Failed() {
		out, _ := c.KubectlRun(context.Background(), "", "-n", name, "get", "all,elasticip,elasticipattachment,networkinterface", "-o", "wide")
		events, _ := c.KubectlRun(context.Background(), "", "-n", name, "get", "events", "--sort-by=.lastTimestamp")
		t.Logf("namespace %s:\n%s\n%s", name, out, events)
	}
}

// kubectl runs kubectl and fails the test on error.
func kubectl(t *testing.T, c *cluster.Cluster, stdin string, args ...string) string {
	t.Helper()
	out, err := c.KubectlRun(testContext(t, 5*time.Minute), stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitPods waits until the Pods are Ready (readiness gates included), describing them on
// failure.
func waitPods(t *testing.T, c *cluster.Cluster, ns string, pods ...string) {
	t.Helper()
	args := []string{"-n", ns, "wait", "--for=condition=Ready", "--timeout=4m"}
	for _, p := range pods {
		args = append(args, "pod/"+p)
	}
	if _, err := c.KubectlRun(testContext(t, 5*time.Minute), "", args...); err != nil {
		out, _ := c.KubectlRun(context.Background(), "", append([]string{"-n", ns, "describe", "pod"}, pods...)...)
		t.Fatalf("%v\n%s", err, out)
	}
}

// reach does an HTTP GET of the address (of either family) from the external client
// until it answers and checks the answer names the Pod and sees the client itself, by
// its address of that family.
func reach(t *testing.T, c *cluster.Cluster, addr, pod string) {
	t.Helper()
	url := cluster.URL(addr)
	got, err := c.EventuallyGet(testContext(t, 2*time.Minute), url, time.Minute)
	want := fmt.Sprintf("hello from %s: you are %s", pod, clientIP(addr))
	if err != nil || got != want {
		t.Fatalf("GET %s from the external client: %q (%v), want %q", url, got, err, want)
	}
}

// clientIP is the external client's address of addr's family.
func clientIP(addr string) string {
	if a, err := netip.ParseAddr(addr); err == nil && a.Is6() {
		return cluster.ClientIP6
	}
	return cluster.ClientIP
}

// whoamiAddr is the address of w of addr's family.
func whoamiAddr(w *cluster.Whoami, addr string) string {
	if clientIP(addr) == cluster.ClientIP6 {
		return w.Addr6
	}
	return w.Addr
}

// gone waits until get reports NotFound.
func gone(t *testing.T, what string, timeout time.Duration, get func(context.Context) error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(testContext(t, timeout), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		last = get(ctx)
		return apierrors.IsNotFound(last), nil
	})
	if err != nil {
		t.Fatalf("%s still there after %s (last: %v)", what, timeout, last)
	}
}

// nodeState is what an install must leave as it found it on a Node.
type nodeState struct {
	conflists string // every file of /etc/cni/net.d
	nftables  string
	routes    string
	rules     string
}

func (s nodeState) diff(o nodeState) string {
	var b strings.Builder
	for _, f := range []struct{ name, a, b string }{
		{"CNI configuration", s.conflists, o.conflists}, {"nftables", s.nftables, o.nftables},
		{"routes", s.routes, o.routes}, {"rules", s.rules, o.rules},
	} {
		if f.a != f.b {
			fmt.Fprintf(&b, "%s before:\n%s\nafter:\n%s\n", f.name, f.a, f.b)
		}
	}
	return b.String()
}

func readNodeState(ctx context.Context, n *cluster.Node) (nodeState, error) {
	var s nodeState
	files, err := filepath.Glob(filepath.Join(n.ConfDir(), "*"))
	if err != nil {
		return s, err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return s, err
		}
		s.conflists += "== " + filepath.Base(f) + "\n" + string(data)
	}
	for _, x := range []struct {
		out  *string
		argv []string
	}{
		{&s.nftables, []string{"nft", "list", "ruleset"}},
		{&s.routes, []string{"ip", "route", "show", "table", "all"}},
		{&s.rules, []string{"ip", "rule"}},
	} {
		if *x.out, err = n.Output(ctx, x.argv...); err != nil {
			return s, err
		}
	}
	s.nftables = staleKubeProxyChain.ReplaceAllString(s.nftables, "")
	return s, nil
}

// staleKubeProxyChain is an empty chain of a Service or endpoint in kube-proxy's table:
// one kube-proxy flushed when its Service went (juneau's webhook's, at the uninstall) and
// deletes only at a later sync of its own, which nothing may trigger for minutes. It
// holds no rule, so it is left out of what an uninstall must restore.
var staleKubeProxyChain = regexp.MustCompile(`\n\tchain (?:service|endpoint|external)-[^\s{]+ \{\n\t\}\n`)

// settledNodeStates reads every Node's state once kube-proxy has synced: two reads in a
// row agree.
func settledNodeStates(ctx context.Context, c *cluster.Cluster) (map[string]nodeState, error) {
	prev := map[string]nodeState{}
	var states map[string]nodeState
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		states = map[string]nodeState{}
		same := len(prev) > 0
		for _, n := range c.Nodes {
			s, err := readNodeState(ctx, n)
			if err != nil {
				return false, err
			}
			states[n.Name] = s
			same = same && prev[n.Name] == s
		}
		prev = states
		return same, nil
	})
	return states, err
}

// warmUp runs and deletes a Pod on every Node before juneau is installed, as a cluster
// in use has: the primary CNI leaves what it keeps between Pods (ptp's masquerading
// creates its nftables table), which is then part of the Nodes' state before juneau.
func warmUp(ctx context.Context, c *cluster.Cluster) error {
	var manifest strings.Builder
	var names []string
	for _, n := range c.Nodes {
		name := "warm-up-" + n.Name
		names = append(names, "pod/"+name)
		fmt.Fprintf(&manifest, "apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: default}\nspec:\n  nodeName: %s\n  terminationGracePeriodSeconds: 1\n  containers: [{name: c, image: %s, args: [pause]}]\n---\n",
			name, n.Name, images.Box)
	}
	if _, err := c.KubectlRun(ctx, manifest.String(), "apply", "-f", "-"); err != nil {
		return err
	}
	if _, err := c.KubectlRun(ctx, "", append([]string{"wait", "--for=condition=Ready", "--timeout=3m"}, names...)...); err != nil {
		return err
	}
	_, err := c.KubectlRun(ctx, "", append([]string{"delete", "--wait=true"}, names...)...)
	return err
}

// eipYAML is an ElasticIP on the scenarios' network, ext-net.
func eipYAML(name string) string {
	return fmt.Sprintf(`apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIP
metadata: {name: %s}
spec: {externalNetwork: ext-net}
---
`, name)
}

// natYAML is an ElasticIP, <pod>-eip, translated by NAT to the Pod's eth0.
func natYAML(pod string) string { return eipYAML(pod+"-eip") + attachYAML(pod, "") }

// attachYAML is the attachment <pod>-attach<suffix> of the ElasticIP <pod>-eip<suffix>
// to the Pod's eth0.
func attachYAML(pod, suffix string) string {
	return fmt.Sprintf(`apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIPAttachment
metadata: {name: %[1]s-attach%[2]s}
spec:
  elasticIPRef: {name: %[1]s-eip%[2]s}
  targetRef: {networkInterfaceName: %[1]s.eth0}
---
`, pod, suffix)
}

// boxPodYAML is a Pod of the box image answering HTTP on port 80, with the annotations
// (a YAML flow map, or empty). Its spec and its container come last, so a caller can
// append a field to either.
func boxPodYAML(name, annotations string) string {
	meta := "{name: " + name + "}"
	if annotations != "" {
		meta = "{name: " + name + ", annotations: " + annotations + "}"
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: %s
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: %s
`, meta, images.Box)
}
