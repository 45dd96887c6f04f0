package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Node is one Node of the cluster: a network namespace on the segment and a mount
// namespace of its own, in which containerd, the kubelet and kube-proxy run.
type Node struct {
	Name string
	// IP and IP6 are on eth0, the segment: the Node's InternalIPs.
	IP, IP6 string
	// PodCIDR and PodCIDR6 are the Node's spec.podCIDRs, for its primary CNI.
	PodCIDR, PodCIDR6 string
	// NS is the Node's network namespace file (nsenter --net=NS).
	NS string
	// Dir holds its configuration, containerd's data and its CNI directories:
	// Dir/cni/net.d is /etc/cni/net.d on the Node, Dir/cni/bin is /opt/cni/bin.
	Dir string

	index  int
	cgroup string
	mntNS  uint64
	holder *proc
	c      *Cluster
}

// ConfDir is the Node's /etc/cni/net.d, seen from the root mount namespace.
func (n *Node) ConfDir() string { return filepath.Join(n.Dir, "cni", "net.d") }

// ConfFile is the primary CNI's network configuration, the one juneau chains into.
func (n *Node) ConfFile() string {
	if n.c.opts.CNI == CNIFlannel {
		return filepath.Join(n.ConfDir(), "10-flannel.conflist")
	}
	return filepath.Join(n.ConfDir(), "10-ptp.conflist")
}

// Socket is the Node's containerd socket.
func (n *Node) Socket() string { return filepath.Join(n.Dir, "containerd", "containerd.sock") }

// command builds a command run on the Node: in its network and mount namespaces, as a
// process of the Node's host would (nft, ip, ls /opt/cni/bin, ...).
func (n *Node) command(ctx context.Context, argv ...string) *exec.Cmd {
	args := append([]string{fmt.Sprintf("--target=%d", n.holder.pid), "--mount", "--net", "--"}, argv...)
	cmd := exec.CommandContext(ctx, "nsenter", args...)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// Output runs argv on the Node (nft, ip, ...: in its network and mount namespaces, as a
// process of the Node's host would) and returns its combined output.
func (n *Node) Output(ctx context.Context, argv ...string) (string, error) {
	if err := n.holder.inNamespaces(n.netInode(), n.mntNS); err != nil {
		return "", err
	}
	out, err := n.command(ctx, argv...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s on %s: %w: %s", strings.Join(argv, " "), n.Name, err, out)
	}
	return string(out), nil
}

// Command builds argv to run on the Node, as Output runs it, for a caller that reads its
// output streams itself.
func (n *Node) Command(ctx context.Context, argv ...string) (*exec.Cmd, error) {
	if err := n.holder.inNamespaces(n.netInode(), n.mntNS); err != nil {
		return nil, err
	}
	return n.command(ctx, argv...), nil
}

func (n *Node) netInode() uint64 {
	ino, _ := nsInode(n.NS)
	return ino
}

// kubeletTunables are the kernel settings the kubelet insists on. They are global to
// the machine: each Node's mount namespace shows the kubelet files holding the values
// it wants over them in /proc/sys, so it finds them set and changes nothing on the host.
var kubeletTunables = map[string]string{
	"vm.overcommit_memory": "1", "vm.panic_on_oom": "0", "kernel.panic": "10", "kernel.panic_on_oops": "1",
	"kernel.keys.root_maxkeys": "1000000", "kernel.keys.root_maxbytes": "25000000",
}

// holderScript prepares a Node's mount namespace and then keeps it alive as `box
// pause`: a tmpfs on /run and overlays (upper layers in the Node's directory) on /opt,
// /var/lib, /var/log and /etc, so the paths the kubelet, containerd and CNI hard-code
// (/var/lib/kubelet/device-plugins, /var/log/pods, /run/containerd, /run/netns,
// /opt/cni/bin, /etc/cni/net.d) are the Node's own and vanish with it.
const holderScript = `set -eu
nd=$1 box=$2
mount -t tmpfs -o mode=755 juneau-node-run /run
for d in opt var/lib var/log etc; do
	mount -t overlay juneau-node -o "lowerdir=/$d,upperdir=$nd/root/$d/upper,workdir=$nd/root/$d/work" "/$d"
done
mkdir -p /opt/cni/bin /etc/cni/net.d /var/lib/kubelet /var/log/pods /var/log/containers
mount --bind "$nd/cni/bin" /opt/cni/bin
mount --bind "$nd/cni/net.d" /etc/cni/net.d
for f in "$nd"/sysctl/*; do mount --bind "$f" "/proc/sys/$(basename "$f" | tr . /)"; done
exec "$box" pause "$nd"
`

// prepare writes the Node's directories and configuration.
func (n *Node) prepare() error {
	for _, d := range []string{"cni/bin", "cni/net.d", "containerd", "runc", "kubelet", "sysctl",
		"root/opt/upper", "root/opt/work", "root/var/lib/upper", "root/var/lib/work",
		"root/var/log/upper", "root/var/log/work", "root/etc/upper", "root/etc/work"} {
		if err := os.MkdirAll(filepath.Join(n.Dir, d), 0o755); err != nil {
			return err
		}
	}
	for key, value := range kubeletTunables {
		if err := os.WriteFile(filepath.Join(n.Dir, "sysctl", key), []byte(value+"\n"), 0o644); err != nil {
			return err
		}
	}
	plugins := map[string]string{"host-local": n.c.cniDir, "loopback": n.c.cniDir}
	conflist := n.ptpConflist()
	if n.c.opts.CNI == CNIFlannel {
		plugins["flannel"], plugins["bridge"] = n.c.flannelDir, n.c.flannelDir
		conflist = flannelConflist
	} else {
		plugins["ptp"] = n.c.cniDir
	}
	for plugin, dir := range plugins {
		if err := os.Symlink(filepath.Join(dir, plugin), filepath.Join(n.Dir, "cni", "bin", plugin)); err != nil {
			return err
		}
	}
	rel, err := filepath.Rel(n.Dir, n.ConfFile())
	if err != nil {
		return err
	}
	files := map[string]string{
		rel:                      conflist,
		"containerd/config.toml": n.containerdConfig(),
		"kubelet/config.yaml":    n.kubeletConfig(),
		"kube-proxy.yaml":        n.kubeProxyConfig(),
		"flannel-net-conf.json":  flannelNetConf,
		"resolv.conf":            "",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(n.Dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// cgroupHierarchies lists the mounted cgroup hierarchies (v1 controllers, the named
// systemd one and the unified v2 one of a hybrid setup).
func cgroupHierarchies() ([]string, error) {
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil, err
	}
	var out []string
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.procs"); err == nil {
		out = append(out, "/sys/fs/cgroup") // pure v2
	}
	for _, e := range entries {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		if _, err := os.Stat(filepath.Join(p, "cgroup.procs")); err == nil && e.IsDir() {
			out = append(out, p)
		}
	}
	return out, nil
}

// startHolder creates the Node's cgroup root and its mount namespace, kept by the
// holder process, and verifies where the holder runs.
func (n *Node) startHolder(ctx context.Context) error {
	if err := n.c.run.record(recCgroup, n.cgroup); err != nil {
		return err
	}
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		if err := os.Mkdir(filepath.Join(h, n.cgroup), 0o755); err != nil {
			return fmt.Errorf("cgroup %s: %w", n.cgroup, err)
		}
	}
	box := n.c.opts.BoxBinary
	p, err := n.c.run.startProc(n.Name+"-mountns", nil, inNS(n.NS, "unshare", "--mount", "--propagation", "private", "--",
		"sh", "-c", holderScript, "holder", n.Dir, box)...)
	if err != nil {
		return err
	}
	if err := p.execd(ctx, box); err != nil {
		return err
	}
	mnt, err := procNS(p.pid, "mnt")
	if err != nil {
		return err
	}
	if err := p.inNamespaces(n.netInode(), mnt); err != nil {
		return err
	}
	n.holder, n.mntNS = p, mnt
	n.c.addProc(p)
	return n.c.run.record(recMntns, n.Name, mnt, p.pid, p.start)
}

// startOnNode starts a component in the Node's namespaces, with env added to its
// environment, and verifies it runs there.
func (n *Node) startOnNode(ctx context.Context, name string, env []string, argv ...string) (*proc, error) {
	if err := n.holder.inNamespaces(n.netInode(), n.mntNS); err != nil {
		return nil, err
	}
	p, err := n.c.run.startProc(n.Name+"-"+name, env, append([]string{"nsenter",
		fmt.Sprintf("--target=%d", n.holder.pid), "--mount", "--net", "--"}, argv...)...)
	if err != nil {
		return nil, err
	}
	if err := p.execd(ctx, argv[0]); err != nil {
		return nil, err
	}
	if err := p.inNamespaces(n.netInode(), n.mntNS); err != nil {
		return nil, err
	}
	n.c.addProc(p)
	return p, nil
}

func (n *Node) startContainerd(ctx context.Context) (*proc, error) {
	containerd, err := exec.LookPath("containerd")
	if err != nil {
		return nil, err
	}
	p, err := n.startOnNode(ctx, "containerd", nil, containerd, "--config", filepath.Join(n.Dir, "containerd", "config.toml"))
	if err != nil {
		return nil, err
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if p.exited() {
			return false, p.failure()
		}
		return exec.CommandContext(ctx, "ctr", "--address", n.Socket(), "version").Run() == nil, nil
	})
	return p, err
}

func (n *Node) startKubelet(ctx context.Context) (*proc, error) {
	return n.startOnNode(ctx, "kubelet", nil, n.c.bins.path("kubelet"),
		"--config="+filepath.Join(n.Dir, "kubelet", "config.yaml"),
		"--kubeconfig="+n.c.run.path("kubeconfigs", n.Name),
		"--root-dir="+filepath.Join(n.Dir, "kubelet"),
		"--cert-dir="+filepath.Join(n.Dir, "kubelet", "pki"),
		"--hostname-override="+n.Name, "--node-ip="+n.IP+","+n.IP6,
		"--volume-plugin-dir="+filepath.Join(n.Dir, "kubelet", "volume-plugins"))
}

func (n *Node) startKubeProxy(ctx context.Context) (*proc, error) {
	return n.startOnNode(ctx, "kube-proxy", nil, n.c.bins.path("kube-proxy"), "--config="+filepath.Join(n.Dir, "kube-proxy.yaml"))
}

// startFlannel starts flanneld on the Node as flannel's DaemonSet runs it: the kube
// subnet manager (the Node's lease is its spec.podCIDRs, its VXLAN endpoint in the
// Node's annotations), the segment's interface between the Nodes, Pod egress
// masqueraded. It waits until flanneld has written /run/flannel/subnet.env with both
// families, which the CNI plugin reads for every Pod.
func (n *Node) startFlannel(ctx context.Context) error {
	p, err := n.startOnNode(ctx, "flanneld", []string{"NODE_NAME=" + n.Name}, filepath.Join(n.c.flannelDir, "flanneld"),
		"--kube-subnet-mgr", "--kubeconfig-file="+n.c.run.path("kubeconfigs", "flannel"),
		"--iface="+segmentIface, "--ip-masq", "--net-config-path="+filepath.Join(n.Dir, "flannel-net-conf.json"))
	if err != nil {
		return err
	}
	// The Node's /run, seen through the holder of its mount namespace.
	subnetEnv := fmt.Sprintf("/proc/%d/root/run/flannel/subnet.env", n.holder.pid)
	var env string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if p.exited() {
			return false, p.failure()
		}
		data, err := os.ReadFile(subnetEnv)
		env = string(data)
		return err == nil && strings.Contains(env, "FLANNEL_SUBNET=") && strings.Contains(env, "FLANNEL_IPV6_SUBNET="), nil
	})
	if err != nil {
		return fmt.Errorf("flanneld on %s wrote no subnet file with both families (%q): %w; its log: %s", n.Name, env, err, p.log)
	}
	return nil
}

// importImages loads the images archive into the Node's containerd.
func (n *Node) importImages(ctx context.Context, archive string) error {
	out, err := exec.CommandContext(ctx, "ctr", "--address", n.Socket(), "--namespace", "k8s.io",
		"images", "import", archive).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr images import on %s: %w: %s", n.Name, err, out)
	}
	return nil
}

// register waits for the kubelet's Node object, gives it its Pod CIDRs, one per family
// (as a CNI's IPAM or the controller-manager would), and waits until it is Ready.
func (n *Node) register(ctx context.Context, kubelet *proc) error {
	nodes := n.c.Kube.CoreV1().Nodes()
	patched := false
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if kubelet.exited() {
			return false, kubelet.failure()
		}
		node, err := nodes.Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if !patched && len(node.Spec.PodCIDRs) == 0 {
			patch := fmt.Sprintf(`{"spec":{"podCIDR":%q,"podCIDRs":[%q,%q]}}`, n.PodCIDR, n.PodCIDR, n.PodCIDR6)
			if _, err := nodes.Patch(ctx, n.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				last = err.Error()
				return false, nil
			}
			patched = true
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				last = fmt.Sprintf("Ready=%s: %s", c.Status, c.Message)
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("Node %s not Ready (%s): %w; kubelet log: %s", n.Name, last, err, kubelet.log)
	}
	return nil
}
