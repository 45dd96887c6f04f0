package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// Reboot power-cycles a Node. Everything the machine held in memory goes: its agent
// is killed (SIGKILL) and its network namespace, with all the kernel kept there
// (nftables, routes, neighbours, the Pods' host-side veths), is deleted, and so are
// its Pods' namespaces (their containers die with the machine). What a Node keeps on
// disk stays: the CNI plugins' state (host-local's reservations, juneau's state
// directory, libcni's cache of results); what lives under /run does not (the agent's
// CNI socket, its --state-dir). Then the Node comes back as it booted first: a new namespace with the
// same address and MAC on the segment, its routes to the other Nodes' Pods, the agent
// started again; everything else must come from the API. The Pods' sandboxes are
// re-created by Pod.RestartSandbox, as the kubelet does after a reboot.
func (c *Cluster) Reboot(n *Node) {
	c.t.Helper()
	c.PowerOff(n)
	c.PowerOn(n)
}

// PowerOff is the first half of Reboot: the Node is down (agent killed, namespaces
// gone) until PowerOn, so a test can change the API meanwhile.
func (c *Cluster) PowerOff(n *Node) {
	c.t.Helper()
	n.Agent.Kill()
	for _, p := range c.podsOn(n) {
		if p.NS != nil {
			p.deadNS = p.NS.Path()
			p.NS.Destroy()
			p.NS = nil
			p.started = false
		}
	}
	n.stopFwd()
	n.NS.Destroy()
	// The kernel frees the namespace once nothing holds it; its veth to the bridge goes
	// with it. A port that stays means something of the old Node survived.
	port := fmt.Sprintf("n%d", n.Index)
	c.waitFor("the network namespace of "+n.Name+" to be freed", func(context.Context) bool {
		_, err := c.Ext.Netlink().LinkByName(port)
		return err != nil
	}, func() string { return "its veth " + port + " is still on the segment's bridge" })
	if err := os.Remove(n.Socket); err != nil && !os.IsNotExist(err) {
		c.t.Fatal(err)
	}
	if err := os.RemoveAll(n.RunDir()); err != nil {
		c.t.Fatal(err)
	}
}

// PowerOn is the second half of Reboot: the Node boots with what it kept on disk.
func (c *Cluster) PowerOn(n *Node) {
	c.t.Helper()
	c.bootNode(n)
	c.routePods(n)
	c.StartAgent(n)
}

// podsOn returns the Pods the harness made on n.
func (c *Cluster) podsOn(n *Node) []*Pod {
	c.podsMu.Lock()
	defer c.podsMu.Unlock()
	var out []*Pod
	for _, p := range c.pods {
		if p.Node == n {
			out = append(out, p)
		}
	}
	return out
}

// Dir is the Node's disk: its CNI configuration's state (host-local's reservations
// under ipam/, juneau's under cni-state/, libcni's cache under cni-cache/), which a
// reboot keeps.
func (n *Node) Dir() string { return n.dir }

// RunDir is what the Node keeps under /run/juneau: the agent's --state-dir (datapath
// lock, addresses answered for), which a reboot forgets.
func (n *Node) RunDir() string { return filepath.Join(n.dir, "run") }

// Unplug takes the Node off the segment without a word, as a pulled cable or a dead
// machine does: its port on the segment's bridge goes down, so nothing it sends
// reaches anyone (and the others see no link change). Plug puts it back.
func (c *Cluster) Unplug(n *Node) { c.setPort(n, false) }

// Plug undoes Unplug.
func (c *Cluster) Plug(n *Node) { c.setPort(n, true) }

func (c *Cluster) setPort(n *Node, up bool) {
	c.t.Helper()
	nl, port := c.Ext.Netlink(), c.Ext.Link(fmt.Sprintf("n%d", n.Index))
	set := nl.LinkSetDown
	if up {
		set = nl.LinkSetUp
	}
	if err := set(port); err != nil {
		c.t.Fatalf("setting the segment port of %s up=%v: %v", n.Name, up, err)
	}
}
