package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/cluster"
	"github.com/loutres/juneau/test/framework"
	"github.com/loutres/juneau/test/images"
)

// use is an example Pod and an ElasticIP it uses (manifests/examples and
// manifests/examples/ipv6).
type use struct {
	pod, eip, mode string
	ipv6           bool
}

var uses = []use{
	{"nginx", "nginx-eip", "NAT", false}, {"web", "web-eip", "direct", false},
	{"nginx", "nginx-eip6", "NAT", true}, {"web6", "web6-eip", "direct", true},
}

// examplePods are the Pods of the examples.
var examplePods = []string{"nginx", "web", "web6"}

func (u use) family() string {
	if u.ipv6 {
		return "IPv6"
	}
	return "IPv4"
}

// clientIP is the external client's address of the use's family.
func (u use) clientIP() string {
	if u.ipv6 {
		return cluster.ClientIP6
	}
	return cluster.ClientIP
}

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

// start starts the cluster with the primary CNI cni, installs juneau and applies the
// examples. A non-nil sandbox must be torn down, whatever the error.
func start(ctx context.Context, root, kind, cni string, built *[]string) (*sandbox, error) {
	juneau, err := binary("JUNEAU_BINARY", "./cmd/juneau", built)
	if err != nil {
		return nil, err
	}
	box, err := binary("JUNEAU_BOX_BINARY", "./test/images/box", built)
	if err != nil {
		return nil, err
	}
	primary := "ptp + host-local"
	if cni == cluster.CNIFlannel {
		primary = "flannel " + framework.FlannelVersion + " (VXLAN), bridge + host-local"
	}
	step("Starting a real dual-stack cluster: etcd %s, kube-apiserver, kube-controller-manager, kube-scheduler %s; Nodes %s with containerd, kubelet, kube-proxy (nftables) and %s; an external client %s, %s on the segment %s, %s",
		framework.EtcdVersion, framework.KubernetesVersion, strings.Join(cluster.DefaultNodes, ", "), primary,
		cluster.ClientIP, cluster.ClientIP6, cluster.SegmentPrefix, cluster.SegmentPrefix6)
	c, err := cluster.Start(ctx, cluster.Options{Kind: kind, RepoRoot: root, JuneauBinary: juneau, BoxBinary: box, CNI: cni,
		Logs: logDir(root, kind), Progress: func(format string, args ...any) { fmt.Printf("    "+format+"\n", args...) }})
	if err != nil {
		return nil, err
	}
	s := &sandbox{c: c, root: root}
	fmt.Printf("    component logs: %s\n", filepath.Join(c.Dir, "logs"))
	s.kubectl(ctx, "get", "nodes", "-o", "wide")
	s.kubectl(ctx, "get", "nodes", "-o", `custom-columns=NAME:.metadata.name,INTERNAL-IPS:.status.addresses[?(@.type=="InternalIP")].address,POD-CIDRS:.spec.podCIDRs`)

	step("kubectl apply -k manifests/ (an overlay replaces the image, images: %s -> %s)", images.JuneauRepository, c.JuneauImage)
	out, err := c.Install(ctx)
	fmt.Print(indent(out))
	if err != nil {
		return s, err
	}
	fmt.Println("    the controller, the webhook and the node DaemonSet are rolled out; the webhook answers through its Service")
	s.kubectl(ctx, "get", "pods", "-A", "-l", "app.kubernetes.io/name=juneau", "-o", "wide")

	how := ""
	if cni == cluster.CNIFlannel {
		how = "; with flannel's bridged Pods, through overlays putting web-eip and web6-eip on an extra interface, ext0, instead of eth0 (docs/guide-direct.md#which-primary-cnis-work)"
	}
	step("kubectl apply -k manifests/examples/, then kubectl apply -k manifests/examples/ipv6/ (the cluster serves %s as a small HTTP server on port 80%s)", images.DocNginx, how)
	out, err = c.ApplyExamples(ctx)
	fmt.Print(indent(out))
	if err != nil {
		return s, err
	}
	step("Waiting for the Pods, placed by kube-scheduler and started by the kubelets, to be Ready (readiness gates included)")
	args := []string{"wait", "--for=condition=Ready", "--timeout=5m"}
	for _, p := range examplePods {
		args = append(args, "pod/"+p)
	}
	if _, err := c.KubectlRun(ctx, "", args...); err != nil {
		out, _ := c.KubectlRun(ctx, "", append([]string{"describe", "pod"}, examplePods...)...)
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

// demo shows the resources and checks each ElasticIP as a user would: its Attached
// condition, its Pod's readiness gate, a reply from the external client at the address,
// and the source the Pod's own connections arrive with.
func (s *sandbox) demo(ctx context.Context) {
	step("Waiting for the four ElasticIPs to work: Attached True (reason Attached), and their Pods' readiness gate %s True", v1alpha1.PodConditionElasticIP)
	addrs := map[string]string{}
	for _, u := range uses {
		addrs[u.eip] = s.waitWorking(ctx, u)
	}
	step("kubectl get addresspool,externalnetwork,elasticip,elasticipattachment,networkinterface,arpadvertisement")
	s.kubectl(ctx, "get", "addresspool,externalnetwork,elasticip,elasticipattachment,networkinterface,arpadvertisement")
	s.kubectl(ctx, "get", "pods", "-o", "wide")

	step("From the external client (%s, %s): an HTTP request to each ElasticIP", cluster.ClientIP, cluster.ClientIP6)
	for _, u := range uses {
		url := cluster.URL(addrs[u.eip])
		answer, err := s.c.EventuallyGet(ctx, url, time.Minute)
		want := fmt.Sprintf("hello from %s: you are %s", u.pod, u.clientIP())
		s.check(err == nil && answer == want, "GET %-27s (%s, %s %s) -> %q", url, u.eip, u.family(), u.mode, orError(answer, err))
	}

	w, err := s.c.ServeWhoami(9000)
	if err != nil {
		s.check(false, "listening on the client: %v", err)
		return
	}
	defer w.Close()
	step("Outbound: the source address each Pod's connection arrives with at the client (kubectl exec <pod> -- /box dial %s or %s)", w.Addr, w.Addr6)
	for _, u := range uses {
		target, from, how := w.Addr, "", ""
		if u.ipv6 {
			target = w.Addr6
		}
		if u.mode == "direct" && s.c.DirectInterface() != "eth0" {
			// An extra interface carries traffic whose source is its ElasticIP: the
			// application binds to it (docs/guide-direct.md#inside-the-pod).
			from, how = addrs[u.eip], ", bound to it on "+s.c.DirectInterface()
		}
		src, err := s.c.SourceOf(ctx, target, from, "default", u.pod, "")
		s.check(err == nil && src == addrs[u.eip], "%-6s %s -> arrives from %s (ElasticIP %s is %s%s)", u.pod, u.family(), orError(src, err), u.eip, addrs[u.eip], how)
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

// waitWorking waits until the ElasticIP's Attached condition is True with reason
// Attached and its Pod's readiness gate is True, and returns its address.
func (s *sandbox) waitWorking(ctx context.Context, u use) string {
	var addr, attached, gate string
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		eip, err := s.c.Juneau.JuneauV1alpha1().ElasticIPs("default").Get(ctx, u.eip, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		addr, attached = eip.Status.Address, "none"
		if c := meta.FindStatusCondition(eip.Status.Conditions, v1alpha1.ConditionAttached); c != nil {
			attached = string(c.Status) + "/" + c.Reason
		}
		pod, err := s.c.Kube.CoreV1().Pods("default").Get(ctx, u.pod, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		gate = "none"
		for _, c := range pod.Status.Conditions {
			if string(c.Type) == v1alpha1.PodConditionElasticIP {
				gate = string(c.Status)
			}
		}
		return attached == "True/"+v1alpha1.ReasonAttached && gate == "True", nil
	})
	s.check(err == nil, "ElasticIP %-10s %s %-18s Attached %s, Pod %s's gate %s, after %s", u.eip, u.family(), addr, attached, u.pod, gate, time.Since(start).Round(100*time.Millisecond))
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
	fmt.Fprintf(&b, "\nThe sandbox is up (started in %s): a real dual-stack cluster of two Nodes (primary CNI %s) with juneau\n", took.Round(time.Second), c.CNI())
	fmt.Fprintf(&b, "installed by kubectl apply -k, and manifests/examples/ and manifests/examples/ipv6/ applied. Use it with the built kubectl:\n\n")
	fmt.Fprintf(&b, "  export KUBECONFIG=%s\n", c.Kubeconfig)
	fmt.Fprintf(&b, "  alias kubectl=%s\n", c.Kubectl)
	fmt.Fprintf(&b, "  kubectl get nodes -o wide\n")
	fmt.Fprintf(&b, "  kubectl get elasticip,elasticipattachment,networkinterface,arpadvertisement\n")
	fmt.Fprintf(&b, "  kubectl -n %s get pods -o wide; kubectl -n %s get pods -o wide\n\n", cluster.SystemNamespace, cluster.NodeNamespace)
	fmt.Fprintf(&b, "Your own Pods run: nothing is pulled from the Internet, but busybox (busybox, busybox:1.36, ...)\n")
	fmt.Fprintf(&b, "and %s (answers HTTP on port 80 with the caller's address) are served locally. A Pod with its own\n", images.Box)
	fmt.Fprintf(&b, "ElasticIP:\n\n")
	fmt.Fprintf(&b, "  kubectl apply -f - <<'EOF'\n%s  EOF\n", indentBy(examplePod, "  "))
	fmt.Fprintf(&b, "  kubectl wait --for=condition=Ready pod/my-pod\n")
	fmt.Fprintf(&b, "  kubectl get pod my-pod -o jsonpath='{.metadata.annotations.juneau\\.loutres\\.me/allocated-eip-address}'\n\n")
	fmt.Fprintf(&b, "The external client is the network namespace %s (%s, %s):\n", c.ClientNS, cluster.ClientIP, cluster.ClientIP6)
	fmt.Fprintf(&b, "  nsenter --net=%s busybox wget -qO- http://<ElasticIP>/    (IPv6: http://[<ElasticIP>]/)\n", c.ClientNS)
	fmt.Fprintf(&b, "A Node's network (juneau's and kube-proxy's nftables tables, routes):\n")
	fmt.Fprintf(&b, "  nsenter --net=%s nft list ruleset\n", c.Nodes[0].NS)
	fmt.Fprintf(&b, "  its CNI configuration: %s\n\n", c.Nodes[0].ConfDir())
	fmt.Fprintf(&b, "Logs of every cluster component (etcd, kube-apiserver, kubelets, containerd, ...): %s\n", filepath.Join(c.Dir, "logs"))
	fmt.Fprintf(&b, "(kept in %s after the teardown). juneau's, and your Pods': kubectl logs, e.g.\n", logDir(s.root, "sandbox"))
	fmt.Fprintf(&b, "  kubectl -n %s logs daemonset/juneau-node -c agent\n", cluster.NodeNamespace)
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
