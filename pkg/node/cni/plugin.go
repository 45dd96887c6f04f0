// Package cni is the juneau CNI plugin. Chained after the cluster's primary CNI plugin,
// it plumbs a Pod's direct NICs (docs/reference.md#direct-nics): the NIC that carries an ElasticIP gets it
// as a /32 with an on-link default route through 169.254.0.1 (an IPv6 one as a /128 with
// a default route through fe80::1), and the node routes the address to the Pod. What to plumb comes from the local node agent over a unix socket
// (package cniserver), so the plugin needs no cluster credentials. See README.md.
package cni

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	cnitypes "github.com/containernetworking/cni/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/loutres/juneau/pkg/node/cniserver"
)

// notifyTimeout bounds the best-effort reports to the agent.
const notifyTimeout = 2 * time.Second

// Main runs the plugin for the CNI_COMMAND in the environment and returns the exit
// code; errors have been printed to stdout as CNI error JSON.
func Main(pluginVersion string) int {
	funcs := skel.CNIFuncs{Add: cmdAdd, Del: cmdDel, Check: cmdCheck, GC: cmdGC, Status: cmdStatus}
	about := "juneau CNI plugin " + pluginVersion
	if e := skel.PluginMainFuncsWithError(funcs, pluginVersions(), about); e != nil {
		if err := e.Print(); err != nil {
			fmt.Fprintln(os.Stderr, "juneau: writing the CNI error:", err)
		}
		return 1
	}
	return 0
}

// start parses the configuration and sets up logging for one CNI call.
func start(args *skel.CmdArgs) (*Config, context.Context, func(), error) {
	conf, err := parseConfig(args.StdinData)
	if err != nil {
		return nil, nil, nil, cnitypes.NewError(cnitypes.ErrDecodingFailure, err.Error(), "")
	}
	logger, closeLog := newLogger(conf)
	logger = logger.WithValues("containerID", args.ContainerID, "ifName", args.IfName)
	return conf, klog.NewContext(context.Background(), logger), closeLog, nil
}

// newLogger logs to stderr and, if configured, appends to the log file as well.
func newLogger(conf *Config) (klog.Logger, func()) {
	var out io.Writer = os.Stderr
	closeFn := func() {}
	if conf.LogFile != "" {
		f, err := openLogFile(conf.LogFile)
		if err != nil {
			// Logging must never fail a Pod; stderr still has the log.
			fmt.Fprintf(os.Stderr, "juneau: cannot open log file: %v\n", err)
		} else {
			out = io.MultiWriter(os.Stderr, f)
			closeFn = func() { f.Close() }
		}
	}
	cfg := textlogger.NewConfig(textlogger.Output(out), textlogger.Verbosity(conf.LogVerbosity))
	return textlogger.NewLogger(cfg).WithName("juneau-cni"), closeFn
}

func openLogFile(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o640)
}

func cmdAdd(args *skel.CmdArgs) error {
	conf, ctx, closeLog, err := start(args)
	if err != nil {
		return err
	}
	defer closeLog()
	logger := klog.FromContext(ctx)
	if conf.prevErr != nil {
		return cnitypes.NewError(cnitypes.ErrDecodingFailure, conf.prevErr.Error(), "")
	}
	if conf.prev == nil {
		return cnitypes.NewError(cnitypes.ErrInvalidNetworkConfig,
			"juneau must be chained after a primary CNI plugin (no prevResult)", "")
	}
	pod, err := parsePodArgs(args.Args)
	if errors.Is(err, errNotAPod) {
		logger.V(2).Info("Not a Kubernetes Pod, passing the primary result through")
		return printResult(conf.prev, conf.CNIVersion)
	}
	if err != nil {
		return cnitypes.NewError(cnitypes.ErrInvalidEnvironmentVariables, err.Error(), "")
	}
	ctx = klog.NewContext(ctx, logger.WithValues("pod", klog.KRef(pod.Namespace, pod.Name)))
	ctx, cancel := context.WithTimeout(ctx, conf.Wait()+time.Minute)
	defer cancel()

	client := cniserver.NewClient(conf.AgentSocket)
	nics, err := waitForInterfaces(ctx, client, pod, conf.Wait())
	if err != nil {
		// The runtime retries a failed ADD; the Pod does not start meanwhile.
		return cnitypes.NewError(cnitypes.ErrTryAgainLater, err.Error(), "")
	}
	if len(nics) == 0 {
		klog.FromContext(ctx).V(2).Info("No direct NICs, passing the primary result through")
		notify(ctx, client.Plumbed, conf, args, pod, nil, primaryAddresses(conf.prev, args.IfName))
		return printResult(conf.prev, conf.CNIVersion)
	}
	plans, err := buildPlan(args.ContainerID, args.IfName, nics)
	if err != nil {
		return fmt.Errorf("Pod %q: %w", pod.String(), err)
	}
	done, err := plumb(conf, args, pod, plans)
	if err != nil {
		return fmt.Errorf("Pod %q: %w", pod.String(), err)
	}
	res, err := rewriteResult(conf.prev, args.IfName, args.Netns, done)
	if err != nil {
		return fmt.Errorf("Pod %q: %w", pod.String(), err)
	}
	// The Pod's own addresses are reported when its eth0 keeps them (not direct).
	var addrs []string
	if !slices.ContainsFunc(done, func(p plumbed) bool { return p.Primary }) {
		addrs = primaryAddresses(conf.prev, args.IfName)
	}
	notify(ctx, client.Plumbed, conf, args, pod, nicStates(done), addrs)
	klog.FromContext(ctx).Info("Plumbed direct NICs", "nics", describe(done))
	return printResult(res, conf.CNIVersion)
}

// plumb records what it is about to change, then changes it. On error the runtime calls
// DEL, which undoes whatever the state file lists.
func plumb(conf *Config, args *skel.CmdArgs, pod podRef, plans []nicPlan) ([]plumbed, error) {
	d, err := openDataplane(args.Netns, true)
	if err != nil {
		return nil, err
	}
	defer d.close()

	st := &attachmentState{
		Network: conf.Name, ContainerID: args.ContainerID, IfName: args.IfName,
		Namespace: pod.Namespace, Pod: pod.Name, UID: string(pod.UID),
	}
	var links []linkPair
	for i := range plans {
		var lp linkPair
		s := plans[i].state()
		if plans[i].Primary {
			if lp.pod, lp.host, err = d.primaryHostEnd(args.IfName); err != nil {
				return nil, err
			}
			plans[i].HostInterface = lp.host.Attrs().Name
			s.HostInterface = plans[i].HostInterface
			if s.ReplacedAddresses, err = d.replacedAddresses(lp.pod, plans[i].Address); err != nil {
				return nil, err
			}
		}
		links = append(links, lp)
		st.NICs = append(st.NICs, s)
	}
	store := stateStore{dir: conf.StateDir}
	if err := store.save(st); err != nil {
		return nil, err
	}

	mtu := d.podMTU(args.IfName)
	var done []plumbed
	for i, p := range plans {
		if p.Primary {
			if err := d.plumbPrimary(p, st.NICs[i].ReplacedAddresses, links[i].pod, links[i].host); err != nil {
				return nil, err
			}
			done = append(done, plumbed{nicPlan: p})
			continue
		}
		podLink, hostLink, err := d.plumbExtra(p, mtu)
		if err != nil {
			return nil, err
		}
		done = append(done, plumbed{nicPlan: p,
			PodMAC: podLink.Attrs().HardwareAddr.String(), HostMAC: hostLink.Attrs().HardwareAddr.String()})
	}
	return done, nil
}

func cmdDel(args *skel.CmdArgs) error {
	conf, ctx, closeLog, err := start(args)
	if err != nil {
		return err
	}
	defer closeLog()
	logger := klog.FromContext(ctx)
	store := stateStore{dir: conf.StateDir}
	st, err := store.load(args.ContainerID, args.IfName)
	if err != nil {
		return err
	}
	if st == nil {
		logger.V(2).Info("Nothing to undo")
		return nil
	}
	d, err := openDataplane(args.Netns, false)
	if err != nil {
		return err
	}
	defer d.close()
	if d.pod == nil {
		logger.V(2).Info("The Pod's network namespace is gone; cleaning up the node side only")
	}
	if err := unplumbAll(d, st.NICs); err != nil {
		// The state stays, so the runtime's next DEL tries again.
		return fmt.Errorf("Pod %q: %w", st.Namespace+"/"+st.Pod, err)
	}
	pod := podRef{Namespace: st.Namespace, Name: st.Pod, UID: podUID(st)}
	notify(ctx, cniserver.NewClient(conf.AgentSocket).Unplumbed, conf, args, pod, st.NICs, nil)
	if err := store.remove(args.ContainerID, args.IfName); err != nil {
		return err
	}
	logger.Info("Removed direct NICs", "pod", klog.KRef(st.Namespace, st.Pod), "nics", len(st.NICs))
	return nil
}

// unplumbAll undoes extra NICs first and the primary NIC last, the reverse of ADD.
func unplumbAll(d *dataplane, nics []nicState) error {
	var errs []error
	for i := len(nics) - 1; i >= 0; i-- {
		if nics[i].Primary {
			errs = append(errs, d.unplumbPrimary(nics[i]))
		} else {
			errs = append(errs, d.unplumbExtra(nics[i]))
		}
	}
	return errors.Join(errs...)
}

func cmdCheck(args *skel.CmdArgs) error {
	conf, _, closeLog, err := start(args)
	if err != nil {
		return err
	}
	defer closeLog()
	st, err := stateStore{dir: conf.StateDir}.load(args.ContainerID, args.IfName)
	if err != nil || st == nil {
		return err // no state: ADD plumbed nothing, so there is nothing to verify
	}
	d, err := openDataplane(args.Netns, true)
	if err != nil {
		return err
	}
	defer d.close()
	var errs []error
	for _, n := range st.NICs {
		if err := d.check(n); err != nil {
			errs = append(errs, fmt.Errorf("NIC %q (ElasticIP %q): %w", n.Interface, n.ElasticIP, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("Pod %q: %w", st.Namespace+"/"+st.Pod, err)
	}
	return nil
}

// cmdGC removes what juneau left for attachments of this network the runtime no longer
// knows (their namespaces are gone, so only the node side is left).
func cmdGC(args *skel.CmdArgs) error {
	conf, ctx, closeLog, err := start(args)
	if err != nil {
		return err
	}
	defer closeLog()
	valid := map[[2]string]bool{}
	for _, a := range conf.ValidAttachments {
		valid[[2]string{a.ContainerID, a.IfName}] = true
	}
	store := stateStore{dir: conf.StateDir}
	states, err := store.list()
	if err != nil {
		return err
	}
	d, err := openDataplane("", false)
	if err != nil {
		return err
	}
	defer d.close()
	var errs []error
	for _, st := range states {
		if st.Network != conf.Name || valid[[2]string{st.ContainerID, st.IfName}] {
			continue
		}
		klog.FromContext(ctx).Info("Collecting a stale attachment", "container", st.ContainerID, "ifName", st.IfName)
		if err := unplumbAll(d, st.NICs); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, store.remove(st.ContainerID, st.IfName))
	}
	return errors.Join(errs...)
}

// cmdStatus reports the plugin unavailable while the node agent does not listen: ADD
// would fail for every Pod then.
func cmdStatus(args *skel.CmdArgs) error {
	conf, _, closeLog, err := start(args)
	if err != nil {
		return err
	}
	defer closeLog()
	c, err := net.DialTimeout("unix", conf.AgentSocket, time.Second)
	if err != nil {
		return cnitypes.NewError(cnitypes.ErrPluginNotAvailable,
			fmt.Sprintf("juneau node agent not reachable at %s", conf.AgentSocket), err.Error())
	}
	return c.Close()
}

// notify reports to the agent, best effort: a failure is logged, never returned.
func notify(ctx context.Context, send func(context.Context, cniserver.Plumbing) error,
	conf *Config, args *skel.CmdArgs, pod podRef, nics []nicState, addresses []string) {
	p := cniserver.Plumbing{Namespace: pod.Namespace, Pod: pod.Name, UID: pod.UID, ContainerID: args.ContainerID,
		Addresses: addresses}
	for _, n := range nics {
		p.Interfaces = append(p.Interfaces, n.plumbedInterface())
	}
	nctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	if err := send(nctx, p); err != nil {
		klog.FromContext(ctx).Info("Could not report to the node agent", "socket", conf.AgentSocket, "err", err)
	}
}
