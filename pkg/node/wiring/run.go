package wiring

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	"github.com/loutres/juneau/pkg/node/agent"
	"github.com/loutres/juneau/pkg/node/arp"
	"github.com/loutres/juneau/pkg/node/bgp"
	"github.com/loutres/juneau/pkg/node/cniserver"
	"github.com/loutres/juneau/pkg/node/handover"
	"github.com/loutres/juneau/pkg/node/ndp"
	"github.com/loutres/juneau/pkg/node/nft"
	"github.com/loutres/juneau/pkg/node/sandboxaddr"
	"github.com/loutres/juneau/pkg/node/shutdown"
	"github.com/loutres/juneau/pkg/node/sysctl"
	"github.com/loutres/juneau/pkg/workloop"
)

// Process is what the binary gives the node agent.
type Process struct {
	// Clients makes the Kubernetes and juneau API clients.
	Clients func() (kubernetes.Interface, versioned.Interface, error)
	// Serve starts serving /metrics, /healthz and /readyz. It returns the registry of
	// the agent's metrics and the function that stops serving.
	Serve func(ctx context.Context, kube kubernetes.Interface) (prometheus.Registerer, func(), error)
	// Ready is called once, after the agent's first sync from synced caches.
	Ready func()
}

// Run runs the node agent until ctx ends or a part of it fails. Ended by ctx, the
// holder of the datapath decides whether juneau is being uninstalled (pkg/node/shutdown)
// and removes the datapath only then.
func Run(ctx context.Context, o Options, p Process) error {
	if err := o.Validate(); err != nil {
		return err
	}
	logger := klog.FromContext(ctx).WithName("node").WithValues("node", o.NodeName)
	ctx = klog.NewContext(ctx, logger)
	cidrs, err := o.clusterCIDRs()
	if err != nil {
		return err
	}
	kube, juneau, err := p.Clients()
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
	if err := o.prepare(logger, iface); err != nil {
		return err
	}
	logger.Info("Starting node agent", "externalInterface", iface, "mac", link.HardwareAddr.String())

	// A BGP speaker that cannot start stops the agent (runCtx), which then exits with
	// its error, to be restarted.
	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	var g errgroup.Group
	responder, ndpResponder := o.responders(logger, iface)
	g.Go(func() error { return responder.Run(runCtx) })
	g.Go(func() error { return ndpResponder.Run(runCtx) })
	lock := handover.NewLock(o.StateDir)
	held, err := lock.TryAcquire()
	if err != nil {
		return err
	}
	if !held {
		logger.Info("Another agent of this Node holds the datapath; answering ARP and standing by until it stops", "lock", lock.Path())
	}
	reg, stopServing, err := p.Serve(ctx, kube)
	if err != nil {
		return err
	}
	defer stopServing()
	metrics, err := agent.NewMetrics(reg, responder, ndpResponder)
	if err != nil {
		return err
	}
	queues, err := workloop.NewQueueMetrics(reg)
	if err != nil {
		return err
	}

	c := newCaches(kube, juneau, o.NodeName)
	nat := nft.NewProgrammer(nft.Options{})
	saver := handover.NewSaver(o.StateDir)
	g.Go(func() error { saver.Run(runCtx); return nil })
	a := agent.New(agent.Config{
		NodeName: o.NodeName, ExternalInterface: iface, ExternalMAC: link.HardwareAddr.String(),
		ClusterCIDRs: cidrs, Resync: o.Resync, QueueMetrics: queues,
		Holds:           lock.Held,
		Answered:        saver.SaveSince,
		Synced:          p.Ready,
		ExternalSubnets: func() []netip.Prefix { return subnetsOf(iface) },
	}, agent.Clients{Juneau: juneau, Kube: kube}, c.listers, nat, responder, ndpResponder, hostInterface, metrics)
	if err := c.watch(a); err != nil {
		return err
	}
	sandbox := sandboxaddr.New(o.NodeName, juneau, c.listers.NICs, c.listers.Pods, queues)
	if err := sandbox.WatchNetworkInterfaces(c.informerOf("NetworkInterface")); err != nil {
		return err
	}
	// The BGP speaker stops after the shutdown decision, which tells it whether to
	// withdraw its routes (uninstall) or leave them to graceful restart (docs/bgp.md).
	speakerCtx, stopSpeaker := context.WithCancel(klog.NewContext(context.Background(), logger))
	defer stopSpeaker()
	speaker, err := o.useBGP(ctx, kube, iface, a)
	if err != nil {
		return err
	}
	c.start(runCtx.Done())
	defer c.shutdown()

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
		return o.holderTasks(runCtx, kube, a, nat, c.direct, sandbox)
	})
	err = g.Wait()
	uninstall := false
	switch {
	case ctx.Err() != nil && lock.Held():
		answering, announcing := a.Serving()
		uninstall = o.shutdown(logger.WithValues("answering", answering, "announcing", announcing), kube, c.listers.Pods, nat)
	case ctx.Err() != nil && o.VerdictFile != "":
		// The datapath is another agent's: nothing of it is this one's to remove.
		logger.Info("Stopping while another agent of this Node holds the datapath; that agent goes on answering")
		if err := shutdown.WriteVerdict(o.VerdictFile, shutdown.Verdict{Reason: "stopped while another agent of this Node holds the datapath"}); err != nil {
			logger.Error(err, "Writing the shutdown verdict", "file", o.VerdictFile)
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

// prepare readies the Node before the agent starts: it removes the verdict of a
// previous run and sets the kernel parameters of the external interface.
func (o Options) prepare(logger klog.Logger, iface string) error {
	if o.VerdictFile != "" {
		// A verdict of a previous run of this container is no answer for the next stop.
		if err := os.Remove(o.VerdictFile); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("--shutdown-verdict-file: %w", err)
		}
	}
	if o.SetSysctls {
		ipv6 := hasGlobalIPv6(iface)
		if err := sysctl.New().Apply(sysctl.ExternalInterfaceFor(iface, ipv6)); err != nil {
			return err
		}
		logger.V(2).Info("Set kernel parameters of the external interface", "interface", iface, "ipv6", ipv6)
	}
	return nil
}

// responders makes the ARP and NDP responders of the external interface, answering at
// once for what the previous agent of this Node answered: the kernel kept its NAT
// rules, and the caches take over at the first sync.
func (o Options) responders(logger klog.Logger, iface string) (*arp.Responder, *ndp.Responder) {
	var arpOpts []arp.Option
	if !o.ARPKernelPath {
		arpOpts = append(arpOpts, arp.WithoutKernelPath())
	}
	responder := arp.NewResponder(iface, arpOpts...)
	saved, err := handover.LoadAnswering(o.StateDir)
	if err != nil {
		logger.Error(err, "Not answering ARP before the first sync", "stateDir", o.StateDir)
	} else {
		responder.SetAddresses(saved) // the IPv4 ones
		logger.Info("Answering ARP for the addresses of the previous agent until the first sync", "addresses", len(saved))
	}
	ndpResponder := ndp.NewResponder(iface)
	ndpResponder.SetAddresses(saved) // the IPv6 ones
	return responder, ndpResponder
}

// useBGP gives the agent its BGP speaker, or none when this Node has no router ID; the
// speaker is not started.
func (o Options) useBGP(ctx context.Context, kube kubernetes.Interface, iface string, a *agent.Agent) (*bgp.Speaker, error) {
	logger := klog.FromContext(ctx)
	id, err := o.bgpRouterID(ctx, kube)
	switch {
	case errors.Is(err, errNoRouterID):
		// Nothing wrong unless the Node is to announce something: then its
		// BGPAdvertisements say why it does not (docs/bgp.md).
		logger.Info("No BGP speaker: this Node announces nothing on bgp networks", "reason", err.Error())
		a.UseBGP(nil, nil)
		return nil, nil
	case err != nil:
		logger.Error(err, "This Node announces nothing on bgp networks")
		a.UseBGP(nil, nil)
		return nil, nil
	}
	nextHop6, err := o.bgpNextHop6(iface)
	if err != nil {
		return nil, err
	}
	// Without an IPv6 next hop the Node announces no IPv6 address; the agent says so
	// once it has one to announce (docs/bgp.md#ipv6), not here.
	logger.Info("BGP next hops", "routerID", id, "ipv6NextHop", addrOrNone(nextHop6))
	speaker := bgp.New(bgp.Config{RouterID: id, ConnectRetry: o.ConnectRetry, NextHop6: nextHop6})
	a.UseBGP(speaker, agent.NewPasswords(kube, o.Resync, a.Trigger))
	return speaker, nil
}

// holderTasks run while this agent holds the datapath lock, until ctx ends.
func (o Options) holderTasks(ctx context.Context, kube kubernetes.Interface, a *agent.Agent, nat *nft.Programmer,
	direct cniserver.Source, sandbox *sandboxaddr.Writer) error {
	var h errgroup.Group
	h.Go(func() error { o.heartbeat(kube).Run(ctx); return nil })
	// In-cluster clients follow an ElasticIP that moves (pkg/node/nft/flows.go).
	h.Go(func() error { return nat.RunFlowCleanup(ctx) })
	// Changes others make to the table are repaired at once, not at the next resync.
	h.Go(func() error {
		return nft.NewDriftWatcher(nft.Options{}).Run(ctx, func(d nft.Drift) { a.RepairDrift(ctx, d) })
	})
	if o.CNISocket != "" {
		// A Pod's addresses reported by the CNI plugin are written for the controller,
		// which attaches its ElasticIPs before the kubelet reports them.
		h.Go(func() error { sandbox.Run(ctx); return nil })
		h.Go(func() error { return cniserver.New(direct, cniserver.WithObserver(sandbox)).Run(ctx, o.CNISocket) })
	}
	return h.Wait()
}
