package wiring

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/component-helpers/apimachinery/lease"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/node/shutdown"
)

// errNoRouterID: the Node has no IPv4 InternalIP and --bgp-router-id is not set, so it
// runs no BGP speaker.
var errNoRouterID = errors.New("no BGP router ID")

// bgpRouterID is --bgp-router-id, or the Node's IPv4 InternalIP; errNoRouterID (wrapped)
// when there is none.
func (o Options) bgpRouterID(ctx context.Context, kube kubernetes.Interface) (netip.Addr, error) {
	if o.RouterID != "" {
		return netip.ParseAddr(o.RouterID) // checked by Validate
	}
	node, err := kube.CoreV1().Nodes().Get(ctx, o.NodeName, metav1.GetOptions{})
	if err != nil {
		return netip.Addr{}, fmt.Errorf("reading Node %q for its BGP router ID: %w", o.NodeName, err)
	}
	for _, a := range node.Status.Addresses {
		if id, err := netip.ParseAddr(a.Address); err == nil && a.Type == corev1.NodeInternalIP && id.Is4() {
			return id, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("%w: Node %q has no IPv4 InternalIP and --bgp-router-id is not set", errNoRouterID, o.NodeName)
}

// remover removes the datapath's nftables table (nft.Programmer).
type remover interface {
	Remove(ctx context.Context) error
}

// shutdown decides, once stopped by a signal, whether juneau is being uninstalled
// (pkg/node/shutdown): then it removes the nftables table, otherwise it leaves the
// datapath to the next agent. The verdict goes to --shutdown-verdict-file.
func (o Options) shutdown(logger klog.Logger, kube kubernetes.Interface, pods corelisters.PodLister, nat remover) (uninstall bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	verdict := shutdown.Verdict{Reason: "not run by a DaemonSet"}
	if pod, err := pods.Pods(o.PodNamespace).Get(o.PodName); err == nil {
		if owner, ok := shutdown.OwnerOf(pod); ok {
			verdict = shutdown.Check(ctx, kube, owner)
		}
	}
	if verdict.Uninstall {
		if err := nat.Remove(ctx); err != nil {
			logger.Error(err, "Uninstalling: could not remove the nftables table")
		}
		logger.Info("Uninstalled from this Node: the nftables table is removed", "reason", verdict.Reason,
			"then", "ARP and NDP answers stop, BGP routes are withdrawn")
	} else {
		// The next agent answers from the addresses this one saved (docs/operations.md#restarts-and-rollouts).
		logger.Info("Stopping; the datapath stays for the next agent", "reason", verdict.Reason,
			"then", "the next agent answers for the same addresses; BGP routers keep this Node's routes for graceful restart")
	}
	if o.VerdictFile != "" {
		if err := shutdown.WriteVerdict(o.VerdictFile, verdict); err != nil {
			logger.Error(err, "Writing the shutdown verdict", "file", o.VerdictFile)
		}
	}
	return verdict.Uninstall
}

// heartbeat renews the agent's Lease (as a kubelet renews its node Lease), owned by
// the Node so that it goes with it. Its requests are not cut by the agent's shutdown
// (detachedLeases).
func (o Options) heartbeat(kube kubernetes.Interface) lease.Controller {
	ttl := max(o.LeaseDuration, 4*time.Second)
	return lease.NewController(clock.RealClock{}, detachedLeases{kube}, o.NodeName, int32(ttl/time.Second), nil, ttl/4,
		v1alpha1.NodeLeasePrefix+o.NodeName, o.LeaseNamespace, func(l *coordinationv1.Lease) error {
			if l.Labels == nil {
				l.Labels = map[string]string{}
			}
			l.Labels["app.kubernetes.io/name"] = "juneau"
			l.Labels["app.kubernetes.io/component"] = "node"
			if len(l.OwnerReferences) > 0 {
				return nil
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			node, err := kube.CoreV1().Nodes().Get(ctx, o.NodeName, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("reading Node %q to own the heartbeat Lease: %w", o.NodeName, err)
			}
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
			return nil
		})
}
