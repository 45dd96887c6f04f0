package nft

// Names of everything juneau owns in nftables. The table is ours alone; no
// other component adds to it and we touch nothing outside it.
const (
	TableName = "juneau"

	ChainPrerouting  = "prerouting"
	ChainFromOutside = "from_outside"
	ChainPostrouting = "postrouting"
	// ChainDNAT and ChainSNAT rewrite an ElasticIP's packets. No name is an
	// nft keyword ("dnat" and "snat" are), so that `nft list chain` and `nft
	// -f` take every name as nft lists it (README.md, "Reading the table
	// with nft").
	ChainDNAT          = "eip_dnat"
	ChainDNATICMPError = "dnat_icmp_error"
	ChainSNAT          = "eip_snat"
	ChainSNATICMPError = "snat_icmp_error"
	// The in-cluster chains translate cluster clients' connections to an
	// ElasticIP with connection tracking (README.md, "In-cluster clients"):
	// DNAT of this node's Pods (prerouting) and of the node itself (output),
	// and the hairpin SNAT of a Pod reaching its own ElasticIP.
	ChainInClusterDNAT    = "incluster_dnat"
	ChainInClusterOutput  = "incluster_output"
	ChainInClusterHairpin = "incluster_hairpin"

	// MapEIP2VPC maps an ElasticIP to its Pod IP; MapVPC2EIP maps the Pod
	// IP back to the ElasticIP.
	MapEIP2VPC = "eip2vpc"
	MapVPC2EIP = "vpc2eip"
	// MapEIP2VPCUnlimited holds the elements of MapEIP2VPC whose ElasticIP
	// has no bandwidth limit: the one lookup of the common inbound packet
	// (see translateUnlimited).
	MapEIP2VPCUnlimited = "eip2vpc_unlimited"
	// MapEIP2VPCQuoted maps "ElasticIP . ElasticIP" to the Pod IP: the key
	// is an ICMP error's destination and its quoted source, so a quote naming
	// any other address finds nothing and the error is dropped.
	MapEIP2VPCQuoted = "eip2vpc_quoted"
	// MapVPC2EIPQuoted maps "Pod IP . Pod IP" (outer source . quoted
	// destination) to the ElasticIP.
	MapVPC2EIPQuoted = "vpc2eip_quoted"
	// SetClusterCIDRs holds the ranges that are never translated.
	SetClusterCIDRs = "cluster_cidrs"
	// SetICMPErrors holds the ICMP types that quote the offending packet.
	SetICMPErrors = "icmp_errors"
	// SetDirectIfaces holds the host interfaces of direct NICs, whose
	// traffic is checked against SetDirectAllowed ("interface . source
	// address" pairs); anything else from them is dropped.
	SetDirectIfaces  = "direct_ifaces"
	SetDirectAllowed = "direct_allowed"
	// MapLimitIn maps a limited ElasticIP (as destination) to a jump to its
	// inbound limit chain; MapLimitOut maps the source address of its
	// outbound traffic (the Pod IP for NAT, the ElasticIP of a direct NIC)
	// to a jump to its outbound limit chain. See LimitChainNames.
	MapLimitIn  = "bw_in"
	MapLimitOut = "bw_out"
	// MapClusterEIP2VPC maps every NAT-attached ElasticIP of the cluster,
	// on any node, to its Pod IP, for in-cluster clients.
	MapClusterEIP2VPC = "cluster_eip2vpc"
)

// Hook priorities. Prerouting runs at raw (-300): after defragmentation
// (-400), before conntrack (-200), so `notrack` keeps translated flows out of
// conntrack and every NAT or filter chain after us sees the Pod IP.
// Postrouting runs just after srcnat (100): conntrack-based masquerade never
// sees our untracked packets anyway, and rules ordered around srcnat still
// see the Pod's own address.
//
// The in-cluster chains are NAT chains, which see only the first packet of a
// tracked connection (never our untracked ones): DNAT at dstnat (-100), as
// kube-proxy's Service DNAT, whose addresses are never ElasticIPs; the
// hairpin SNAT at srcnat + 5, after the masquerades at srcnat, so that a
// connection kube-proxy or the CNI already masqueraded keeps its binding (a
// Pod reaching itself through a Service).
const (
	PriorityPrerouting    = -300
	PriorityPostrouting   = 110
	PriorityInClusterDNAT = -100
	PriorityInClusterSNAT = 105

	// ipsDstNAT is IPS_DST_NAT in a connection's status.
	ipsDstNAT = 1 << 5
)
