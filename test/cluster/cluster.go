// Package cluster starts a real Kubernetes cluster on this machine, entirely inside
// namespaces it creates: etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler in a control-plane network namespace; Nodes, each a network namespace
// with a mount namespace of its own in which Debian's containerd and runc, the kubelet
// and kube-proxy (nftables mode) run, with ptp + host-local as the primary CNI; and an
// external client namespace. Everything sits on one L2 segment, 10.225.51.0/24, that
// exists only between these namespaces; no namespace has a default route, so no packet
// can leave the machine. The root namespace holds only a listener on 127.0.0.1 that
// forwards kubectl to the API server.
//
// Each cluster lives in a run directory of its own (namespaces as files, configuration,
// data, logs) that also records everything it created, so Teardown removes it from the
// directory alone and reports what it could not. Clusters never share anything and can
// run side by side.
//
// The binaries come from hack/build-control-plane.sh and hack/build-cni-plugins.sh,
// the Debian packages from hack/install-test-deps.sh; images are built in-process
// (test/images) and imported with ctr, and served to pulls by a registry on the segment.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	juneauclient "github.com/loutres/juneau/pkg/generated/clientset/versioned"
	"github.com/loutres/juneau/test/framework"
	"github.com/loutres/juneau/test/images"
)

// Options shape a cluster.
type Options struct {
	// Kind names the run: demo, sandbox, test.
	Kind string
	// RepoRoot is the clone: its manifests are installed, and its runs are the ones
	// swept when their owner died.
	RepoRoot string
	// Nodes to start; default node-a and node-b.
	Nodes []string
	// JuneauBinary and BoxBinary are statically linked builds of cmd/juneau and
	// test/images/box.
	JuneauBinary, BoxBinary string
	// Logs is where the teardown copies every component's log; empty: nowhere.
	Logs string
	// Progress, if set, receives a line per step.
	Progress func(format string, args ...any)
}

// Cluster is a running cluster.
type Cluster struct {
	// Dir is the run directory; component logs are in Dir/logs.
	Dir string
	// Kubeconfig is the admin's, for kubectl and clients in the root namespace.
	Kubeconfig string
	// Kubectl is the built kubectl (never the system one).
	Kubectl string
	Config  *rest.Config
	Kube    kubernetes.Interface
	Juneau  juneauclient.Interface
	Nodes   []*Node
	// ClientNS is the external client's network namespace file (ClientIP on eth0);
	// CPNS the control plane's, SegmentNS the one holding the segment's bridge.
	ClientNS, CPNS, SegmentNS string
	// JuneauImage is the juneau image loaded into the Nodes.
	JuneauImage string

	opts      Options
	run       *run
	bins      binaries
	cniDir    string
	ca        *framework.CA
	forwarder *forwarder
	registry  *imageRegistry
	mu        sync.Mutex
	procs     []*proc
}

func (c *Cluster) addProc(p *proc) {
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
}

// binaries is the cache of built Kubernetes binaries.
type binaries struct{ dir string }

func (b binaries) path(name string) string { return filepath.Join(b.dir, name) }

// DefaultNodes are the Nodes of a cluster unless Options.Nodes says otherwise.
var DefaultNodes = []string{"node-a", "node-b"}

// Check reports what this machine lacks to run a cluster: root, the built binaries,
// the Debian packages, busybox-static.
func Check() error {
	if os.Geteuid() != 0 {
		return errors.New("a real cluster needs root")
	}
	var missing []string
	bins, err := framework.FindBinaries()
	if err != nil {
		return err
	}
	for _, name := range []string{"kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy"} {
		if _, err := os.Stat(filepath.Join(bins.Dir, name)); err != nil {
			missing = append(missing, filepath.Join(bins.Dir, name)+" (hack/build-control-plane.sh)")
		}
	}
	cni, err := framework.CNIPluginDir()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(cni, "loopback")); err != nil {
		missing = append(missing, filepath.Join(cni, "loopback")+" (hack/build-cni-plugins.sh)")
	}
	for _, tool := range []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc", "nsenter", "unshare", "nft", "iptables", "conntrack"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool+" (hack/install-test-deps.sh)")
		}
	}
	if _, err := os.Stat(images.BusyboxBinary); err != nil {
		missing = append(missing, images.BusyboxBinary+" (Debian busybox-static, hack/install-test-deps.sh)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing: %s", strings.Join(missing, ", "))
	}
	return nil
}

func (c *Cluster) progress(format string, args ...any) {
	if c.opts.Progress != nil {
		c.opts.Progress(format, args...)
	}
}

// Start starts a cluster and waits until every Node is Ready. On error, everything it
// started is torn down and the error says why (and what the teardown left, if anything).
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	if err := Check(); err != nil {
		return nil, err
	}
	if len(opts.Nodes) == 0 {
		opts.Nodes = DefaultNodes
	}
	fw, err := framework.FindBinaries()
	if err != nil {
		return nil, err
	}
	cni, err := framework.CNIPluginDir()
	if err != nil {
		return nil, err
	}
	c = &Cluster{opts: opts, bins: binaries{fw.Dir}, cniDir: cni, Kubectl: fw.Kubectl()}
	swept, problems := SweepAbandoned(opts.RepoRoot)
	if len(swept) > 0 {
		c.progress("removed the runs of processes killed before their teardown: %s", strings.Join(swept, " "))
	}
	if len(problems) > 0 {
		c.progress("%v", errors.Join(problems...))
	}
	if c.run, err = newRun(opts.Kind, opts.RepoRoot, opts.Logs); err != nil {
		return nil, err
	}
	c.Dir = c.run.dir
	c.Kubeconfig = c.run.path("kubeconfig")
	started := c // the returns below set c to nil
	defer func() {
		if err != nil {
			err = errors.Join(err, started.Stop())
		}
	}()
	start := time.Now()
	if err := c.network(); err != nil {
		return nil, err
	}
	if err := c.clients(); err != nil {
		return nil, err
	}
	var imgs map[string]v1.Image
	errc := make(chan error, 1)
	go func() {
		var err error
		if imgs, err = c.buildImages(); err == nil {
			err = c.startNodeRuntimes(ctx, imgs)
		}
		errc <- err
	}()
	cpErr := c.startControlPlane(ctx)
	if err := errors.Join(cpErr, <-errc); err != nil {
		return nil, err
	}
	if c.registry, err = c.serveRegistry(ctx, imgs); err != nil {
		return nil, err
	}
	if err := c.startNodes(ctx); err != nil {
		return nil, err
	}
	c.progress("%d Nodes Ready %s after start", len(c.Nodes), time.Since(start).Round(100*time.Millisecond))
	return c, nil
}

// network creates the namespaces, the segment and the routes between them.
func (c *Cluster) network() error {
	var err error
	if c.SegmentNS, err = c.run.newNamespace("segment"); err != nil {
		return err
	}
	if err := segment(c.SegmentNS); err != nil {
		return err
	}
	if c.CPNS, err = c.run.newNamespace("control-plane"); err != nil {
		return err
	}
	if err := plug(c.SegmentNS, c.CPNS, "cp", ControlPlaneIP+"/24"); err != nil {
		return err
	}
	if c.ClientNS, err = c.run.newNamespace("client"); err != nil {
		return err
	}
	if err := plug(c.SegmentNS, c.ClientNS, "client", ClientIP+"/24"); err != nil {
		return err
	}
	id := strings.TrimPrefix(filepath.Base(c.Dir), runPrefix)
	for i, name := range c.opts.Nodes {
		n := &Node{Name: name, IP: nodeIP(i), PodCIDR: nodePodCIDR(i), Dir: c.run.path("nodes", name),
			index: i, cgroup: "juneau-" + id + "-" + name, c: c}
		if n.NS, err = c.run.newNamespace(name); err != nil {
			return err
		}
		if err := plug(c.SegmentNS, n.NS, fmt.Sprintf("n%d", i), n.IP+"/24"); err != nil {
			return err
		}
		if err := sysctl(n.NS, "net/ipv4/ip_forward", "1"); err != nil {
			return err
		}
		c.Nodes = append(c.Nodes, n)
	}
	// The API server reaches webhook Pods, and every Node the others' Pods, through the
	// Node owning the Pod CIDR. The external client knows only the segment.
	for _, n := range c.Nodes {
		if err := route(c.CPNS, n.PodCIDR, n.IP); err != nil {
			return err
		}
		// Connections a Node itself opens to a Service (a hostNetwork Pod reaching the
		// API server at 10.96.0.1) need a route before kube-proxy's DNAT rewrites their
		// destination; where real Nodes use their default route, these use one for the
		// Service range only.
		if err := route(n.NS, ServiceCIDR, ControlPlaneIP); err != nil {
			return err
		}
		for _, m := range c.Nodes {
			if m != n {
				if err := route(n.NS, m.PodCIDR, m.IP); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// clients starts the forwarder, writes the credentials and builds the admin clients.
func (c *Cluster) clients() error {
	var err error
	if c.forwarder, err = newForwarder(c.CPNS, fmt.Sprintf("%s:%d", ControlPlaneIP, APIServerPort)); err != nil {
		return err
	}
	ids := []*identity{
		{name: "admin", user: "juneau-admin", groups: []string{"system:masters"}},
		{name: "kube-controller-manager", user: "system:kube-controller-manager"},
		{name: "kube-scheduler", user: "system:kube-scheduler"},
		{name: "kube-proxy", user: "system:kube-proxy"},
		// Prometheus (StartPrometheus) lists and watches Pods for its service discovery.
		{name: "prometheus", user: "juneau-prometheus", groups: []string{"system:masters"}},
	}
	for _, n := range c.Nodes {
		ids = append(ids, &identity{name: n.Name, user: "system:node:" + n.Name, groups: []string{"system:nodes"}})
	}
	if err := c.credentials(ids); err != nil {
		return err
	}
	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return err
	}
	c.Config.QPS, c.Config.Burst = 100, 200
	if c.Kube, err = kubernetes.NewForConfig(c.Config); err != nil {
		return err
	}
	c.Juneau, err = juneauclient.NewForConfig(c.Config)
	return err
}

func (c *Cluster) startControlPlane(ctx context.Context) error {
	if err := c.startEtcd(ctx); err != nil {
		return err
	}
	apiserver, err := c.startAPIServer(ctx)
	if err != nil {
		return err
	}
	if err := c.waitAPIServer(ctx, apiserver); err != nil {
		return err
	}
	c.progress("control plane up: etcd, kube-apiserver %s", framework.KubernetesVersion)
	return c.startControllers(ctx)
}

// startNodeRuntimes prepares each Node's mount namespace, starts its containerd and
// loads the images.
func (c *Cluster) startNodeRuntimes(ctx context.Context, imgs map[string]v1.Image) error {
	for _, n := range c.Nodes {
		if err := n.prepare(); err != nil {
			return err
		}
		if err := n.startHolder(ctx); err != nil {
			return err
		}
		if _, err := n.startContainerd(ctx); err != nil {
			return err
		}
	}
	if err := c.loadImages(ctx, imgs); err != nil {
		return err
	}
	c.progress("containerd up on %d Nodes, images loaded (juneau: %s)", len(c.Nodes), c.JuneauImage)
	return nil
}

// startNodes starts the kubelets and kube-proxies and waits for the Nodes and the
// default ServiceAccount.
func (c *Cluster) startNodes(ctx context.Context) error {
	kubelets := map[string]*proc{}
	for _, n := range c.Nodes {
		k, err := n.startKubelet(ctx)
		if err != nil {
			return err
		}
		kubelets[n.Name] = k
		if _, err := n.startKubeProxy(ctx); err != nil {
			return err
		}
	}
	for _, n := range c.Nodes {
		if err := n.register(ctx, kubelets[n.Name]); err != nil {
			return err
		}
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.Kube.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// Stop tears the cluster down: the forwarder and the registry, then everything Teardown
// removes. It reports what it could not remove.
func (c *Cluster) Stop() error {
	if c == nil || c.run == nil {
		return nil
	}
	c.run.close()
	c.forwarder.close()
	c.registry.close()
	err := Teardown(c.Dir)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		select {
		case <-p.done: // killed by Teardown, reaped by its Wait
		case <-time.After(10 * time.Second):
			err = errors.Join(err, fmt.Errorf("%s (pid %d) did not exit", p.name, p.pid))
		}
	}
	return err
}

// Node returns the Node named name, or nil.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}
