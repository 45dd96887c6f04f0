// Package harness plays the kubelet's part for simulated Nodes so the whole system runs
// for real on one machine: a real control plane, the juneau controller (and webhook) as
// processes, one network namespace per Node on a shared "external" L2 segment with an
// external client, `juneau node` running inside each Node's namespace, and Pods whose
// network is set up by the CNI chain ptp + host-local + juneau invoked through libcni,
// exactly as a container runtime does.
//
// Addresses exist only inside the namespaces the harness creates: the external segment
// is 10.225.51.0/24 (client .100, Nodes .2, .3, ...), Pods 10.244.<n>.0/24 per Node,
// each Node routing the others' Pod ranges through them. A dual-stack cluster
// (Options.DualStack) adds unique local IPv6 addresses beside them: fd00:225:51::/64 on
// the segment (client ::100, Nodes ::2, ::3, ...) and fd00:244:0:<n>::/64 per Node for
// Pods, inside fd00:244::/56.
package harness

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/loutres/juneau/test/framework"
	"github.com/loutres/juneau/test/netns"
	"github.com/loutres/juneau/test/require"
)

// Fixed addresses of the simulated external segment.
const (
	ExternalPrefix = "10.225.51.0/24"
	ClientIP       = "10.225.51.100"
	ClusterCIDR    = "10.244.0.0/16"
	bridgeName     = "br-ext"
	extIface       = "ext0"

	// The far client sits behind a router on the external segment.
	RouterIP    = "10.225.51.254"
	FarPrefix   = "10.225.60.0/24"
	FarRouterIP = "10.225.60.1"
	FarClientIP = "10.225.60.2"
	RouterMTU   = 1280

	// The IPv6 side of a dual-stack cluster.
	ExternalPrefix6 = "fd00:225:51::/64"
	ClientIP6       = "fd00:225:51::100"
	ClusterCIDR6    = "fd00:244::/56"
	RouterIP6       = "fd00:225:51::254"
	FarPrefix6      = "fd00:225:60::/64"
	FarRouterIP6    = "fd00:225:60::1"
	FarClientIP6    = "fd00:225:60::2"
)

// Options shape a cluster.
type Options struct {
	// Nodes to simulate; default node-a and node-b.
	Nodes []string
	// ControllerArgs are extra flags of `juneau controller`.
	ControllerArgs []string
	// FarClient adds a client behind a router whose far link has a small MTU
	// (RouterMTU), for Path MTU Discovery through the NAT.
	FarClient bool
	// Router adds the same router and far client with a full-size far link, for tests
	// that run a BGP daemon in the router (Cluster.Router).
	Router bool
	// NoWebhook leaves admission out, to produce the races the webhook exists to stop.
	NoWebhook bool
	// DualStack gives the segment, the Nodes and the Pods IPv6 addresses too (and the far
	// client, with FarClient or Router).
	DualStack bool
	// AgentArgs are extra flags of `juneau node` (given last, so they override the
	// harness's own, e.g. --resync-period).
	AgentArgs []string
}

// Cluster is a running simulated cluster.
type Cluster struct {
	t       testing.TB
	CP      *framework.ControlPlane
	Dir     string
	Ext     *netns.NS // holds the external bridge
	Client  *netns.NS // the external client, ClientIP on eth0
	Far     *netns.NS // with Options.FarClient or Router: FarClientIP behind a router
	Router  *netns.NS // with Options.FarClient or Router: RouterIP on the segment
	Nodes   map[string]*Node
	Plugins string // CNI plugin directory: ptp, host-local, juneau

	dualStack bool

	Controller *framework.Component
	Webhook    *framework.Webhook

	agentArgs []string
	farClient bool
	// refusals are the periods in which components may be refused: see ExpectRefusals.
	refusals [][2]time.Time
	podsMu   sync.Mutex
	pods     []*Pod // every Pod made through the harness, for Reboot
}

// Node is a simulated Node: a network namespace with its agent.
type Node struct {
	Name       string
	Index      int
	NS         *netns.NS
	IP         string // on ext0
	PodCIDR    string
	IP6        string // on ext0, in a dual-stack cluster
	PodCIDR6   string // in a dual-stack cluster
	Kubeconfig string
	Socket     string // the agent's CNI socket
	Agent      *framework.Component
	dir        string
	agentArgs  []string
	mac        net.HardwareAddr // of ext0, kept across reboots as a real NIC's is
	stopFwd    func()
}

// New builds the cluster; everything is torn down when the test ends.
func New(t testing.TB, cp *framework.ControlPlane, opts Options) *Cluster {
	t.Helper()
	require.Root(t)
	if len(opts.Nodes) == 0 {
		opts.Nodes = []string{"node-a", "node-b"}
	}
	pluginDir, err := framework.CNIPluginDir()
	if err != nil {
		require.Unmet(t, "%v", err)
	}
	c := &Cluster{t: t, CP: cp, Dir: t.TempDir(), Nodes: map[string]*Node{}, agentArgs: opts.AgentArgs, dualStack: opts.DualStack}
	c.Plugins = c.pluginDir(pluginDir)

	c.Ext = netns.New(t, "ext")
	c.Ext.Bridge(bridgeName)
	c.Ext.Up(bridgeName)
	c.Client = netns.New(t, "cli")
	c.attach(c.Client, "eth0", "cli")
	c.Client.Addr("eth0", ClientIP+"/24")
	if c.dualStack {
		c.Client.Addr("eth0", ClientIP6+"/64")
	}

	// Every component runs with the credentials of its own ServiceAccount and the RBAC
	// of manifests/, never as admin, so least privilege is exercised for real; each node
	// agent's token is bound to its Node, so the node-scope policy of manifests/ judges
	// every write it makes.
	cp.ApplyRBAC(t)
	controllerKubeconfig := cp.ServiceAccountKubeconfig(t, framework.SystemNamespace, framework.ControllerServiceAccount)
	c.Controller = framework.StartComponent(t, "controller", append([]string{"controller",
		"--kubeconfig=" + controllerKubeconfig, "--leader-elect=false", "--metrics-bind-address=127.0.0.1:0", "--metrics-secure=false",
		"--kube-api-qps=200", "--kube-api-burst=400", "-v=2"}, opts.ControllerArgs...)...)
	if opts.FarClient || opts.Router {
		c.addFarClient(opts.FarClient)
	}
	if !opts.NoWebhook {
		c.Webhook, _ = cp.StartWebhook(t, cp.ServiceAccountKubeconfig(t, framework.SystemNamespace, framework.WebhookServiceAccount))
	}
	c.farClient = opts.FarClient || opts.Router
	for i, name := range opts.Nodes {
		c.Nodes[name] = c.addNode(name, i)
	}
	for _, n := range c.Nodes {
		c.routePods(n)
	}
	c.waitForNodeScope(opts.Nodes[0])
	t.Cleanup(c.deleteClusterObjects)
	t.Cleanup(c.checkNothingForbidden)
	t.Cleanup(c.checkNoErrorLines)
	return c
}

// components are the controller, the webhook (if any) and every Node's current agent.
func (c *Cluster) components() []*framework.Component {
	components := []*framework.Component{c.Controller}
	if c.Webhook != nil {
		components = append(components, c.Webhook.Component)
	}
	for _, n := range c.Nodes {
		components = append(components, n.Agent)
	}
	return components
}

// checkNothingForbidden fails the test when a component was refused by RBAC or by the
// node-scope policy: the ServiceAccounts' permissions must cover everything the
// components do, and no agent may write another Node's objects. An RBAC refusal names
// the user refused ("is forbidden: User ... cannot ..."), the policy's names the policy;
// a 403 of the webhook (a deletion refused while something still references the object,
// which the webhook and the refused controller both log) is neither.
func (c *Cluster) checkNothingForbidden() {
	for _, comp := range c.components() {
		for _, line := range strings.Split(comp.Log(), "\n") {
			if c.refusalExpected(line) {
				continue
			}
			if strings.Contains(line, "is forbidden: User ") || strings.Contains(line, "ValidatingAdmissionPolicy '"+nodeScopePolicy+"'") {
				c.t.Errorf("%s was refused by the API server (RBAC or the node-scope policy): %s", comp.Name, line)
				break
			}
		}
	}
}

// ExpectRefusals tells the end-of-test checks that components may be refused by RBAC,
// and may log at error level, between from and to: a kube-apiserver that starts serves
// requests before its authorizer has read the RBAC objects, and refuses them meanwhile
// (components that reach it before it is ready, as they do on a single API server
// address, retry).
func (c *Cluster) ExpectRefusals(from, to time.Time) {
	c.refusals = append(c.refusals, [2]time.Time{from, to})
}

// pluginDir makes a directory with the reference plugins and the juneau binary.
func (c *Cluster) pluginDir(ref string) string {
	dir := filepath.Join(c.Dir, "cni-bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		c.t.Fatal(err)
	}
	for name, src := range map[string]string{
		"ptp": filepath.Join(ref, "ptp"), "host-local": filepath.Join(ref, "host-local"), "juneau": framework.JuneauBinary(c.t),
	} {
		if err := os.Symlink(src, filepath.Join(dir, name)); err != nil {
			c.t.Fatal(err)
		}
	}
	return dir
}

// AttachToSegment connects a namespace of the test to the external segment with a veth
// called dev inside it (port: the bridge's end), for extra routers.
func (c *Cluster) AttachToSegment(ns *netns.NS, dev, port string) { c.attach(ns, dev, port) }

// attach connects ns to the external bridge with a veth called dev inside ns.
func (c *Cluster) attach(ns *netns.NS, dev, port string) {
	netns.Veth(ns, dev, c.Ext, port)
	c.Ext.SetMaster(port, bridgeName)
	c.Ext.Up(port)
	ns.Up(dev)
}

// addFarClient puts a router on the external segment and a client behind it; with
// smallMTU on a link with a small MTU, so the router answers DF packets with
// "fragmentation needed".
func (c *Cluster) addFarClient(smallMTU bool) {
	router := netns.New(c.t, "rtr")
	c.Router = router
	c.attach(router, "eth0", "rtr")
	router.Addr("eth0", RouterIP+"/24")
	c.Far = netns.New(c.t, "far")
	netns.Veth(router, "far0", c.Far, "eth0")
	router.Up("far0")
	c.Far.Up("eth0")
	// Only the router's side is small: the far client still advertises a 1460-byte MSS,
	// so the Pod sends full-size DF segments and must learn the path MTU.
	if smallMTU {
		router.SetMTU("far0", RouterMTU)
	}
	router.Addr("far0", FarRouterIP+"/24")
	c.Far.Addr("eth0", FarClientIP+"/24")
	c.Far.Route("0.0.0.0/0", FarRouterIP, "eth0")
	router.Sysctl("net/ipv4/ip_forward", "1")
	if c.dualStack {
		// IPv6's minimum MTU is 1280 too: the Pod's 1500-byte packets get Packet Too Big.
		router.Addr("eth0", RouterIP6+"/64")
		router.Addr("far0", FarRouterIP6+"/64")
		c.Far.Addr("eth0", FarClientIP6+"/64")
		c.Far.Route("::/0", FarRouterIP6, "eth0")
		router.Sysctl("net/ipv6/conf/all/forwarding", "1")
	}
}

func (c *Cluster) addNode(name string, i int) *Node {
	t := c.t
	n := &Node{Name: name, Index: i, IP: fmt.Sprintf("10.225.51.%d", 2+i), PodCIDR: fmt.Sprintf("10.244.%d.0/24", 1+i),
		dir: filepath.Join(c.Dir, name)}
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if c.dualStack {
		n.IP6 = fmt.Sprintf("fd00:225:51::%d", 2+i)
		n.PodCIDR6 = fmt.Sprintf("fd00:244:0:%d::/64", 1+i)
	}
	c.registerNode(n)
	c.bootNode(n)
	n.Socket = filepath.Join(n.dir, "cni.sock")
	n.agentArgs = append([]string{"node", "--kubeconfig=" + n.Kubeconfig, "--node-name=" + name,
		"--cluster-cidr=" + ClusterCIDR, "--metrics-bind-address=127.0.0.1:0", "--metrics-secure=false", "--resync-period=30s",
		"--cni-socket=" + n.Socket, "--state-dir=" + n.RunDir(), "--heartbeat-lease-duration=4s", "-v=2"}, c.agentArgs...)
	if c.dualStack {
		n.agentArgs = append(n.agentArgs, "--cluster-cidr="+ClusterCIDR6)
	}
	c.StartAgent(n)
	return n
}

// StartAnotherAgent starts one more agent inside the Node's namespace, with the Node's
// arguments followed by extra (a later flag wins), as a DaemonSet rolling update with
// maxSurge does, or a restart with other settings. It does not wait for anything and
// does not replace n.Agent.
func (c *Cluster) StartAnotherAgent(n *Node, name string, extra ...string) *framework.Component {
	args := n.NS.Wrap(framework.JuneauBinary(c.t), append(slices.Clone(n.agentArgs), extra...)...)
	return framework.StartCommand(c.t, "agent-"+n.Name+"-"+name, require.Binary(c.t, "nsenter"), args...)
}

// bootNode gives the Node its network namespace on the segment (ext0 with its address,
// forwarding on, the route to the far client) and the loopback bridge to the API
// server its kubeconfig points at.
func (c *Cluster) bootNode(n *Node) {
	n.NS = netns.New(c.t, "node")
	c.attach(n.NS, extIface, fmt.Sprintf("n%d", n.Index))
	if n.mac == nil {
		n.mac = n.NS.MAC(extIface)
	} else if err := n.NS.Netlink().LinkSetHardwareAddr(n.NS.Link(extIface), n.mac); err != nil {
		c.t.Fatalf("setting the MAC of %s's %s: %v", n.Name, extIface, err)
	}
	n.NS.Addr(extIface, n.IP+"/24")
	n.NS.Sysctl("net/ipv4/ip_forward", "1")
	if n.IP6 != "" {
		n.NS.Addr(extIface, n.IP6+"/64")
		n.NS.Sysctl("net/ipv6/conf/all/forwarding", "1")
	}
	if c.farClient {
		n.NS.Route(FarPrefix, RouterIP, extIface)
		if n.IP6 != "" {
			n.NS.Route(FarPrefix6, RouterIP6, extIface)
		}
	}
	var addr string
	addr, n.stopFwd = forwardAPIServer(c.t, n.NS, strings.TrimPrefix(c.CP.URL, "https://"))
	n.Kubeconfig = c.kubeconfigFor(n, "https://"+addr)
}

// routePods makes the routed Pod network, as a primary CNI provides one: n reaches the
// other Nodes' Pod ranges through them, over the segment.
func (c *Cluster) routePods(n *Node) {
	for _, o := range c.Nodes {
		if o != n {
			n.NS.Route(o.PodCIDR, o.IP, extIface)
			if o.PodCIDR6 != "" {
				n.NS.Route(o.PodCIDR6, o.IP6, extIface)
			}
		}
	}
}

// StartAgent (re)starts the node agent inside the Node's namespace.
func (c *Cluster) StartAgent(n *Node) {
	args := n.NS.Wrap(framework.JuneauBinary(c.t), n.agentArgs...)
	n.Agent = framework.StartCommand(c.t, "agent-"+n.Name, require.Binary(c.t, "nsenter"), args...)
	c.waitFor("agent of "+n.Name+" serving its CNI socket", func(context.Context) bool {
		_, err := os.Stat(n.Socket)
		return err == nil
	}, func() string { return n.Agent.LogTail(10) })
}

// registerNode creates the Node object with its InternalIP, Ready.
func (c *Cluster) registerNode(n *Node) {
	ctx := context.Background()
	nodes := c.CP.Kube.CoreV1().Nodes()
	node, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatalf("creating Node %s: %v", n.Name, err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.IP}}
	if n.IP6 != "" {
		node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: n.IP6})
	}
	node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: n.Name})
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if _, err := nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		c.t.Fatalf("Node %s status: %v", n.Name, err)
	}
	c.t.Cleanup(func() { _ = nodes.Delete(context.Background(), n.Name, metav1.DeleteOptions{}) })
}

// kubeconfigFor writes a kubeconfig for the Node's agent (its ServiceAccount, with a
// token bound to the Node as a DaemonSet Pod's is) reaching the API server through the
// forwarder on the Node's loopback.
func (c *Cluster) kubeconfigFor(n *Node, server string) string {
	cfg, err := clientcmd.LoadFromFile(c.CP.NodeBoundKubeconfig(c.t, framework.NodeNamespace, framework.NodeServiceAccount, n.Name))
	if err != nil {
		c.t.Fatal(err)
	}
	for _, cl := range cfg.Clusters {
		cl.Server = server
	}
	path := filepath.Join(n.dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		c.t.Fatal(err)
	}
	return path
}

// deleteClusterObjects removes what tests left in the API, while the controller still
// runs to release addresses (finalizers).
func (c *Cluster) deleteClusterObjects() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	j := c.CP.Juneau.JuneauV1alpha1()
	nss, err := c.CP.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, ns := range nss.Items {
		_ = j.ElasticIPAttachments(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = c.CP.Kube.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
		_ = j.ElasticIPs(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	}
	_ = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		claims, err := j.AllocationClaims().List(ctx, metav1.ListOptions{})
		return err == nil && len(claims.Items) == 0, nil
	})
	_ = j.ExternalNetworks().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	_ = j.AddressPools().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
}

// waitFor polls cond for up to a minute, failing with describe().
func (c *Cluster) waitFor(what string, cond func(context.Context) bool, describe func() string) {
	c.t.Helper()
	framework.EventuallyWithin(c.t, time.Minute, "waiting for "+what, func(ctx context.Context) (bool, string) {
		return cond(ctx), describe()
	})
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
