package wiring

import (
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// Options are the settings of the node agent, one per flag of `juneau node`
// (docs/operations.md); the flag of each is named beside it.
type Options struct {
	NodeName          string        // --node-name
	ExternalInterface string        // --external-interface; empty: the one holding the Node's InternalIP
	ClusterCIDRs      []string      // --cluster-cidr
	Resync            time.Duration // --resync-period
	SetSysctls        bool          // --set-sysctls
	ARPKernelPath     bool          // --arp-kernel-path
	CNISocket         string        // --cni-socket; empty: no CNI server
	PodName           string        // --pod-name
	PodNamespace      string        // --pod-namespace
	VerdictFile       string        // --shutdown-verdict-file; empty: none written
	StateDir          string        // --state-dir
	LeaseNamespace    string        // --heartbeat-lease-namespace
	LeaseDuration     time.Duration // --heartbeat-lease-duration
	RouterID          string        // --bgp-router-id; empty: the Node's IPv4 InternalIP
	IPv6NextHop       string        // --bgp-ipv6-next-hop; empty: from the external interface
	ConnectRetry      time.Duration // --bgp-connect-retry
}

// Validate checks the flags that need no API server and no interface; its errors name
// the flag.
func (o Options) Validate() error {
	if o.NodeName == "" {
		return errors.New("--node-name (or $NODE_NAME) is required")
	}
	if o.RouterID != "" {
		if id, err := netip.ParseAddr(o.RouterID); err != nil || !id.Is4() {
			return fmt.Errorf("--bgp-router-id %q is not an IPv4 address", o.RouterID)
		}
	}
	if o.IPv6NextHop != "" {
		if a, err := netip.ParseAddr(o.IPv6NextHop); err != nil || !a.Is6() || a.Is4In6() || !a.IsGlobalUnicast() || a.Zone() != "" {
			return fmt.Errorf("--bgp-ipv6-next-hop %q is not a global IPv6 address", o.IPv6NextHop)
		}
	}
	_, err := o.clusterCIDRs()
	return err
}

// clusterCIDRs parses --cluster-cidr, each prefix masked.
func (o Options) clusterCIDRs() ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(o.ClusterCIDRs))
	for _, s := range o.ClusterCIDRs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("--cluster-cidr %q: %w", s, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
