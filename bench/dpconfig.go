package main

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/loutres/juneau/pkg/node/nft"
	"github.com/loutres/juneau/test/require"
)

// dpConfig is one way of getting packets through the node.
type dpConfig struct {
	name    string
	profile string     // file name of its kernel profile
	dst     netip.Addr // where the client sends
	setup   func(e *env, tp *dpTopology)
	// afterRun runs between repetitions (flushing conntrack, so new flows stay new).
	afterRun func(e *env, tp *dpTopology)
	// inCluster sends from the client Pod (addClientPod) instead of the external client;
	// outbound sends from the Pod to the external client (dst), which drops them.
	inCluster, outbound bool
}

// sender is where this configuration's frames come from.
func (c dpConfig) sender(tp *dpTopology) sender {
	return tp.sender(c.inCluster, c.outbound, c.dst.Is6())
}

// outboundConfig turns an inbound configuration into the same node sending the Pod's
// traffic out: the Pod sends to the external client, which drops it at its first hook
// (its interface counts it before), so nothing comes back.
func outboundConfig(c dpConfig) dpConfig {
	c.name, c.profile = "outbound: "+c.name, "out-"+c.profile
	c.dst, c.outbound = clientIP, true
	setup := c.setup
	c.setup = func(e *env, tp *dpTopology) {
		tp.client.MustRun("nft", "add", "table", "inet", "sink")
		tp.client.MustRun("nft", "add", "chain", "inet", "sink", "in", "{ type filter hook prerouting priority raw; }")
		tp.client.MustRun("nft", "add", "rule", "inet", "sink", "in", "udp", "dport", fmt.Sprint(sinkPort), "drop")
		if setup != nil {
			setup(e, tp)
		}
	}
	return c
}

// juneauConfig is juneau's NAT with n mappings on a node where conntrack is loaded.
func juneauConfig(ctx context.Context, n int) dpConfig {
	return dpConfig{name: fmt.Sprintf("juneau NAT, %d mappings", n), profile: fmt.Sprintf("juneau-%d", n), dst: elasticIP, setup: func(e *env, tp *dpTopology) {
		loadConntrack(e, tp.node)
		p := nft.NewProgrammer(nft.Options{NetNS: tp.node.FD()})
		if err := p.Sync(ctx, natState(benchMappings(n))); err != nil {
			e.Fatalf("programming %d mappings: %v", n, err)
		}
	}}
}

// floorConfig is the floor of juneau's design: the bare stateless map NAT (bareMapNAT)
// with n mappings, conntrack loaded, and the kernel's NAT hooks registered, which
// juneau's conntrack NAT for in-cluster clients needs (registerNATHooks).
func floorConfig(n int) dpConfig {
	c := floorNoNATHooksConfig(n)
	c.name, c.profile = fmt.Sprintf("bare nftables map NAT + NAT hooks, %d mappings", n), fmt.Sprintf("floor-%d", n)
	setup := c.setup
	c.setup = func(e *env, tp *dpTopology) { registerNATHooks(e, tp.node); setup(e, tp) }
	return c
}

// floorNoNATHooksConfig is the bare stateless map NAT alone, conntrack loaded: the
// floor before juneau served in-cluster clients.
func floorNoNATHooksConfig(n int) dpConfig {
	return dpConfig{name: fmt.Sprintf("bare nftables map NAT, %d mappings", n), profile: fmt.Sprintf("floor-no-nat-hooks-%d", n), dst: elasticIP,
		setup: func(e *env, tp *dpTopology) {
			loadConntrack(e, tp.node)
			bareMapNAT(e, tp.node, benchMappings(n))
		}}
}

// plainConntrackConfig is plain routing on a node where conntrack is loaded: every
// packet is tracked.
func plainConntrackConfig() dpConfig {
	return dpConfig{name: "plain routing, conntrack loaded", profile: "plain-conntrack", dst: podIP,
		setup:    func(e *env, tp *dpTopology) { loadConntrack(e, tp.node) },
		afterRun: func(e *env, tp *dpTopology) { tp.node.MustRun("conntrack", "-F") },
	}
}

// inClusterConfig is a Pod of the node sending to dst, with juneau's table holding n
// mappings (every one also an in-cluster mapping, as on every node of a cluster with n
// attached ElasticIPs), conntrack loaded. To the ElasticIP, each new flow is translated
// by conntrack at the sender's node; to the Pod IP it is tracked as ordinary Pod traffic.
func inClusterConfig(ctx context.Context, n int, dst netip.Addr, what string) dpConfig {
	return dpConfig{name: fmt.Sprintf("in-cluster Pod → %s, juneau %d mappings", what, n), profile: "incluster-" + what, dst: dst, inCluster: true,
		setup: func(e *env, tp *dpTopology) {
			tp.addClientPod(e)
			loadConntrack(e, tp.node)
			st := natState(benchMappings(n))
			st.InCluster = st.Mappings
			if err := nft.NewProgrammer(nft.Options{NetNS: tp.node.FD()}).Sync(ctx, st); err != nil {
				e.Fatalf("programming %d mappings: %v", n, err)
			}
		},
		afterRun: func(e *env, tp *dpTopology) { tp.node.MustRun("conntrack", "-F") },
	}
}

// juneau6Config is juneau's NAT with n IPv6 mappings, conntrack loaded; plain6Config
// is plain IPv6 routing to the Pod, conntrack loaded: rows 3n and 3o.
func juneau6Config(ctx context.Context, n int) dpConfig {
	return dpConfig{name: fmt.Sprintf("juneau IPv6 NAT, %d mappings", n), profile: fmt.Sprintf("juneau6-%d", n), dst: elasticIP6, setup: func(e *env, tp *dpTopology) {
		loadConntrack(e, tp.node)
		p := nft.NewProgrammer(nft.Options{NetNS: tp.node.FD()})
		if err := p.Sync(ctx, natState(benchMappings6(n))); err != nil {
			e.Fatalf("programming %d IPv6 mappings: %v", n, err)
		}
	}}
}

func plain6Config() dpConfig {
	return dpConfig{name: "plain IPv6 routing, conntrack loaded", profile: "plain6-conntrack", dst: podIP6,
		setup:    func(e *env, tp *dpTopology) { loadConntrack(e, tp.node) },
		afterRun: func(e *env, tp *dpTopology) { tp.node.MustRun("conntrack", "-F") },
	}
}

func iptablesConfig(n int) dpConfig {
	return dpConfig{name: fmt.Sprintf("iptables DNAT/SNAT + conntrack, %d rules", n), profile: fmt.Sprintf("iptables-%d", n), dst: elasticIP,
		setup: func(e *env, tp *dpTopology) {
			bin := require.Binary(e, "iptables-restore")
			runIn(e, tp.node, bin, iptablesRestore(benchMappings(n)))
		},
		afterRun: func(e *env, tp *dpTopology) { tp.node.MustRun("conntrack", "-F") },
	}
}
