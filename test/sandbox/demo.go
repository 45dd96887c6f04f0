package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/cluster"
	"github.com/loutres/juneau/test/framework"
	"github.com/loutres/juneau/test/images"
)

// The example Pods and the ElasticIP each uses (manifests/examples).
var uses = []struct{ pod, eip, mode string }{{"nginx", "nginx-eip", "NAT"}, {"web", "web-eip", "direct"}}

type sandbox struct {
	c      *cluster.Cluster
	root   string
	failed bool
}

// binary is $env (make sets it), or pkg built here into a directory added to built.
func binary(env, pkg string, built *[]string) (string, error) {
	if p := os.Getenv(env); p != "" {
		return p, nil
	}
	p, dir, out, err := framework.BuildStatic(pkg)
	if dir != "" {
		*built = append(*built, dir)
	}
	if err != nil {
		return "", fmt.Errorf("building %s: %w\n%s", pkg, err, out)
	}
	return p, nil
}

// start starts the cluster, installs juneau and applies the examples. A non-nil sandbox
// must be torn down, whatever the error.
func start(ctx context.Context, root, kind string, built *[]string) (*sandbox, error) {
	juneau, err := binary("JUNEAU_BINARY", "./cmd/juneau", built)
	if err != nil {
		return nil, err
	}
	box, err := binary("JUNEAU_BOX_BINARY", "./test/images/box", built)
	if err != nil {
		return nil, err
	}
	step("Starting a real cluster: etcd %s, kube-apiserver, kube-controller-manager, kube-scheduler %s; Nodes %s with containerd, kubelet and kube-proxy (nftables); an external client %s on the segment %s",
		framework.EtcdVersion, framework.KubernetesVersion, strings.Join(cluster.DefaultNodes, ", "), cluster.ClientIP, cluster.SegmentPrefix)
	c, err := cluster.Start(ctx, cluster.Options{Kind: kind, RepoRoot: root, JuneauBinary: juneau, BoxBinary: box,
		Logs: logDir(root, kind), Progress: func(format string, args ...any) { fmt.Printf("    "+format+"\n", args...) }})
	if err != nil {
		return nil, err
	}
	s := &sandbox{c: c, root: root}
	fmt.Printf("    component logs: %s\n", filepath.Join(c.Dir, "logs"))
	s.kubectl(ctx, "get", "nodes", "-o", "wide")

	step("kubectl apply -k manifests/ (an overlay replaces the image, images: %s -> %s)", images.JuneauRepository, c.JuneauImage)
	out, err := c.Install(ctx)
	fmt.Print(indent(out))
	if err != nil {
		return s, err
	}
	fmt.Println("    the controller, the webhook and the node DaemonSet are rolled out; the webhook answers through its Service")
	s.kubectl(ctx, "-n", cluster.SystemNamespace, "get", "pods", "-o", "wide")

	step("kubectl apply -k manifests/examples/ (the cluster serves %s as a small HTTP server on port 80)", images.DocNginx)
	out, err = c.ApplyExamples(ctx)
	fmt.Print(indent(out))
	if err != nil {
		return s, err
	}
	step("Waiting for the Pods, placed by kube-scheduler and started by the kubelets")
	if _, err := c.KubectlRun(ctx, "", "wait", "--for=condition=Ready", "pod/nginx", "pod/web", "--timeout=5m"); err != nil {
		out, _ := c.KubectlRun(ctx, "", "describe", "pod", "nginx", "web")
		return s, fmt.Errorf("%w\n%s", err, out)
	}
	s.kubectl(ctx, "get", "pods", "-o", "wide")
	return s, nil
}

// kubectl prints what kubectl prints.
func (s *sandbox) kubectl(ctx context.Context, args ...string) {
	out, err := s.c.KubectlRun(ctx, "", args...)
	fmt.Print(indent(out))
	if err != nil {
		s.check(false, "kubectl %s: %v", strings.Join(args, " "), err)
	}
}

// demo shows the resources and checks the traffic, as a user would.
func (s *sandbox) demo(ctx context.Context) {
	step("Waiting for both ElasticIPs to be Attached")
	addrs := map[string]string{}
	for _, u := range uses {
		addrs[u.eip] = s.waitAttached(ctx, u.eip)
	}
	step("kubectl get addresspool,externalnetwork,elasticip,elasticipattachment,networkinterface,arpadvertisement")
	s.kubectl(ctx, "get", "addresspool,externalnetwork,elasticip,elasticipattachment,networkinterface,arpadvertisement")

	step("From the external client (%s): an HTTP request to each ElasticIP", cluster.ClientIP)
	for _, u := range uses {
		url := "http://" + addrs[u.eip] + "/"
		answer, err := s.c.EventuallyGet(ctx, url, time.Minute)
		want := fmt.Sprintf("hello from %s: you are %s", u.pod, cluster.ClientIP)
		s.check(err == nil && answer == want, "GET %-22s (%s, %s) -> %q", url, u.eip, u.mode, orError(answer, err))
	}

	step("Outbound: the source address each Pod's connection arrives with at the client (kubectl exec <pod> -- /box dial %s:9000)", cluster.ClientIP)
	w, err := s.c.ServeWhoami(9000)
	if err != nil {
		s.check(false, "listening on the client: %v", err)
		return
	}
	defer w.Close()
	for _, u := range uses {
		src, err := s.c.SourceOf(ctx, w, "default", u.pod, "")
		s.check(err == nil && src == addrs[u.eip], "%-6s -> arrives from %s (ElasticIP %s is %s)", u.pod, orError(src, err), u.eip, addrs[u.eip])
	}
}

func (s *sandbox) check(ok bool, format string, args ...any) {
	mark := "ok  "
	if !ok {
		mark = "FAIL"
		s.failed = true
	}
	fmt.Printf("    [%s] %s\n", mark, fmt.Sprintf(format, args...))
}

func (s *sandbox) waitAttached(ctx context.Context, name string) string {
	var addr string
	var phase v1alpha1.ElasticIPPhase
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		eip, err := s.c.Juneau.JuneauV1alpha1().ElasticIPs("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		addr, phase = eip.Status.Address, eip.Status.Phase
		return phase == v1alpha1.ElasticIPAttached, nil
	})
	s.check(err == nil, "ElasticIP %s Attached with address %s after %s (phase %s)", name, addr, time.Since(start).Round(100*time.Millisecond), phase)
	return addr
}

// serve keeps the sandbox up until a signal, after printing how to use it.
func (s *sandbox) serve(ctx context.Context, started time.Time) error {
	// The images built for the start are garbage now; give their memory back while the
	// sandbox waits.
	debug.FreeOSMemory()
	usage := s.usage(time.Since(started))
	if err := os.WriteFile(filepath.Join(s.c.Dir, "usage"), []byte(usage), 0o644); err != nil {
		return err
	}
	fmt.Print(usage)
	<-ctx.Done()
	return nil
}

func (s *sandbox) usage(took time.Duration) string {
	c := s.c
	var b strings.Builder
	fmt.Fprintf(&b, "\nThe sandbox is up (started in %s): a real cluster of two Nodes with juneau installed by kubectl apply -k,\n", took.Round(time.Second))
	fmt.Fprintf(&b, "and manifests/examples/ applied. Use it with the built kubectl:\n\n")
	fmt.Fprintf(&b, "  export KUBECONFIG=%s\n", c.Kubeconfig)
	fmt.Fprintf(&b, "  alias kubectl=%s\n", c.Kubectl)
	fmt.Fprintf(&b, "  kubectl get nodes -o wide\n")
	fmt.Fprintf(&b, "  kubectl get elasticip,elasticipattachment,networkinterface,arpadvertisement\n")
	fmt.Fprintf(&b, "  kubectl -n %s get pods -o wide\n\n", cluster.SystemNamespace)
	fmt.Fprintf(&b, "Your own Pods run: nothing is pulled from the Internet, but busybox (busybox, busybox:1.36, ...)\n")
	fmt.Fprintf(&b, "and %s (answers HTTP on port 80 with the caller's address) are served locally. A Pod with its own\n", images.Box)
	fmt.Fprintf(&b, "ElasticIP:\n\n")
	fmt.Fprintf(&b, "  kubectl apply -f - <<'EOF'\n%s  EOF\n", indentBy(examplePod, "  "))
	fmt.Fprintf(&b, "  kubectl wait --for=condition=Ready pod/my-pod\n")
	fmt.Fprintf(&b, "  kubectl get pod my-pod -o jsonpath='{.metadata.annotations.juneau\\.loutres\\.me/allocated-eip-address}'\n\n")
	fmt.Fprintf(&b, "The external client is the network namespace %s (%s):\n", c.ClientNS, cluster.ClientIP)
	fmt.Fprintf(&b, "  nsenter --net=%s busybox wget -qO- http://<ElasticIP>/\n", c.ClientNS)
	fmt.Fprintf(&b, "A Node's network (juneau's and kube-proxy's nftables tables, routes):\n")
	fmt.Fprintf(&b, "  nsenter --net=%s nft list ruleset\n", c.Nodes[0].NS)
	fmt.Fprintf(&b, "  its CNI configuration: %s\n\n", c.Nodes[0].ConfDir())
	fmt.Fprintf(&b, "Logs of every cluster component (etcd, kube-apiserver, kubelets, containerd, ...): %s\n", filepath.Join(c.Dir, "logs"))
	fmt.Fprintf(&b, "(kept in %s after the teardown). juneau's, and your Pods': kubectl logs, e.g.\n", logDir(s.root, "sandbox"))
	fmt.Fprintf(&b, "  kubectl -n %s logs daemonset/juneau-node -c agent\n", cluster.SystemNamespace)
	fmt.Fprintf(&b, "  (docs/operations.md#logs-and-events: the controller that holds the Lease, the agent of a Node)\n")
	fmt.Fprintf(&b, "Stop it with: make sandbox-down\n")
	return b.String()
}

const examplePod = `apiVersion: v1
kind: Pod
metadata:
  name: my-pod
  annotations:
    juneau.loutres.me/pod-with-eip: "true"
spec:
  readinessGates:
    - conditionType: juneau.loutres.me/elastic-ip
  containers:
    - name: web
      image: ` + images.Box + `
`

func indentBy(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix) + "\n"
}
