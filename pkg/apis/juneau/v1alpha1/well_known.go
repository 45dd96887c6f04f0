package v1alpha1

// Condition types.
const (
	// ConditionReady is the Ready condition of AddressPool, ExternalNetwork,
	// ElasticIPAttachment and NetworkInterface.
	ConditionReady = "Ready"
	// ConditionAllocated says an ElasticIP holds an address reservation.
	ConditionAllocated = "Allocated"
	// ConditionAttached says an ElasticIP is used by exactly one attachment or NIC.
	ConditionAttached = "Attached"
	// ConditionAnswering says a node agent answers ARP for an ARPAdvertisement.
	ConditionAnswering = "Answering"
	// PodConditionElasticIP is the Pod readiness-gate condition the node agent sets
	// once the Pod's ElasticIP traffic is programmed on its Node.
	PodConditionElasticIP = "juneau.loutres.me/elastic-ip"
	// PodConditionManagedCloudEIP is the managed-cloud name of the same readiness gate
	// (docs/reference.md#readiness-gate): a Pod listing it gets it with the same meaning.
	PodConditionManagedCloudEIP = "k8s.aliyun.com/eip"
	// PodConditionElasticIPAssigned is the Pod condition the controller sets on a Pod
	// that asks for an automatic ElasticIP (docs/automatic.md#the-pods-condition): True
	// once the ElasticIP is attached to this Pod, False with the reason it waits
	// otherwise (another Pod uses it, the pools are exhausted, a write was refused, …).
	// It is not a readiness gate; the node agent quotes it in the gate's message.
	PodConditionElasticIPAssigned = "juneau.loutres.me/elastic-ip-assigned"
)

// PodConditionTypes are the readiness-gate condition types the node agent sets, each
// only on Pods that list it.
func PodConditionTypes() []string {
	return []string{PodConditionElasticIP, PodConditionManagedCloudEIP}
}

// Finalizers.
const (
	// FinalizerElasticIP keeps an ElasticIP until its reservation is released.
	FinalizerElasticIP = "juneau.loutres.me/release-address"
)

// Annotations the controller puts on objects it makes.
const (
	// AnnotationOwner on an advertisement names its ElasticIP as "<namespace>/<name>"
	// (docs/reference.md#arp-advertisement).
	AnnotationOwner = "juneau.loutres.me/owner"
	// AnnotationPodGoneSince on an automatic ElasticIP records (RFC 3339) when its Pod
	// was found gone, so a delayed release survives controller restarts. Such an
	// ElasticIP also carries AnnotationReleaseStrategy: the strategy in force
	// ("Follow", "Never" or a duration), read once the Pod is gone.
	AnnotationPodGoneSince = "juneau.loutres.me/pod-gone-since"
)

// Labels.
const (
	// LabelPod marks ElasticIPs and ElasticIPAttachments created for a Pod.
	LabelPod = "juneau.loutres.me/pod"
	// LabelOwnerUID on an advertisement is its ElasticIP's UID: the controller finds the
	// advertisements of an ElasticIP by it (docs/reference.md#arp-advertisement).
	LabelOwnerUID = "juneau.loutres.me/elasticip-uid"
	// LabelOwnerNamespace on an advertisement is its ElasticIP's namespace.
	LabelOwnerNamespace = "juneau.loutres.me/elasticip-namespace"
)

// Pod annotations for direct use (docs/reference.md#direct-annotations).
const (
	// AnnotationElasticIP: eth0 carries the named ElasticIP directly.
	AnnotationElasticIP = "juneau.loutres.me/elastic-ip"
	// AnnotationNetworks: JSON list of extra NICs, [{"interface":"ext0","elasticIP":"gw-eip"}].
	AnnotationNetworks = "juneau.loutres.me/networks"
)

// Pod annotations for automatic ElasticIPs (docs/reference.md#automatic).
const (
	AnnotationPodWithEIP         = "juneau.loutres.me/pod-with-eip"
	AnnotationPodEIPName         = "juneau.loutres.me/pod-eip-name"
	AnnotationEIPExternalNetwork = "juneau.loutres.me/eip-external-network"
	AnnotationEIPBandwidth       = "juneau.loutres.me/eip-bandwidth"
	AnnotationReleaseStrategy    = "juneau.loutres.me/pod-eip-release-strategy"
	AnnotationAllocatedEIPName   = "juneau.loutres.me/allocated-eip-name"
	AnnotationAllocatedEIPAddr   = "juneau.loutres.me/allocated-eip-address"
	// AnnotationPodEIPIPFamilies chooses the families of a Pod's automatic ElasticIPs:
	// "IPv4" (the default), "IPv6" or "IPv4,IPv6" (one ElasticIP per family).
	AnnotationPodEIPIPFamilies = "juneau.loutres.me/pod-eip-ip-families"
	// AnnotationAllocatedEIPName6 and AnnotationAllocatedEIPAddr6 are written back for
	// the Pod's IPv6 ElasticIP, as the two above are for its IPv4 one.
	AnnotationAllocatedEIPName6 = "juneau.loutres.me/allocated-eip-name-ipv6"
	AnnotationAllocatedEIPAddr6 = "juneau.loutres.me/allocated-eip-address-ipv6"
	// AnnotationDefaultNetwork marks the ExternalNetwork automatic ElasticIPs come from by default.
	AnnotationDefaultNetwork = "juneau.loutres.me/default-network"
)

// Compatibility aliases of the managed-cloud annotations (docs/reference.md#automatic).
const (
	AliasPodWithEIP      = "network.alibabacloud.com/pod-with-eip"
	AliasEIPBandwidth    = "network.alibabacloud.com/eip-bandwidth"
	AliasReleaseStrategy = "network.alibabacloud.com/pod-eip-release-strategy"
	AliasPodEIPInstance  = "network.alibabacloud.com/pod-eip-instanceid"
)

// Managed-cloud annotations written back on a Pod that asked with the aliases above
// (docs/reference.md#automatic), besides juneau's own allocated-eip-* keys.
const (
	// AliasAllocatedEIPID is the ElasticIP's name.
	AliasAllocatedEIPID = "network.alibabacloud.com/allocated-eip-id"
	// AliasAllocatedEIPAddress is the ElasticIP's address.
	AliasAllocatedEIPAddress = "network.alibabacloud.com/allocated-eipAddress"
	// AliasAllocatedENIID is the name of the NetworkInterface the ElasticIP is attached to.
	AliasAllocatedENIID = "network.alibabacloud.com/allocated-eni-id"
)

// Release strategies of automatic ElasticIPs.
const (
	ReleaseFollow = "Follow"
	ReleaseNever  = "Never"
)

// KubeVirt: a virt-launcher Pod (label kubevirt.io=virt-launcher) names its VM in
// vm.kubevirt.io/name (or its VMI in the kubevirt.io/domain annotation); its NICs get
// allocationIdentity "vmi.<name>" so a re-created launcher may take over the ElasticIP.
const (
	LabelKubeVirt               = "kubevirt.io"
	LabelKubeVirtLauncher       = "virt-launcher"
	LabelKubeVirtVMName         = "vm.kubevirt.io/name"
	AnnotationKubeVirtDomain    = "kubevirt.io/domain"
	AllocationIdentityVMIPrefix = "vmi."
)

// Field managers, one per writer, so server-side apply keeps their fields apart.
const (
	FieldManagerController = "juneau-controller"
	FieldManagerNode       = "juneau-node"
	FieldManagerCNI        = "juneau-cni"
	// FieldManagerWebhook writes the caBundle of the webhook configuration it serves.
	FieldManagerWebhook = "juneau-webhook"
)

// Names derived from others.
const (
	// ConsumerKindElasticIP is the consumer kind of claims made for ElasticIPs.
	ConsumerKindElasticIP = "ElasticIP"
	// ARPAdvertisementPrefix starts every ARPAdvertisement name: eip-<namespace>-<elasticip>
	// or its hashed form (package advertisement).
	ARPAdvertisementPrefix = "eip-"
	// NodeLeasePrefix starts the name of each node agent's heartbeat Lease,
	// juneau-node-<node>, in the agents' namespace (juneau-node as installed).
	NodeLeasePrefix = "juneau-node-"
	// DefaultInterface is the Pod's primary interface.
	DefaultInterface = "eth0"
	// DirectGateway is the on-link gateway of an eth0 that carries an ElasticIP.
	DirectGateway = "169.254.0.1"
	// DirectGateway6 is the gateway of a NIC that carries an IPv6 ElasticIP: a
	// link-local address the node's end of the NIC's veth holds.
	DirectGateway6 = "fe80::1"
	// DirectRulePriority is the priority of the "from <EIP> lookup T" rule of an extra NIC.
	DirectRulePriority = 100
)

// NetworkInterfaceName is "<pod>.<interface>".
func NetworkInterfaceName(pod, iface string) string { return pod + "." + iface }
