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
)

// Finalizers.
const (
	// FinalizerElasticIP keeps an ElasticIP until its reservation is released.
	FinalizerElasticIP = "juneau.loutres.me/release-address"
)

// Annotations the controller puts on objects it makes.
const (
	// AnnotationOwner on an ARPAdvertisement names its ElasticIP as "<namespace>/<name>".
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
	// ARPAdvertisementPrefix starts every ARPAdvertisement name: eip-<namespace>-<elasticip>.
	ARPAdvertisementPrefix = "eip-"
	// DefaultInterface is the Pod's primary interface.
	DefaultInterface = "eth0"
	// DirectGateway is the on-link gateway of an eth0 that carries an ElasticIP.
	DirectGateway = "169.254.0.1"
	// DirectRulePriority is the priority of the "from <EIP> lookup T" rule of an extra NIC.
	DirectRulePriority = 100
)

// NetworkInterfaceName is "<pod>.<interface>".
func NetworkInterfaceName(pod, iface string) string { return pod + "." + iface }

// ARPAdvertisementName is "eip-<namespace>-<elasticip>".
func ARPAdvertisementName(namespace, elasticIP string) string {
	return ARPAdvertisementPrefix + namespace + "-" + elasticIP
}
