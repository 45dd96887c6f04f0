// Package bgp is the node agent's BGP speaker for type bgp networks: GoBGP
// (github.com/osrg/gobgp/v4) embedded as a library, behind a small level-triggered
// interface.
//
//   - SetPeers gives the full set of routers this Node peers with (the BGPPeers that
//     select it, passwords resolved); SetAnnouncements gives the full set of /32s this
//     Node announces. Both may be called at any time, also before Run; the speaker moves
//     GoBGP to the latest of each.
//   - Run(ctx) owns every goroutine: GoBGP's server, its event watcher and the loop that
//     applies the desired state. It returns when ctx ends.
//   - Status reports each session (state, since when, the last error in the words of
//     BGPNodeStatus, prefixes announced) and Changed signals that it changed.
//
// What goes on the wire: every prefix is announced with ORIGIN IGP and next hop self
// (the Node's address on the session) to every peer; routes received from peers are
// rejected on import and never used. The Node dials its peers (TCP port 179) and
// listens on no TCP port, so routers are best configured passive (docs/bgp.md).
//
// Graceful restart (RFC 4724). Every session negotiates graceful restart with
// RestartTime, so a router keeps the Node's routes while the agent is away for that
// long. When Run starts, the speaker declares itself restarting (the Restart State bit
// and the forwarding bit of IPv4 unicast) to the peers of its first set: routers that
// still hold the previous instance's routes keep them, marked stale, instead of
// withdrawing them. It waits until both SetPeers and SetAnnouncements have been
// called, adds every path before the first peer, and sends its routes followed by an
// End-of-RIB once the routers have sent theirs (or after DeferralTime): the router then
// drops only the stale routes that were not announced again. Prefixes the agent still
// wants are therefore never withdrawn across a restart, whether the agent was killed
// (SIGKILL, OOM, crash) or stopped normally.
//
// BFD (RFC 5880, single hop as in RFC 5881; docs/bgp.md#bfd). A peer with BFD gets
// GoBGP's BFD while its session is Established (bfd.go says why not before): the Node
// listens on UDP port 3784 and sends to the router's from a port of 49152–65535, with
// TTL 255. When the router's packets stop for the detection time, or the router
// declares the BFD session down, GoBGP resets the BGP session with a NOTIFICATION
// (Cease, administrative reset; the status says BFD did it) and dials again after
// ConnectRetry. Changing only a peer's BFD keeps its session. BFD runs in the agent,
// so it stops with the agent: a router that acts on BFD failures sees an agent restart
// as a failure too (docs/bgp.md#bfd says what BIRD and FRR do then).
//
// Stopping. When ctx ends, the speaker closes its sessions without a NOTIFICATION
// (unless Config.WithdrawOnStop), exactly as if it had been killed: routers keep the
// routes for RestartTime and the next agent takes them over, which is what a rolling
// update of the DaemonSet needs, and what keeps the traffic of a NAT'ed or direct
// ElasticIP flowing (the node agent leaves its datapath in place when it stops too).
// The cost: when the agent is stopped for good (juneau uninstalled, the Node drained
// and deleted), routers keep sending the Node's addresses to it until RestartTime
// expires. WithdrawOnStop sends a Cease NOTIFICATION instead, and routers withdraw
// every route at once. Removing a peer from SetPeers always sends a Cease, so that
// router withdraws this Node's routes at once.
package bgp
