package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/e2e/harness"
	"github.com/loutres/juneau/test/framework"
	"github.com/loutres/juneau/test/netns"
	"github.com/loutres/juneau/test/runner"
)

// placement is where the sandbox's scheduler puts the example Pods.
var placement = []struct{ pod, node string }{{"nginx", "node-a"}, {"web", "node-b"}}

type sandbox struct {
	r       *runner.Runner
	cp      *framework.ControlPlane
	c       *harness.Cluster
	pods    map[string]*harness.Pod
	egress  *egressServer
	started time.Time
}

func setup(r *runner.Runner) *sandbox {
	s := &sandbox{r: r, pods: map[string]*harness.Pod{}, started: time.Now()}
	if err := os.MkdirAll(stateDir, 0o755); err == nil {
		_ = os.WriteFile(filepath.Join(stateDir, "starting"), []byte(fmt.Sprint(os.Getpid())), 0o644)
	}
	step("Starting the local control plane (etcd %s, kube-apiserver %s)", framework.EtcdVersion, framework.KubernetesVersion)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp, err := framework.Start(ctx)
	if err != nil {
		r.Fatalf("control plane: %v", err)
	}
	r.Cleanup(cp.Stop)
	s.cp = cp

	step("Starting juneau: controller, webhook, and a node agent on each simulated Node (node-a, node-b)")
	s.c = harness.New(r, cp, harness.Options{})
	fmt.Printf("    external client %s and Nodes %s, %s share the external segment %s\n",
		harness.ClientIP, s.c.Nodes["node-a"].IP, s.c.Nodes["node-b"].IP, harness.ExternalPrefix)

	step("kubectl apply -f manifests/examples/")
	res := cp.Kubectl(context.Background(), "", "apply", "-f", filepath.Join(cp.RepoRoot, "manifests", "examples"))
	fmt.Print(indent(res.Stdout))
	if res.Err != nil {
		r.Fatalf("applying the examples: %v", res.Err)
	}

	step("Scheduling and starting the Pods (the sandbox plays scheduler and kubelet)")
	for _, pl := range placement {
		p, err := s.c.BindAndStart("default", pl.pod, pl.node)
		if err != nil {
			r.Fatalf("starting Pod %s: %v", pl.pod, err)
		}
		s.pods[pl.pod] = p
		serveHTTP(r, p.NS, pl.pod)
		fmt.Printf("    %-6s on %s, Pod IP %s\n", pl.pod, pl.node, p.IP)
	}
	s.egress = newEgressServer(r, s.c.Client)
	return s
}

// demo shows the resources and checks the traffic, as a user would.
func (s *sandbox) demo() {
	step("Waiting for both ElasticIPs to be Attached")
	addrs := map[string]string{}
	for _, name := range []string{"nginx-eip", "web-eip"} {
		addrs[name] = s.waitAttached(name)
	}
	step("kubectl get addresspool,externalnetwork,elasticip,elasticipattachment,networkinterface,arpadvertisement")
	res := s.cp.Kubectl(context.Background(), "", "get", "addresspool,externalnetwork,elasticip,elasticipattachment,networkinterface,arpadvertisement")
	fmt.Print(indent(res.Stdout))
	if res.Err != nil {
		s.r.Errorf("kubectl get: %v", res.Err)
	}

	step("From the external client (%s): an HTTP request to each ElasticIP", harness.ClientIP)
	for _, use := range []struct{ eip, pod string }{{"nginx-eip", "nginx"}, {"web-eip", "web"}} {
		url := "http://" + addrs[use.eip] + "/"
		answer, err := s.get(url)
		want := fmt.Sprintf("hello from %s: you are %s", use.pod, harness.ClientIP)
		s.check(err == nil && answer == want, "GET %-22s (%s) → %q", url, use.eip, orError(answer, err))
	}

	step("Outbound: the source address each Pod's traffic arrives with at the client")
	for _, use := range []struct{ eip, pod string }{{"nginx-eip", "nginx"}, {"web-eip", "web"}} {
		src, err := s.egress.sourceOf(s.pods[use.pod].NS)
		s.check(err == nil && src == addrs[use.eip], "%-6s → arrives from %s (ElasticIP %s is %s)", use.pod, orError(src, err), use.eip, addrs[use.eip])
	}
}

func (s *sandbox) check(ok bool, format string, args ...any) {
	mark := "ok  "
	if !ok {
		mark = "FAIL"
		s.r.Errorf("check failed: "+format, args...)
	}
	fmt.Printf("    [%s] %s\n", mark, fmt.Sprintf(format, args...))
}

func (s *sandbox) waitAttached(name string) string {
	var addr string
	start := time.Now()
	last := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		eip, err := s.cp.Juneau.JuneauV1alpha1().ElasticIPs("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if time.Since(last) > 5*time.Second {
			fmt.Printf("    still waiting for %s (phase %q)...\n", name, eip.Status.Phase)
			last = time.Now()
		}
		addr = eip.Status.Address
		return eip.Status.Phase == v1alpha1.ElasticIPAttached, nil
	})
	s.check(err == nil, "ElasticIP %s Attached with address %s after %s", name, addr, time.Since(start).Round(100*time.Millisecond))
	return addr
}

// get does an HTTP GET from the external client, retrying while ARP and rules settle.
func (s *sandbox) get(url string) (string, error) {
	var body string
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		body, last = httpGet(s.c.Client, url)
		return last == nil, nil
	})
	if err != nil {
		return "", last
	}
	return body, nil
}

func httpGet(ns *netns.NS, url string) (string, error) {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var conn net.Conn
			err := ns.Do(func() error {
				var err error
				conn, err = (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, network, addr)
				return err
			})
			return conn, err
		},
	}}
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}

// serveHTTP answers every request in ns with the Pod's name and the caller's address.
func serveHTTP(r *runner.Runner, ns *netns.NS, pod string) {
	var l net.Listener
	ns.MustDo(func() error {
		var err error
		l, err = net.Listen("tcp4", ":80")
		return err
	})
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		host, _, _ := net.SplitHostPort(req.RemoteAddr)
		fmt.Fprintf(w, "hello from %s: you are %s\n", pod, host)
	})}
	go func() { _ = srv.Serve(l) }()
	r.Cleanup(func() { _ = srv.Close() })
}

// egressServer listens on the external client and reports who connects.
type egressServer struct{ l net.Listener }

const egressPort = 9000

func newEgressServer(r *runner.Runner, client *netns.NS) *egressServer {
	e := &egressServer{}
	client.MustDo(func() error {
		var err error
		e.l, err = net.Listen("tcp4", fmt.Sprintf(":%d", egressPort))
		return err
	})
	go func() {
		for {
			conn, err := e.l.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(conn.RemoteAddr().String())
			fmt.Fprintln(conn, host)
			conn.Close()
		}
	}()
	r.Cleanup(func() { e.l.Close() })
	return e
}

// sourceOf connects from a Pod to the client and returns the source address the client saw.
func (e *egressServer) sourceOf(pod *netns.NS) (string, error) {
	var got string
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		got, last = harness.Dial(pod, harness.ClientIP, egressPort)
		return last == nil, nil
	})
	if err != nil {
		return "", last
	}
	return got, nil
}

func (s *sandbox) writeState() error {
	return os.WriteFile(filepath.Join(stateDir, "pid"), []byte(fmt.Sprint(os.Getpid())), 0o644)
}

func (s *sandbox) printUsage() {
	var b strings.Builder
	fmt.Fprintf(&b, "\nThe sandbox is up (started in %s). Use it with the built kubectl:\n\n", time.Since(s.started).Round(time.Second))
	fmt.Fprintf(&b, "  export KUBECONFIG=%s\n", s.cp.Kubeconfig)
	fmt.Fprintf(&b, "  alias kubectl=%s\n", s.cp.Binaries.Kubectl())
	fmt.Fprintf(&b, "  kubectl get elasticip,elasticipattachment,networkinterface,arpadvertisement\n\n")
	fmt.Fprintf(&b, "The external client is network namespace %s (%s); for example:\n", s.c.Client.Path(), harness.ClientIP)
	fmt.Fprintf(&b, "  nsenter --net=%s ping -c1 <ElasticIP>\n", s.c.Client.Path())
	for _, pl := range placement {
		fmt.Fprintf(&b, "Pod %s runs in namespace %s on %s (namespace %s)\n", pl.pod, s.pods[pl.pod].NS.Path(), pl.node, s.c.Nodes[pl.node].NS.Path())
	}
	fmt.Fprintf(&b, "\nStop it with: make sandbox-down\n")
	fmt.Print(b.String())
	_ = os.WriteFile(filepath.Join(stateDir, "usage"), []byte(b.String()), 0o644)
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}

func orError(s string, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return s
}
