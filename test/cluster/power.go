package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
)

// port is the bridge's end of the Node's veth on the segment.
func (n *Node) port() string { return fmt.Sprintf("n%d", n.index) }

// AddNode starts one of Options.Spares on the running cluster, as the others started:
// its namespace on the segment and the routes to and from it, containerd with the
// images, the kubelet and kube-proxy (and flanneld); it returns once the Node is Ready.
func (c *Cluster) AddNode(ctx context.Context, name string) (*Node, error) {
	if !slices.Contains(c.opts.Spares, name) || c.Node(name) != nil {
		return nil, fmt.Errorf("%s is not a spare Node of the cluster not started yet", name)
	}
	n, err := c.nodeNetwork(len(c.Nodes), name)
	if err != nil {
		return nil, err
	}
	if err := c.routeNode(n, c.Nodes); err != nil {
		return nil, err
	}
	c.Nodes = append(c.Nodes, n)
	if err := n.prepare(); err != nil {
		return nil, err
	}
	if err := n.startHolder(ctx); err != nil {
		return nil, err
	}
	if _, err := n.startContainerd(ctx); err != nil {
		return nil, err
	}
	if err := c.loadImages(ctx, c.images, []*Node{n}); err != nil {
		return nil, err
	}
	if err := n.boot(ctx); err != nil {
		return nil, err
	}
	c.progress("%s added, Ready", name)
	return n, nil
}

// boot starts the kubelet and kube-proxy (and flanneld) of a Node whose containerd
// runs, and waits until the Node is Ready.
func (n *Node) boot(ctx context.Context) error {
	kubelet, err := n.startKubelet(ctx)
	if err != nil {
		return err
	}
	if _, err := n.startKubeProxy(ctx); err != nil {
		return err
	}
	if err := n.register(ctx, kubelet); err != nil {
		return err
	}
	if n.c.opts.CNI == CNIFlannel {
		return n.startFlannel(ctx)
	}
	return nil
}

// PowerOff stops the Node as a power cut does: its link to the segment goes down and
// every process of it — containerd and its shims, the kubelet, kube-proxy, every
// container (juneau's agent among them) — is SIGKILLed at once. Nothing runs a
// shutdown; nothing tells the API server. Its disk (directories, mount namespace) stays
// for PowerOn. It returns once every process is gone.
func (n *Node) PowerOff() error {
	if err := n.setLink(false); err != nil {
		return err
	}
	pids := killCgroups([][]string{{n.cgroup}})
	for _, pid := range allPIDs() {
		if pid == os.Getpid() || pid == n.holder.pid {
			continue
		}
		if ino, err := procNS(pid, "mnt"); err == nil && ino == n.mntNS && syscall.Kill(pid, syscall.SIGKILL) == nil {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		return fmt.Errorf("%s: no process to stop", n.Name)
	}
	waitGone(pids, 10*time.Second)
	for _, pid := range pids {
		if st, err := readProcStat(pid); err == nil && st.state != 'Z' && st.state != 'X' {
			return fmt.Errorf("%s: process %d outlived SIGKILL", n.Name, pid)
		}
	}
	return nil
}

// PowerOn starts a Node PowerOff stopped, as after a reboot: what a reboot empties is
// emptied (/run, with the Pods' network namespaces and juneau's saved state; every
// nftables table), what it keeps is kept (the disk; the routes and addresses of the
// Node's own configuration); its link comes up, then containerd, the kubelet and
// kube-proxy start. It returns once the Node is Ready.
func (n *Node) PowerOn(ctx context.Context) error {
	if _, err := n.Output(ctx, "sh", "-c", rebootScript); err != nil {
		return err
	}
	if err := n.setLink(true); err != nil {
		return err
	}
	if _, err := n.startContainerd(ctx); err != nil {
		return err
	}
	return n.boot(ctx)
}

// rebootScript empties what a reboot empties on a Node: the mounts under /run (the
// Pods' network namespaces, whose veths go with them) and its content, and the
// nftables ruleset.
const rebootScript = `set -eu
awk '$2 ~ "^/run/" {print $2}' /proc/mounts | sort -r | while read -r m; do umount -l "$m"; done
find /run -mindepth 1 -delete
nft flush ruleset`

// setLink sets the bridge's end of the Node's veth up or down: the cable.
func (n *Node) setLink(up bool) error {
	return withHandle(n.c.SegmentNS, func(h *netlink.Handle) error {
		link, err := h.LinkByName(n.port())
		if err != nil {
			return err
		}
		if up {
			return h.LinkSetUp(link)
		}
		return h.LinkSetDown(link)
	})
}

// RemoveNode powers the Node off for good and takes it out of Nodes, with the routes
// to its Pods from the control plane and the other Nodes; its namespace goes with the
// run.
func (c *Cluster) RemoveNode(n *Node) error {
	err := n.PowerOff()
	c.Nodes = slices.DeleteFunc(c.Nodes, func(m *Node) bool { return m == n })
	peers := []string{c.CPNS}
	if c.opts.CNI != CNIFlannel {
		for _, m := range c.Nodes {
			peers = append(peers, m.NS)
		}
	}
	for _, ns := range peers {
		for _, dst := range []string{n.PodCIDR, n.PodCIDR6} {
			_, ipnet, perr := net.ParseCIDR(dst)
			if perr != nil {
				return errors.Join(err, perr)
			}
			err = errors.Join(err, withHandle(ns, func(h *netlink.Handle) error {
				return h.RouteDel(&netlink.Route{Dst: ipnet})
			}))
		}
	}
	return err
}
