package v1alpha1

import (
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AdvertiseMode says how the addresses of a pool or a network are made reachable.
// +enum
// +kubebuilder:validation:Enum=arp;bgp
type AdvertiseMode string

const (
	// AdvertiseARP means the Node using an address answers ARP for it on its external interface.
	AdvertiseARP AdvertiseMode = "arp"
	// AdvertiseBGP means the Node using an address announces it to its BGP peers.
	AdvertiseBGP AdvertiseMode = "bgp"
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=pool
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="MODE",type=string,JSONPath=`.spec.advertiseMode`
// +kubebuilder:printcolumn:name="TOTAL",type=integer,JSONPath=`.status.total`
// +kubebuilder:printcolumn:name="ALLOCATED",type=integer,JSONPath=`.status.allocated`
// +kubebuilder:printcolumn:name="AVAILABLE",type=integer,JSONPath=`.status.available`
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`

// AddressPool is a set of external addresses of one family (IPv4 or IPv6) ElasticIPs are
// reserved from.
type AddressPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec AddressPoolSpec `json:"spec"`
	// +optional
	Status AddressPoolStatus `json:"status,omitempty"`
}

// AddressPoolSpec is the wanted state of an AddressPool.
// +kubebuilder:validation:XValidation:rule="!has(self.bgpCommunities) || size(self.bgpCommunities) == 0 || self.advertiseMode == 'bgp'",message="bgpCommunities applies to pools of advertiseMode bgp only"
type AddressPoolSpec struct {
	// advertiseMode says how the pool's addresses are made reachable. Immutable.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="advertiseMode is immutable"
	AdvertiseMode AdvertiseMode `json:"advertiseMode"`

	// addresses lists CIDRs ("10.225.51.0/24", "2001:db8::/64"), inclusive ranges
	// ("10.225.51.5-10.225.51.20", "2001:db8::5-2001:db8::20") or single addresses,
	// all of one family. Entries may only be appended.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=80
	// +kubebuilder:validation:XValidation:rule="oldSelf.all(a, a in self)",message="addresses is append-only: existing entries cannot be removed"
	Addresses []string `json:"addresses"`

	// bgpCommunities are BGP communities added to every announcement of the pool's
	// addresses (advertiseMode bgp only), for routers to filter on: standard ones as
	// "65000:100" (two numbers of 0–65535, RFC 1997) and large ones as "65000:1:2"
	// (three numbers of 0–4294967295, RFC 8092), in decimal without leading zeros. May
	// change at any time; the Nodes announce the addresses again with the new set.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=32
	// +kubebuilder:validation:items:Pattern=`^(0|[1-9][0-9]{0,9}):(0|[1-9][0-9]{0,9})(:(0|[1-9][0-9]{0,9}))?$`
	// +kubebuilder:validation:XValidation:rule="self.all(c, c.split(':').size() == 3 ? c.split(':').all(n, int(n) <= 4294967295) : c.split(':').all(n, int(n) <= 65535))",message="a standard community has two numbers of 0 to 65535 (65000:100), a large one three numbers of 0 to 4294967295 (65000:1:2)"
	BGPCommunities []string `json:"bgpCommunities,omitempty"`
}

// AddressPoolStatus is the observed state of an AddressPool.
type AddressPoolStatus struct {
	// total is the number of addresses in the pool.
	// +optional
	Total int64 `json:"total,omitempty"`
	// allocated is the number of addresses reserved by AllocationClaims.
	// +optional
	Allocated int64 `json:"allocated,omitempty"`
	// available is total minus allocated.
	// +optional
	Available int64 `json:"available,omitempty"`
	// conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// AddressPoolList is a list of AddressPools.
type AddressPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AddressPool `json:"items"`
}

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=extnet
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="TYPE",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="POOLS",type=string,JSONPath=`.spec.addressPools`
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`

// ExternalNetwork is a network outside the cluster that ElasticIPs are reachable from,
// backed by an ordered list of AddressPools.
type ExternalNetwork struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ExternalNetworkSpec `json:"spec"`
	// +optional
	Status ExternalNetworkStatus `json:"status,omitempty"`
}

// ExternalNetworkSpec is the wanted state of an ExternalNetwork.
type ExternalNetworkSpec struct {
	// type says how addresses of this network are made reachable; every pool's
	// advertiseMode must equal it. Immutable.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="type is immutable"
	Type AdvertiseMode `json:"type"`

	// addressPools names the AddressPools of this network, tried in order. Entries may
	// only be appended.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="oldSelf.all(p, p in self)",message="addressPools is append-only: existing entries cannot be removed"
	AddressPools []string `json:"addressPools"`

	// gratuitousARP makes, on a network of type arp, the Node that starts answering for
	// an address (newly used, or its user moved to that Node) send a few gratuitous ARP
	// replies for it, so that neighbours update their caches at once instead of when
	// their entries expire. Default false: nothing is sent unasked.
	// +optional
	GratuitousARP bool `json:"gratuitousARP,omitempty"`

	// namespaceSelector says which namespaces may take addresses from this network:
	// only in a namespace whose labels it matches may an ElasticIP name the network
	// (an ElasticIP made by a user, or one made for a Pod that asks for an automatic
	// ElasticIP through its annotations). Absent, every namespace may (as before the
	// field existed); an empty selector ({}) selects every namespace too. The webhook
	// refuses an ElasticIP, or a Pod asking for an automatic one, in a namespace the
	// network does not select; the ElasticIP controller reserves no new address for
	// an ElasticIP whose namespace is not selected (a namespace relabelled, the
	// selector changed) and keeps the address of one that already holds one, saying
	// so in its Allocated condition (docs/reference.md#tenancy). May change at any
	// time.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// ExternalNetworkStatus is the observed state of an ExternalNetwork.
type ExternalNetworkStatus struct {
	// conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// ExternalNetworkList is a list of ExternalNetworks.
type ExternalNetworkList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ExternalNetwork `json:"items"`
}

// +genclient
// +genclient:nonNamespaced
// +genclient:noStatus
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=claim
// +kubebuilder:selectablefield:JSONPath=`.spec.addressPool`
// +kubebuilder:printcolumn:name="POOL",type=string,JSONPath=`.spec.addressPool`
// +kubebuilder:printcolumn:name="CONSUMER-KIND",type=string,JSONPath=`.spec.consumer.kind`
// +kubebuilder:printcolumn:name="CONSUMER",type=string,JSONPath=`.spec.consumer.name`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`

// AllocationClaim reserves one address. Its name is the address itself, so the API
// server guarantees that an address is never reserved twice.
type AllocationClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec AllocationClaimSpec `json:"spec"`
}

// AllocationClaimSpec says which pool an address comes from and who holds it. Immutable.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
type AllocationClaimSpec struct {
	// addressPool is the AddressPool the address belongs to.
	// +required
	// +kubebuilder:validation:MinLength=1
	AddressPool string `json:"addressPool"`
	// address is the reserved address in canonical form (10.225.51.5, 2001:db8::5); the
	// claim's name is this address, with '-' for ':' in IPv6 (2001-db8--5,
	// docs/resources.md#allocationclaim).
	// +required
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=39
	Address string `json:"address"`
	// consumer is the object the address is reserved for.
	// +required
	Consumer ConsumerReference `json:"consumer"`
}

// ConsumerReference names the object an address is reserved for.
type ConsumerReference struct {
	// kind of the consumer, e.g. ElasticIP.
	// +required
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
	// namespace of the consumer; empty for cluster-scoped consumers.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// name of the consumer.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// uid of the consumer; a claim whose consumer UID no longer exists is an orphan.
	// +required
	// +kubebuilder:validation:MinLength=1
	UID string `json:"uid"`
}

// Describe names the consumer as messages do: its kind and quoted "<namespace>/<name>"
// (only the name for a cluster-scoped consumer).
func (c ConsumerReference) Describe() string {
	if c.Namespace == "" {
		return c.Kind + " " + strconv.Quote(c.Name)
	}
	return c.Kind + " " + strconv.Quote(c.Namespace+"/"+c.Name)
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// AllocationClaimList is a list of AllocationClaims.
type AllocationClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AllocationClaim `json:"items"`
}
