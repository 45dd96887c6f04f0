package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/vishvananda/netlink"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/component-helpers/apimachinery/lease"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	juneauinformers "github.com/loutres/juneau/pkg/generated/informers/externalversions"
	"github.com/loutres/juneau/pkg/node/agent"
	"github.com/loutres/juneau/pkg/node/arp"
	"github.com/loutres/juneau/pkg/node/bgp"
	"github.com/loutres/juneau/pkg/node/cniserver"
	"github.com/loutres/juneau/pkg/node/handover"
	"github.com/loutres/juneau/pkg/node/ndp"
	"github.com/loutres/juneau/pkg/node/nft"
	"github.com/loutres/juneau/pkg/node/shutdown"
	"github.com/loutres/juneau/pkg/node/sysctl"
	"github.com/loutres/juneau/pkg/workloop"
)

type nodeOptions struct {
	common       *commonOptions
	nodeName     string
	extIface     string
	clusterCIDRs []string
	resync       time.Duration
	metricsAddr  string
	sysctls      bool
	arpKernel    bool
	cniSocket    string
	podName      string
	podNamespace string
	verdictFile  string
	stateDir     string
	leaseNS      string
	leaseTTL     time.Duration
	routerID     string
	nextHop6     string
	bgpRetry     time.Duration
}

func newNodeCommand(common *commonOptions) *cobra.Command {
	o := &nodeOptions{common: common}
	cmd := &cobra.Command{
		Use:   "node",
		Short: "run the node agent (NAT rules, ARP and NDP responders, direct NICs)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context()) },
	}
	fs := cmd.Flags()
	fs.StringVar(&o.nodeName, "node-name", os.Getenv("NODE_NAME"), "name of this Node (default $NODE_NAME)")
	fs.StringVar(&o.extIface, "external-interface", "", "interface towards the external network (default: the one holding the Node's InternalIP)")
	fs.StringSliceVar(&o.clusterCIDRs, "cluster-cidr", nil, "Pod CIDRs never translated, besides Node spec.podCIDRs, ServiceCIDRs and Node addresses (repeatable)")
	fs.DurationVar(&o.resync, "resync-period", time.Minute, "period of full datapath re-syncs")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":9091", "address serving /metrics, /healthz and /readyz; empty disables")
	fs.BoolVar(&o.sysctls, "set-sysctls", true, "set IPv4 and IPv6 forwarding and the ARP and NDP sysctls of the external interface")
	fs.BoolVar(&o.arpKernel, "arp-kernel-path", true, "answer ARP requests from a TCX program in the kernel where it can be attached (needs CAP_BPF and CAP_NET_ADMIN); otherwise, or when false, from a raw socket")
	fs.StringVar(&o.cniSocket, "cni-socket", cniserver.DefaultSocket, "unix socket the juneau CNI plugin asks about direct NICs; empty disables")
	fs.StringVar(&o.podName, "pod-name", os.Getenv("POD_NAME"), "this agent's Pod (default $POD_NAME): at SIGTERM, the agent removes its datapath if the DaemonSet owning the Pod is being deleted")
	fs.StringVar(&o.podNamespace, "pod-namespace", os.Getenv("POD_NAMESPACE"), "namespace of --pod-name (default $POD_NAMESPACE)")
	fs.StringVar(&o.verdictFile, "shutdown-verdict-file", "", "file the agent writes at SIGTERM: \"uninstall: <reason>\" or \"restart: <reason>\", for the container that removes the CNI entry")
	fs.StringVar(&o.stateDir, "state-dir", "/run/juneau", "host directory of the datapath lock and the addresses answered for, shared with the next agent of this Node (docs/operations.md#restarts-and-rollouts)")
	fs.StringVar(&o.leaseNS, "heartbeat-lease-namespace", envOr("POD_NAMESPACE", "juneau-system"), "namespace of the agent's heartbeat Lease, juneau-node-<node>")
	fs.DurationVar(&o.leaseTTL, "heartbeat-lease-duration", 40*time.Second, "how long the heartbeat Lease lasts unrenewed (renewed every quarter of it); once it expires the controller marks this Node's ARPAdvertisements Answering=Unknown")
	fs.StringVar(&o.routerID, "bgp-router-id", "", "BGP identifier of this Node, an IPv4 address of it (default: the Node's IPv4 InternalIP); without one the Node announces nothing on bgp networks")
	fs.StringVar(&o.nextHop6, "bgp-ipv6-next-hop", "", "next hop of the IPv6 /128s this Node announces, a global IPv6 address of it (default: the lowest global IPv6 address on the external interface at start); without one the Node announces no IPv6 address")
	fs.DurationVar(&o.bgpRetry, "bgp-connect-retry", bgp.DefaultConnectRetry, "interval between connection attempts to a BGP router (at least 2s)")
	return cmd
}

func (o *nodeOptions) run(ctx context.Context) error {
	if err := o.validate(); err != nil {
		return err
	}
	logger := klog.FromContext(ctx).WithName("node").WithValues("node", o.nodeName)
	ctx = klog.NewContext(ctx, logger)
	cidrs, err := parsePrefixes(o.clusterCIDRs)
	if err != nil {
		return err
	}
	kube, juneau, err := o.common.clients()
	if err != nil {
		return err
	}
	iface, err := o.externalInterface(ctx, kube)
	if err != nil {
		return err
	}
	link, err := net.InterfaceByName(iface)
	if err != nil {
		return fmt.Errorf("external interface %q: %w", iface, err)
	}
	if o.verdictFile != "" {
		// A verdict of a previous run of this container is no answer for the next stop.
		if err := os.Remove(o.verdictFile); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("--shutdown-verdict-file: %w", err)
		}
	}
	if o.sysctls {
		ipv6 := hasGlobalIPv6(iface)
		if err := sysctl.New().Apply(sysctl.ExternalInterfaceFor(iface, ipv6)); err != nil {
			return err
		}
		logger.V(2).Info("Set kernel parameters of the external interface", "interface", iface, "ipv6", ipv6)
	}
	logger.Info("Starting node agent", "externalInterface", iface, "mac", link.HardwareAddr.String())

	health := newHealth()
	var arpOpts []arp.Option
	if !o.arpKernel {
		arpOpts = append(arpOpts, arp.WithoutKernelPath())
	}
	responder := arp.NewResponder(iface, arpOpts...)
	// Answer at once for what the previous agent of this Node answered: the kernel kept
	// its NAT rules, and the caches will take over at the first sync.
	saved, err := handover.LoadAnswering(o.stateDir)
	if err != nil {
		logger.Error(err, "Not answering ARP before the first sync", "stateDir", o.stateDir)
	} else {
		responder.SetAddresses(saved) // the IPv4 ones
		logger.Info("Answering ARP for the addresses of the previous agent until the first sync", "addresses", len(saved))
	}
	// A BGP speaker that cannot start stops the agent (runCtx), which then exits with
	// its error, to be restarted.
	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	var g errgroup.Group
	g.Go(func() error { return responder.Run(runCtx) })
	ndpResponder := ndp.NewResponder(iface)
	ndpResponder.SetAddresses(saved) // the IPv6 ones
	g.Go(func() error { return ndpResponder.Run(runCtx) })
	lock := handover.NewLock(o.stateDir)
	held, err := lock.TryAcquire()
	if err != nil {
		return err
	}
	if !held {
		logger.Info("Another agent of this Node holds the datapath; answering ARP and standing by until it stops", "lock", lock.Path())
	}
	srv, reg, err := startMetricsServer(ctx, o.metricsAddr, health)
	if err != nil {
		return err
	}
	defer srv.shutdown()
	metrics, err := agent.NewMetrics(reg, responder, ndpResponder)
	if err != nil {
		return err
	}
	queues, err := workloop.NewQueueMetrics(reg)
	if err != nil {
		return err
	}

	// Each kind but the attachments is watched only where it names this Node.
	onNode := func(field string) juneauinformers.SharedInformerOption {
		return juneauinformers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector(field, o.nodeName).String()
		})
	}
	// Every Node's attachments: in-cluster clients here reach ElasticIPs attached
	// anywhere (docs/datapath.md). Cached trimmed to what the agent reads.
	attachInf := juneauinformers.NewSharedInformerFactoryWithOptions(juneau, o.resync, juneauinformers.WithTransform(agent.TrimAttachment))
	advertInf := juneauinformers.NewSharedInformerFactoryWithOptions(juneau, o.resync, onNode("spec.nodeName"))
	kubeInf := kubeinformers.NewSharedInformerFactory(kube, o.resync)
	allInf := juneauinformers.NewSharedInformerFactory(juneau, o.resync)
	podInf := kubeinformers.NewSharedInformerFactoryWithOptions(kube, o.resync, kubeinformers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", o.nodeName).String()
	}))

	attachments := attachInf.Juneau().V1alpha1().ElasticIPAttachments()
	adverts := advertInf.Juneau().V1alpha1().ARPAdvertisements()
	nics := advertInf.Juneau().V1alpha1().NetworkInterfaces() // also selected by spec.nodeName
	pods := podInf.Core().V1().Pods()
	bgpAdverts := advertInf.Juneau().V1alpha1().BGPAdvertisements() // also selected by spec.nodeName
	bgpPeers := allInf.Juneau().V1alpha1().BGPPeers()
	eips := allInf.Juneau().V1alpha1().ElasticIPs()
	networks := allInf.Juneau().V1alpha1().ExternalNetworks()
	nodes := kubeInf.Core().V1().Nodes()
	serviceCIDRs := kubeInf.Networking().V1().ServiceCIDRs()
	nat := nft.NewProgrammer(nft.Options{})
	a := agent.New(agent.Config{
		NodeName: o.nodeName, ExternalInterface: iface, ExternalMAC: link.HardwareAddr.String(),
		ClusterCIDRs: cidrs, Resync: o.resync, QueueMetrics: queues,
		Holds:           lock.Held,
		Answered:        func(addrs []netip.Addr) error { return handover.SaveAnswering(o.stateDir, addrs) },
		Synced:          health.setReady,
		ExternalSubnets: func() []netip.Prefix { return subnetsOf(iface) },
	}, agent.Clients{Juneau: juneau, Kube: kube}, agent.Listers{
		Attachments: attachments.Lister(), Advertisements: adverts.Lister(),
		BGPPeers: bgpPeers.Lister(), BGPAdvertisements: bgpAdverts.Lister(),
		Nodes: nodes.Lister(), ServiceCIDRs: serviceCIDRs.Lister(),
		Pods: pods.Lister(), NICs: nics.Lister(), ElasticIPs: eips.Lister(), Networks: networks.Lister(),
	}, nat, responder, ndpResponder, hostInterface, metrics)
	if err := a.Watch(attachments.Informer(), adverts.Informer(), nodes.Informer(), serviceCIDRs.Informer(),
		pods.Informer(), nics.Informer(), eips.Informer(), networks.Informer(), bgpPeers.Informer(), bgpAdverts.Informer()); err != nil {
		return err
	}
	// The BGP speaker stops after the shutdown decision, which tells it whether to
	// withdraw its routes (uninstall) or leave them to graceful restart (docs/bgp.md).
	speakerCtx, stopSpeaker := context.WithCancel(klog.NewContext(context.Background(), logger))
	defer stopSpeaker()
	var speaker *bgp.Speaker
	id, err := o.bgpRouterID(ctx, kube)
	switch {
	case errors.Is(err, errNoRouterID):
		// Nothing wrong unless the Node is to announce something: then its
		// BGPAdvertisements say why it does not (docs/bgp.md).
		logger.Info("No BGP speaker: this Node announces nothing on bgp networks", "reason", err.Error())
		a.UseBGP(nil, nil)
	case err != nil:
		logger.Error(err, "This Node announces nothing on bgp networks")
		a.UseBGP(nil, nil)
	default:
		nextHop6, err := o.bgpNextHop6(iface)
		if err != nil {
			return err
		}
		// Without an IPv6 next hop the Node announces no IPv6 address; the agent says so
		// once it has one to announce (docs/bgp.md#ipv6), not here.
		logger.Info("BGP next hops", "routerID", id, "ipv6NextHop", addrOrNone(nextHop6))
		speaker = bgp.New(bgp.Config{RouterID: id, ConnectRetry: o.bgpRetry, NextHop6: nextHop6})
		a.UseBGP(speaker, agent.NewPasswords(kube, o.resync, a.Trigger))
	}
	source := &agent.DirectSource{Pods: pods.Lister(), NICs: nics.Lister(), ElasticIPs: eips.Lister(), Synced: func() bool {
		return pods.Informer().HasSynced() && nics.Informer().HasSynced() && eips.Informer().HasSynced()
	}}
	for _, f := range []interface {
		Start(<-chan struct{})
		Shutdown()
	}{attachInf, advertInf, kubeInf, podInf, allInf} {
		f.Start(runCtx.Done())
		defer f.Shutdown()
	}

	speakerDone := make(chan error, 1)
	if speaker != nil {
		go func() {
			err := speaker.Run(speakerCtx)
			if err != nil {
				stopRun(err)
			}
			speakerDone <- err
		}()
	} else {
		close(speakerDone)
	}
	g.Go(func() error { return a.Run(runCtx) })
	// What only the holder of the datapath lock does, from the moment it holds it: a
	// standing-by agent would see the holder's writes as drift.
	g.Go(func() error {
		if !held {
			if err := lock.Acquire(runCtx); err != nil {
				return nil // stopped while standing by
			}
			logger.Info("Took over the datapath from the previous agent of this Node")
			a.Trigger()
		}
		var h errgroup.Group
		h.Go(func() error { o.heartbeat(kube).Run(runCtx); return nil })
		// In-cluster clients follow an ElasticIP that moves (pkg/node/nft/flows.go).
		h.Go(func() error { return nat.RunFlowCleanup(runCtx) })
		// Changes others make to the table are repaired at once, not at the next resync.
		h.Go(func() error {
			return nft.NewDriftWatcher(nft.Options{}).Run(runCtx, func(d nft.Drift) { a.RepairDrift(runCtx, d) })
		})
		if o.cniSocket != "" {
			h.Go(func() error { return cniserver.New(source).Run(runCtx, o.cniSocket) })
		}
		return h.Wait()
	})
	err = g.Wait()
	uninstall := false
	switch {
	case ctx.Err() != nil && lock.Held():
		answering, announcing := a.Serving()
		uninstall = o.shutdown(logger.WithValues("answering", answering, "announcing", announcing), kube, pods.Lister(), nat)
	case ctx.Err() != nil && o.verdictFile != "":
		// The datapath is another agent's: nothing of it is this one's to remove.
		logger.Info("Stopping while another agent of this Node holds the datapath; that agent goes on answering")
		if err := shutdown.WriteVerdict(o.verdictFile, shutdown.Verdict{Reason: "stopped while another agent of this Node holds the datapath"}); err != nil {
			logger.Error(err, "Writing the shutdown verdict", "file", o.verdictFile)
		}
	}
	if speaker != nil {
		speaker.SetWithdrawOnStop(uninstall)
	}
	stopSpeaker()
	if serr := <-speakerDone; serr != nil && err == nil {
		err = serr
	}
	return err
}

// validate checks the flags that need no API server and no interface.
func (o *nodeOptions) validate() error {
	if o.nodeName == "" {
		return errors.New("--node-name (or $NODE_NAME) is required")
	}
	if o.routerID != "" {
		if id, err := netip.ParseAddr(o.routerID); err != nil || !id.Is4() {
			return fmt.Errorf("--bgp-router-id %q is not an IPv4 address", o.routerID)
		}
	}
	if o.nextHop6 != "" {
		if a, err := netip.ParseAddr(o.nextHop6); err != nil || !a.Is6() || a.Is4In6() || !a.IsGlobalUnicast() || a.Zone() != "" {
			return fmt.Errorf("--bgp-ipv6-next-hop %q is not a global IPv6 address", o.nextHop6)
		}
	}
	return nil
}

// bgpNextHop6 is --bgp-ipv6-next-hop, or the lowest global IPv6 address of the external
// interface (bgp.NextHop6); invalid when there is none.
func (o *nodeOptions) bgpNextHop6(iface string) (netip.Addr, error) {
	if o.nextHop6 != "" {
		return netip.ParseAddr(o.nextHop6) // checked by validate
	}
	list, err := interfaceAddrs(iface, netlink.FAMILY_V6)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("reading the IPv6 addresses of %s for the BGP next hop: %w", iface, err)
	}
	addrs := make([]netip.Prefix, 0, len(list))
	flags := map[netip.Prefix]int{}
	for _, a := range list {
		addrs = append(addrs, a.Prefix)
		flags[a.Prefix] = a.Flags
	}
	usable := func(p netip.Prefix) bool {
		return flags[p]&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED|unix.IFA_F_DEPRECATED) == 0
	}
	return bgp.NextHop6(addrs, usable), nil
}

// addrOrNone is a's text, or "none" when a is invalid.
func addrOrNone(a netip.Addr) string {
	if !a.IsValid() {
		return "none"
	}
	return a.String()
}

// errNoRouterID: the Node has no IPv4 InternalIP and --bgp-router-id is not set, so it
// runs no BGP speaker.
var errNoRouterID = errors.New("no BGP router ID")

// bgpRouterID is --bgp-router-id, or the Node's IPv4 InternalIP; errNoRouterID (wrapped)
// when there is none.
func (o *nodeOptions) bgpRouterID(ctx context.Context, kube kubernetes.Interface) (netip.Addr, error) {
	if o.routerID != "" {
		return netip.ParseAddr(o.routerID) // checked by validate
	}
	node, err := kube.CoreV1().Nodes().Get(ctx, o.nodeName, metav1.GetOptions{})
	if err != nil {
		return netip.Addr{}, fmt.Errorf("reading Node %q for its BGP router ID: %w", o.nodeName, err)
	}
	for _, a := range node.Status.Addresses {
		if id, err := netip.ParseAddr(a.Address); err == nil && a.Type == corev1.NodeInternalIP && id.Is4() {
			return id, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("%w: Node %q has no IPv4 InternalIP and --bgp-router-id is not set", errNoRouterID, o.nodeName)
}

// shutdown decides, once stopped by a signal, whether juneau is being uninstalled
// (pkg/node/shutdown): then it removes the nftables table, otherwise it leaves the
// datapath to the next agent. The verdict goes to --shutdown-verdict-file.
func (o *nodeOptions) shutdown(logger klog.Logger, kube kubernetes.Interface, pods corelisters.PodLister, nat *nft.Programmer) (uninstall bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	verdict := shutdown.Verdict{Reason: "not run by a DaemonSet"}
	if pod, err := pods.Pods(o.podNamespace).Get(o.podName); err == nil {
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
	if o.verdictFile != "" {
		if err := shutdown.WriteVerdict(o.verdictFile, verdict); err != nil {
			logger.Error(err, "Writing the shutdown verdict", "file", o.verdictFile)
		}
	}
	return verdict.Uninstall
}

// heartbeat renews the agent's Lease (as a kubelet renews its node Lease), owned by
// the Node so that it goes with it.
func (o *nodeOptions) heartbeat(kube kubernetes.Interface) lease.Controller {
	ttl := max(o.leaseTTL, 4*time.Second)
	return lease.NewController(clock.RealClock{}, kube, o.nodeName, int32(ttl/time.Second), nil, ttl/4,
		v1alpha1.NodeLeasePrefix+o.nodeName, o.leaseNS, func(l *coordinationv1.Lease) error {
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
			node, err := kube.CoreV1().Nodes().Get(ctx, o.nodeName, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("reading Node %q to own the heartbeat Lease: %w", o.nodeName, err)
			}
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
			return nil
		})
}

// externalInterface is --external-interface, or the interface holding the Node's InternalIP.
func (o *nodeOptions) externalInterface(ctx context.Context, kube kubernetes.Interface) (string, error) {
	if o.extIface != "" {
		return o.extIface, nil
	}
	node, err := kube.CoreV1().Nodes().Get(ctx, o.nodeName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading Node %q to find the external interface: %w", o.nodeName, err)
	}
	for _, a := range node.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		ip := net.ParseIP(a.Address)
		links, err := netlink.LinkList()
		if err != nil {
			return "", err
		}
		for _, l := range links {
			addrs, err := netlink.AddrList(l, netlink.FAMILY_ALL)
			if err != nil {
				continue
			}
			for _, ad := range addrs {
				if ad.IP.Equal(ip) {
					return l.Attrs().Name, nil
				}
			}
		}
	}
	return "", fmt.Errorf("no interface holds an InternalIP of Node %q; set --external-interface", o.nodeName)
}

func parsePrefixes(in []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(in))
	for _, s := range in {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("--cluster-cidr %q: %w", s, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// ifaceAddr is one address of an interface with its IFA_F_* flags.
type ifaceAddr struct {
	Prefix netip.Prefix
	Flags  int
}

// interfaceAddrs lists the addresses of one family (netlink.FAMILY_V4 or FAMILY_V6)
// of the named interface, IPv4 ones unmapped.
func interfaceAddrs(iface string, family int) ([]ifaceAddr, error) {
	link, err := netlink.LinkByName(iface)
	if err != nil {
		return nil, err
	}
	list, err := netlink.AddrList(link, family)
	if err != nil {
		return nil, err
	}
	out := make([]ifaceAddr, 0, len(list))
	for _, a := range list {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || a.IPNet == nil {
			continue
		}
		ones, _ := a.Mask.Size()
		out = append(out, ifaceAddr{Prefix: netip.PrefixFrom(ip.Unmap(), ones), Flags: a.Flags})
	}
	return out, nil
}

// subnetsOf lists the IPv4 prefixes of the interface's addresses.
func subnetsOf(iface string) []netip.Prefix {
	addrs, _ := interfaceAddrs(iface, netlink.FAMILY_V4)
	out := make([]netip.Prefix, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, a.Prefix)
	}
	return out
}

// hostInterface names the interface of the node's host route for addr: the /32 (/128)
// the CNI plugin adds towards a direct NIC's host end.
func hostInterface(addr netip.Addr) (string, bool) {
	addr = addr.Unmap()
	family := netlink.FAMILY_V4
	if addr.Is6() {
		family = netlink.FAMILY_V6
	}
	dst := &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(addr.BitLen(), addr.BitLen())}
	routes, err := netlink.RouteListFiltered(family, &netlink.Route{Dst: dst}, netlink.RT_FILTER_DST)
	if err != nil || len(routes) == 0 || routes[0].LinkIndex == 0 {
		return "", false
	}
	link, err := netlink.LinkByIndex(routes[0].LinkIndex)
	if err != nil {
		return "", false
	}
	return link.Attrs().Name, true
}

// hasGlobalIPv6 tells whether the interface carries a global IPv6 address (ULAs
// included), i.e. whether this Node's external network has IPv6 at all; the IPv6
// kernel settings are made only then (docs/datapath.md).
func hasGlobalIPv6(iface string) bool {
	addrs, _ := interfaceAddrs(iface, netlink.FAMILY_V6)
	for _, a := range addrs {
		if a.Prefix.Addr().IsGlobalUnicast() {
			return true
		}
	}
	return false
}
