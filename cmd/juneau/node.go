package main

import (
	"context"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/loutres/juneau/pkg/node/bgp"
	"github.com/loutres/juneau/pkg/node/cniserver"
	"github.com/loutres/juneau/pkg/node/wiring"
)

type nodeOptions struct {
	common  *commonOptions
	metrics metricsOptions
	agent   wiring.Options
}

func newNodeCommand(common *commonOptions) *cobra.Command {
	o := &nodeOptions{common: common}
	a := &o.agent
	cmd := &cobra.Command{
		Use:   "node",
		Short: "run the node agent (NAT rules, ARP and NDP responders, direct NICs)",
		Args:  cobra.NoArgs,
		RunE:  role(o.run),
	}
	fs := cmd.Flags()
	fs.StringVar(&a.NodeName, "node-name", os.Getenv("NODE_NAME"), "name of this Node (default $NODE_NAME)")
	fs.StringVar(&a.ExternalInterface, "external-interface", "", "interface towards the external network (default: the one holding the Node's InternalIP)")
	fs.StringSliceVar(&a.ClusterCIDRs, "cluster-cidr", nil, "Pod CIDRs never translated, besides Node spec.podCIDRs, ServiceCIDRs and Node addresses (repeatable)")
	fs.DurationVar(&a.Resync, "resync-period", time.Minute, "period of full datapath re-syncs")
	o.metrics.addFlags(fs, "127.0.0.1:9091", "/metrics, /healthz and /readyz (the DaemonSet binds it to the Node's address)")
	fs.BoolVar(&a.SetSysctls, "set-sysctls", true, "set IPv4 and IPv6 forwarding and the ARP and NDP sysctls of the external interface")
	fs.BoolVar(&a.ARPKernelPath, "arp-kernel-path", true, "answer ARP requests from a TCX program in the kernel where it can be attached (needs CAP_BPF and CAP_NET_ADMIN); otherwise, or when false, from a raw socket")
	fs.StringVar(&a.CNISocket, "cni-socket", cniserver.DefaultSocket, "unix socket the juneau CNI plugin asks about direct NICs; empty disables")
	fs.StringVar(&a.PodName, "pod-name", os.Getenv("POD_NAME"), "this agent's Pod (default $POD_NAME): at SIGTERM, the agent removes its datapath if the DaemonSet owning the Pod is being deleted")
	fs.StringVar(&a.PodNamespace, "pod-namespace", os.Getenv("POD_NAMESPACE"), "namespace of --pod-name (default $POD_NAMESPACE)")
	fs.StringVar(&a.VerdictFile, "shutdown-verdict-file", "", "file the agent writes at SIGTERM: \"uninstall: <reason>\" or \"restart: <reason>\", for the container that removes the CNI entry")
	fs.StringVar(&a.StateDir, "state-dir", "/run/juneau", "host directory of the datapath lock and the addresses answered for, shared with the next agent of this Node (docs/operations.md#restarts-and-rollouts)")
	fs.StringVar(&a.LeaseNamespace, "heartbeat-lease-namespace", envOr("POD_NAMESPACE", "juneau-node"), "namespace of the agent's heartbeat Lease, juneau-node-<node>")
	fs.DurationVar(&a.LeaseDuration, "heartbeat-lease-duration", 40*time.Second, "how long the heartbeat Lease lasts unrenewed (renewed every quarter of it); once it expires the controller marks this Node's ARPAdvertisements Answering=Unknown")
	fs.StringVar(&a.RouterID, "bgp-router-id", "", "BGP identifier of this Node, an IPv4 address of it (default: the Node's IPv4 InternalIP); without one the Node announces nothing on bgp networks")
	fs.StringVar(&a.IPv6NextHop, "bgp-ipv6-next-hop", "", "next hop of the IPv6 /128s this Node announces, a global IPv6 address of it (default: the lowest global IPv6 address on the external interface at start); without one the Node announces no IPv6 address")
	fs.DurationVar(&a.ConnectRetry, "bgp-connect-retry", bgp.DefaultConnectRetry, "interval between connection attempts to a BGP router (at least 2s)")
	return cmd
}

// run starts the node agent (pkg/node/wiring), serving its metrics and health on
// --metrics-bind-address.
func (o *nodeOptions) run(ctx context.Context) error {
	health := newHealth()
	return wiring.Run(ctx, o.agent, wiring.Process{
		Clients: o.common.clients,
		Serve: func(ctx context.Context, kube kubernetes.Interface) (registerer, func(), error) {
			srv, reg, err := startMetricsServer(ctx, o.metrics, kube, health)
			if err != nil {
				return nil, nil, err
			}
			return reg, srv.shutdown, nil
		},
		Ready: health.setReady,
	})
}
