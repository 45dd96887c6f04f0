package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/libcni"
	cnitypes "github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/netns"
)

// PodSpec is what a test asks of a Pod.
type PodSpec struct {
	Namespace, Name, Node string
	Annotations           map[string]string
	Labels                map[string]string
	OwnerReferences       []metav1.OwnerReference
	// ReadinessGates are the condition types the Pod lists as readiness gates; nil
	// means juneau's own (v1alpha1.PodConditionElasticIP), as a user's Pod that wants
	// to know its ElasticIP works lists it; an empty list means none.
	ReadinessGates []string
}

// Pod is a Pod object plus, once started, its network namespace.
type Pod struct {
	c         *Cluster
	Spec      PodSpec
	Node      *Node
	Object    *corev1.Pod
	NS        *netns.NS
	IP        string   // from the CNI result: the Pod IP, or the ElasticIP on a direct eth0
	IPs       []string // every address of the CNI result, IPv4 first
	Result    *current.Result
	started   bool
	namespace string
	// sandbox counts the Pod's sandboxes before the current one (RestartSandbox):
	// each gets a container ID of its own, as a runtime gives it.
	sandbox int
	// deadNS is the path of the namespace of a sandbox that died with its Node
	// (Reboot), until RestartSandbox tears the sandbox down.
	deadNS string
}

// register keeps the Pod for Reboot.
func (c *Cluster) register(p *Pod) *Pod {
	c.podsMu.Lock()
	defer c.podsMu.Unlock()
	c.pods = append(c.pods, p)
	return p
}

// containerID is the runtime's ID of the Pod's current sandbox.
func (p *Pod) containerID() string {
	if p.sandbox == 0 {
		return string(p.Object.UID)
	}
	return fmt.Sprintf("%s-%d", p.Object.UID, p.sandbox)
}

// CreatePod creates the Pod object bound to its Node (no network yet).
func (c *Cluster) CreatePod(spec PodSpec) *Pod {
	c.t.Helper()
	node, ok := c.Nodes[spec.Node]
	if !ok {
		c.t.Fatalf("no Node %q", spec.Node)
	}
	gateTypes := spec.ReadinessGates
	if gateTypes == nil {
		gateTypes = []string{v1alpha1.PodConditionElasticIP}
	}
	gates := make([]corev1.PodReadinessGate, len(gateTypes))
	for i, g := range gateTypes {
		gates[i] = corev1.PodReadinessGate{ConditionType: corev1.PodConditionType(g)}
	}
	obj, err := c.CP.Kube.CoreV1().Pods(spec.Namespace).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Annotations: spec.Annotations, Labels: spec.Labels, OwnerReferences: spec.OwnerReferences},
		Spec: corev1.PodSpec{
			NodeName: spec.Node, ReadinessGates: gates,
			Containers:                    []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
			TerminationGracePeriodSeconds: ptr.To[int64](30),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatalf("creating Pod %s/%s: %v", spec.Namespace, spec.Name, err)
	}
	return c.register(&Pod{c: c, Spec: spec, Node: node, Object: obj})
}

// RunPod creates the Pod and starts its network, failing the test if CNI ADD fails.
func (c *Cluster) RunPod(spec PodSpec) *Pod {
	c.t.Helper()
	p := c.CreatePod(spec)
	if err := p.Start(); err != nil {
		c.t.Fatalf("starting Pod %s/%s: %v", spec.Namespace, spec.Name, err)
	}
	return p
}

// conflist is the Node's CNI configuration: ptp (masquerading Pod egress, as real
// clusters do) with host-local IPAM, then juneau chained. In a dual-stack cluster the
// Pod gets an IPv6 address from a second range, and ::/0.
func (n *Node) conflist(waitSeconds int) ([]byte, error) {
	ranges := [][]map[string]string{{{"subnet": n.PodCIDR}}}
	routes := []map[string]string{{"dst": "0.0.0.0/0"}}
	if n.PodCIDR6 != "" {
		ranges = append(ranges, []map[string]string{{"subnet": n.PodCIDR6}})
		routes = append(routes, map[string]string{"dst": "::/0"})
	}
	return json.Marshal(map[string]any{
		"cniVersion": "1.0.0",
		"name":       "juneau-e2e",
		"plugins": []map[string]any{
			{"type": "ptp", "ipMasq": true, "ipam": map[string]any{
				"type": "host-local", "ranges": ranges,
				"routes": routes, "dataDir": filepath.Join(n.dir, "ipam"),
			}},
			{"type": "juneau", "agentSocket": n.Socket, "waitSeconds": waitSeconds,
				"stateDir": filepath.Join(n.dir, "cni-state"), "logFile": filepath.Join(n.dir, "cni.log")},
		},
	})
}

func (p *Pod) runtimeConf() *libcni.RuntimeConf {
	netnsPath := p.deadNS
	if p.NS != nil {
		netnsPath = p.NS.Path()
	}
	return &libcni.RuntimeConf{
		ContainerID: p.containerID(),
		NetNS:       netnsPath,
		IfName:      "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", p.Spec.Namespace},
			{"K8S_POD_NAME", p.Spec.Name}, {"K8S_POD_UID", string(p.Object.UID)}},
	}
}

func (p *Pod) cni(waitSeconds int) (*libcni.CNIConfig, *libcni.NetworkConfigList, error) {
	data, err := p.Node.conflist(waitSeconds)
	if err != nil {
		return nil, nil, err
	}
	list, err := libcni.ConfListFromBytes(data)
	if err != nil {
		return nil, nil, err
	}
	return libcni.NewCNIConfigWithCacheDir([]string{p.c.Plugins}, filepath.Join(p.Node.dir, "cni-cache"), nil), list, nil
}

// Start runs CNI ADD in the Node's namespace, as the runtime does, and writes the Pod's
// IP and Running phase as the kubelet does. A failed ADD is returned (the runtime would
// retry); the namespace is kept so Start can be called again.
func (p *Pod) Start() error {
	return p.StartWithWait(10)
}

// StartWithWait is Start with the juneau plugin's wait for the ElasticIP in seconds.
func (p *Pod) StartWithWait(waitSeconds int) error {
	p.c.t.Helper()
	if p.NS == nil {
		p.NS = netns.New(p.c.t, "pod")
		p.c.t.Cleanup(func() { _ = p.cniDel() })
	}
	cfg, list, err := p.cni(waitSeconds)
	if err != nil {
		return err
	}
	var res cnitypes.Result
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(waitSeconds+30)*time.Second)
	defer cancel()
	err = p.Node.NS.Do(func() error {
		var err error
		res, err = cfg.AddNetworkList(ctx, list, p.runtimeConf())
		return err
	})
	if err != nil {
		// A runtime tears a failed sandbox down before it retries.
		if delErr := p.cniDel(); delErr != nil {
			p.c.t.Logf("CNI DEL after a failed ADD of %s: %v", p.Spec.Name, delErr)
		}
		return fmt.Errorf("CNI ADD: %w", err)
	}
	if p.Result, err = current.NewResultFromResult(res); err != nil {
		return err
	}
	if len(p.Result.IPs) == 0 {
		return fmt.Errorf("CNI ADD returned no IP: %+v", p.Result)
	}
	var v4, v6 []string
	for _, ip := range p.Result.IPs {
		if ip.Address.IP.To4() != nil {
			v4 = append(v4, ip.Address.IP.String())
		} else {
			v6 = append(v6, ip.Address.IP.String())
		}
	}
	p.IPs = append(v4, v6...)
	p.IP = p.IPs[0]
	p.started = true
	return p.writeRunning()
}

func (p *Pod) writeRunning() error {
	pods := p.c.CP.Kube.CoreV1().Pods(p.Spec.Namespace)
	// Controllers write the Pod too (annotations, readiness gate): retry on conflicts.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := pods.Get(context.Background(), p.Spec.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		obj.Status.Phase = corev1.PodRunning
		obj.Status.PodIP = p.IP
		obj.Status.PodIPs = nil
		for _, ip := range p.IPs {
			obj.Status.PodIPs = append(obj.Status.PodIPs, corev1.PodIP{IP: ip})
		}
		if obj.Status.StartTime == nil {
			obj.Status.StartTime = &now
		}
		setPodCondition(obj, corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now})
		if len(p.Spec.ReadinessGates) == 0 {
			setPodCondition(obj, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now})
		}
		p.Object, err = pods.UpdateStatus(context.Background(), obj, metav1.UpdateOptions{})
		return err
	})
}

// setPodCondition sets a condition of the Pod's status, replacing one of its type.
func setPodCondition(pod *corev1.Pod, c corev1.PodCondition) {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == c.Type {
			pod.Status.Conditions[i] = c
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, c)
}

// RestartSandbox re-creates the Pod's sandbox as the kubelet does when the Pod's Node
// came back from a reboot (Reboot): the dead sandbox is torn down (CNI DEL, its
// network namespace gone), then a new one, with a new container ID and a new
// namespace, is set up (CNI ADD) and the Pod's IP, which may have changed, written.
func (p *Pod) RestartSandbox() error {
	p.c.t.Helper()
	if p.deadNS != "" {
		if err := p.cniDel(); err != nil {
			return fmt.Errorf("CNI DEL of the dead sandbox of %s: %w", p.Spec.Name, err)
		}
		p.deadNS = ""
	}
	p.sandbox++
	return p.Start()
}

// cniDel runs CNI DEL as the runtime does when a sandbox goes; it is idempotent.
func (p *Pod) cniDel() error {
	cfg, list, err := p.cni(1)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return p.Node.NS.Do(func() error { return cfg.DelNetworkList(ctx, list, p.runtimeConf()) })
}

// Terminate starts a graceful deletion: the Pod is Terminating until Gone is called.
func (p *Pod) Terminate() {
	p.c.t.Helper()
	if err := p.c.CP.Kube.CoreV1().Pods(p.Spec.Namespace).Delete(context.Background(), p.Spec.Name, metav1.DeleteOptions{}); err != nil {
		p.c.t.Fatal(err)
	}
}

// Gone finishes the Pod as the kubelet does: its network is torn down (CNI DEL) and the
// object removed.
func (p *Pod) Gone() {
	p.c.t.Helper()
	if p.NS != nil {
		if err := p.cniDel(); err != nil {
			p.c.t.Errorf("CNI DEL of %s: %v", p.Spec.Name, err)
		}
	}
	err := p.c.CP.Kube.CoreV1().Pods(p.Spec.Namespace).Delete(context.Background(), p.Spec.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	if ignoreNotFound(err) != nil {
		p.c.t.Fatal(err)
	}
}

// BindAndStart schedules an existing Pod (made by kubectl apply, say) to node, as the
// scheduler would, and starts its network, as the kubelet would.
func (c *Cluster) BindAndStart(namespace, name, node string) (*Pod, error) {
	c.t.Helper()
	if _, ok := c.Nodes[node]; !ok {
		return nil, fmt.Errorf("no Node %q", node)
	}
	if err := c.CP.Kube.CoreV1().Pods(namespace).Bind(context.Background(), &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("binding Pod %s/%s to %s: %w", namespace, name, node, err)
	}
	p := c.AdoptPod(namespace, name)
	return p, p.Start()
}

// AdoptPod wraps a Pod made elsewhere (kubectl, say) and already bound to a Node, so the
// harness can start its network.
func (c *Cluster) AdoptPod(namespace, name string) *Pod {
	c.t.Helper()
	obj, err := c.CP.Kube.CoreV1().Pods(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	n, ok := c.Nodes[obj.Spec.NodeName]
	if !ok {
		c.t.Fatalf("Pod %s/%s is on unknown Node %q", namespace, name, obj.Spec.NodeName)
	}
	spec := PodSpec{Namespace: namespace, Name: name, Node: n.Name, Annotations: obj.Annotations, Labels: obj.Labels, OwnerReferences: obj.OwnerReferences}
	for _, g := range obj.Spec.ReadinessGates {
		spec.ReadinessGates = append(spec.ReadinessGates, string(g.ConditionType))
	}
	return c.register(&Pod{c: c, Spec: spec, Node: n, Object: obj})
}
