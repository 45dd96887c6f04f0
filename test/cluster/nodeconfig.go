package cluster

import (
	"fmt"
	"path/filepath"

	"github.com/loutres/juneau/test/images"
)

// ptpConflist is the primary network, as a CNI installer would write it: ptp with
// host-local IPAM in the Node's Pod CIDRs, one range per family, masquerading Pod egress
// with nftables (its iptables backend would leave ip6tables-nft compatibility rules that
// the distribution's nft cannot list: "XT target MASQUERADE not found").
func (n *Node) ptpConflist() string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "cluster",
  "plugins": [
    {
      "type": "ptp",
      "ipMasq": true,
      "ipMasqBackend": "nftables",
      "mtu": 1500,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}], [{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0"}]
      }
    }
  ]
}
`, n.PodCIDR, n.PodCIDR6)
}

// flannelConflist is flannel's network as its installer writes it (the cni-conf.json
// of flannel's own manifests): the meta plugin reads the Node's subnets and MTU from
// flanneld's /run/flannel/subnet.env and delegates to bridge (cni0) + host-local. CNI
// 0.4.0 is the newest version that plugin speaks.
const flannelConflist = `{
  "cniVersion": "0.4.0",
  "name": "cbr0",
  "plugins": [
    {
      "type": "flannel",
      "delegate": {
        "hairpinMode": true,
        "isDefaultGateway": true
      }
    }
  ]
}
`

// flannelNetConf is flanneld's net-conf.json: both families, each Node's subnets being
// its spec.podCIDRs (the kube subnet manager reads them), the VXLAN backend, and its
// rules (Pod egress masquerading, forwarding) in nftables tables of its own beside
// kube-proxy's.
var flannelNetConf = fmt.Sprintf(`{
  "Network": %q,
  "IPv6Network": %q,
  "EnableIPv6": true,
  "EnableNFTables": true,
  "Backend": {"Type": "vxlan"}
}
`, ClusterCIDR, ClusterCIDR6)

// containerdConfig: Debian's containerd 1.6 with its own root, state, sockets and runc
// root; the CNI directories at their usual paths (the Node's own); pulls of docker.io,
// juneau.local and registry.example names served by the cluster's registry.
func (n *Node) containerdConfig() string {
	ctrd := filepath.Join(n.Dir, "containerd")
	registry := fmt.Sprintf("http://%s:%d", ControlPlaneIP, RegistryPort)
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # Root here lacks CAP_SYS_RESOURCE: the -998 oom_score_adj of sandboxes would make
  # runc fail every one of them.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[7]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/opt/cni/bin"
    conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
    endpoint = [%[8]q]
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."juneau.local"]
    endpoint = [%[8]q]
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."registry.example"]
    endpoint = [%[8]q]
`, filepath.Join(ctrd, "root"), filepath.Join(ctrd, "state"), n.Socket(), n.Socket()+".ttrpc",
		filepath.Join(ctrd, "opt"), images.Pause, filepath.Join(n.Dir, "runc"), registry)
}

// kubeletConfig: cgroup v1 with cgroupfs under the Node's own cgroup root; serving on
// the Node's address to the API server only (client certificates of the cluster's CA).
func (n *Node) kubeletConfig() string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /%[1]s
containerRuntimeEndpoint: unix://%[2]s
address: %[3]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %[4]s}
authorization: {mode: AlwaysAllow}
makeIPTablesUtilChains: false
resolvConf: %[5]s
clusterDomain: cluster.local
failSwapOn: false
maxPods: 60
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%%, imagefs.available: 1%%, nodefs.inodesFree: 1%%}
nodeStatusUpdateFrequency: 2s
syncFrequency: 10s
fileCheckFrequency: 10s
`, n.cgroup, n.Socket(), n.IP, n.c.run.path("pki", "ca.crt"), filepath.Join(n.Dir, "resolv.conf"))
}

// kubeProxyConfig: nftables mode, so juneau's table is seen to live beside kube-proxy's.
// The conntrack settings are the machine's: left alone.
func (n *Node) kubeProxyConfig() string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection: {kubeconfig: %[1]s}
hostnameOverride: %[2]s
bindAddress: %[3]s
clusterCIDR: %[4]s,%[5]s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`, n.c.run.path("kubeconfigs", "kube-proxy"), n.Name, n.IP, ClusterCIDR, ClusterCIDR6)
}
