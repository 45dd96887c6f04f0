package webhook

import (
	"fmt"
	"strings"
)

// Manifest builders. Names and addresses may use the placeholders of env.expand.

func doc(kind, name, spec string) string {
	return fmt.Sprintf("---\napiVersion: juneau.loutres.me/v1alpha1\nkind: %s\nmetadata:\n  name: %s\nspec:\n%s", kind, name, spec)
}

func list(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func poolY(name, mode string, addrs ...string) string {
	return doc("AddressPool", name, fmt.Sprintf("  advertiseMode: %s\n  addresses: %s\n", mode, list(addrs)))
}

func netY(name, typ string, pools ...string) string {
	return doc("ExternalNetwork", name, fmt.Sprintf("  type: %s\n  addressPools: %s\n", typ, list(pools)))
}

// arpNet is a pool $P-pool over 10.225.$O.0/24 and the arp network $P-net using it.
func arpNet() string {
	return poolY("$P-pool", "arp", "10.225.$O.0/24") + netY("$P-net", "arp", "$P-pool")
}

// dualNet is arpNet with an IPv6 pool $P-pool6 over fd00:225:$O::/64 added to $P-net.
func dualNet() string {
	return poolY("$P-pool", "arp", "10.225.$O.0/24") + poolY("$P-pool6", "arp", "fd00:225:$O::/64") + netY("$P-net", "arp", "$P-pool", "$P-pool6")
}

func eipY(name, network, requested string) string {
	spec := fmt.Sprintf("  externalNetwork: %s\n", network)
	if requested != "" {
		spec += fmt.Sprintf("  requestedIP: %s\n", requested)
	}
	return doc("ElasticIP", name, spec)
}

// eip6Y is an IPv6 ElasticIP.
func eip6Y(name, network, requested string) string {
	spec := fmt.Sprintf("  externalNetwork: %s\n  ipFamily: IPv6\n", network)
	if requested != "" {
		spec += fmt.Sprintf("  requestedIP: %q\n", requested)
	}
	return doc("ElasticIP", name, spec)
}

func attY(name, eipName, nicName string) string {
	return doc("ElasticIPAttachment", name, fmt.Sprintf("  elasticIPRef:\n    name: %s\n  targetRef:\n    networkInterfaceName: %s\n", eipName, nicName))
}

func nicY(pod, iface, uid, eipName string) string {
	spec := fmt.Sprintf("  podRef:\n    name: %s\n    uid: %q\n    interface: %s\n  nodeName: node-a\n", pod, uid, iface)
	if eipName != "" {
		spec += fmt.Sprintf("  elasticIP: %s\n", eipName)
	}
	return doc("NetworkInterface", pod+"."+iface, spec)
}

func claimY(addr, pool, consumerNS, consumer, uid string) string {
	name := strings.NewReplacer("::", "--", ":", "-").Replace(addr) // iprange.ClaimName for these addresses
	return doc("AllocationClaim", name, fmt.Sprintf("  addressPool: %s\n  address: %q\n  consumer:\n    kind: ElasticIP\n    namespace: %s\n    name: %s\n    uid: %q\n",
		pool, addr, consumerNS, consumer, uid))
}

func adY(name, network, addr, node string) string {
	return doc("ARPAdvertisement", name, fmt.Sprintf("  externalNetwork: %s\n  address: %s\n  nodeName: %s\n", network, addr, node))
}

func bgpAdY(name, network, addr, node string) string {
	return doc("BGPAdvertisement", name, fmt.Sprintf("  externalNetwork: %s\n  address: %s\n  nodeName: %s\n", network, addr, node))
}

// bgpPeerY is a BGPPeer of a router; selector is the nodeSelector's content (one flow
// mapping line), empty for none; more are extra spec lines.
func bgpPeerY(name, addr, selector string, more ...string) string {
	spec := fmt.Sprintf("  peerAddress: %s\n", addr)
	if selector != "" {
		spec += "  nodeSelector: {" + selector + "}\n"
	}
	for _, m := range more {
		spec += "  " + m + "\n"
	}
	return doc("BGPPeer", name, spec)
}

// podY is a Pod bound to a Node (it stays Pending: no kubelet runs) with annotations
// and labels given as "key: value" lines.
func podY(name string, annotations, labels []string) string {
	meta := fmt.Sprintf("  name: %s\n", name)
	if len(annotations) > 0 {
		meta += "  annotations:\n"
		for _, a := range annotations {
			meta += "    " + a + "\n"
		}
	}
	if len(labels) > 0 {
		meta += "  labels:\n"
		for _, l := range labels {
			meta += "    " + l + "\n"
		}
	}
	return "---\napiVersion: v1\nkind: Pod\nmetadata:\n" + meta +
		"spec:\n  nodeName: node-a\n  containers:\n    - name: c\n      image: registry.invalid/pause:1\n"
}

// directPod is a Pod whose eth0 carries the ElasticIP eipName directly.
func directPod(name, eipName string) string {
	return podY(name, []string{"juneau.loutres.me/elastic-ip: " + eipName}, nil)
}
