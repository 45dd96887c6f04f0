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
	"slices"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sync/errgroup"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
	// Spares are Nodes AddNode may start later (their credentials are made at start,
	// when the API server reads its tokens).
	Spares []string
	// JuneauBinary and BoxBinary are statically linked builds of cmd/juneau and
	// test/images/box.
	JuneauBinary, BoxBinary string
	// Logs is where the teardown copies every component's log; empty: nowhere.
	Logs string
	// Progress, if set, receives a line per step.
	Progress func(format string, args ...any)
	// CNI is the primary CNI: CNIPtp (the default) or CNIFlannel.
	CNI string
}

// The primary CNIs a cluster can run.
const (
	// CNIPtp: the reference ptp plugin with host-local IPAM, both families, masquerading
	// Pod egress; the Nodes route each other's Pod CIDRs over the segment.
	CNIPtp = "ptp"
	// CNIFlannel: flanneld on every Node (VXLAN backend, its subnet lease on the Node
	// object in the API server, both families), and the flannel CNI meta plugin
	// delegating to bridge + host-local.
	CNIFlannel = "flannel"
)

// CNIs lists the primary CNIs a cluster can run.
var CNIs = []string{CNIPtp, CNIFlannel}

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

	opts   Options
	run    *run
	bins   binaries
	cniDir string
	// flannelDir holds flanneld, the flannel CNI plugin and bridge (CNIFlannel only).
	flannelDir string
	ca         *framework.CA
	forwarder  *forwarder
	registry   *imageRegistry
	// images are the images every Node has, for a Node AddNode starts.
	images map[string]v1.Image
	mu     sync.Mutex
	procs  []*proc
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

// Check reports what this machine lacks to run a cluster with the primary CNI cni
// (empty: CNIPtp): root, the built binaries, the Debian packages, busybox-static.
func Check(cni string) error {
	if os.Geteuid() != 0 {
		return errors.New("a real cluster needs root")
	}
	if cni != "" && !slices.Contains(CNIs, cni) {
		return fmt.Errorf("unknown primary CNI %q: one of %s", cni, strings.Join(CNIs, ", "))
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
	cniDir, err := framework.CNIPluginDir()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(cniDir, "loopback")); err != nil {
		missing = append(missing, filepath.Join(cniDir, "loopback")+" (hack/build-cni-plugins.sh)")
	}
	if cni == CNIFlannel {
		if _, err := framework.FlannelDir(); err != nil {
			missing = append(missing, err.Error())
		}
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
	if opts.CNI == "" {
		opts.CNI = CNIPtp
	}
	if err := Check(opts.CNI); err != nil {
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
	if opts.CNI == CNIFlannel {
		if c.flannelDir, err = framework.FlannelDir(); err != nil {
			return nil, err
		}
	}
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
	c.images = imgs
	if c.registry, err = c.serveRegistry(ctx, imgs); err != nil {
		return nil, err
	}
	if err := c.startNodes(ctx); err != nil {
		return nil, err
	}
	c.progress("%d Nodes Ready %s after start", len(c.Nodes), time.Since(start).Round(100*time.Millisecond))
	return c, nil
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
	if c.opts.CNI == CNIFlannel {
		ids = append(ids, &identity{name: "flannel", user: flannelUser})
	}
	for _, name := range append(slices.Clone(c.opts.Nodes), c.opts.Spares...) {
		ids = append(ids, &identity{name: name, user: "system:node:" + name, groups: []string{"system:nodes"}})
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
	if err := c.loadImages(ctx, imgs, c.Nodes); err != nil {
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
	if c.opts.CNI == CNIFlannel {
		if err := c.startFlannel(ctx); err != nil {
			return err
		}
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.Kube.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// flannelUser is flanneld's identity; flannelRBAC gives it what flannel's own manifests
// give its ServiceAccount.
const flannelUser = "juneau-cluster:flannel"

var flannelRBAC = []runtime.Object{
	&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "flannel"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "nodes", "namespaces"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}},
	}},
	&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "flannel"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "flannel"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: flannelUser}}},
}

// startFlannel gives flanneld its RBAC and starts it on every Node, once each Node has
// its Pod CIDRs.
func (c *Cluster) startFlannel(ctx context.Context) error {
	rbac := c.Kube.RbacV1()
	for _, o := range flannelRBAC {
		var err error
		switch o := o.(type) {
		case *rbacv1.ClusterRole:
			_, err = rbac.ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = rbac.ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			return fmt.Errorf("flannel's RBAC: %w", err)
		}
	}
	var g errgroup.Group
	for _, n := range c.Nodes {
		g.Go(func() error { return n.startFlannel(ctx) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	c.progress("flanneld up on %d Nodes (VXLAN, both families)", len(c.Nodes))
	return nil
}

// CNI is the cluster's primary CNI, CNIPtp or CNIFlannel.
func (c *Cluster) CNI() string { return c.opts.CNI }

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
