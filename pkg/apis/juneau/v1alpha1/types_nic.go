package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NetworkInterfacePhase summarises a NetworkInterface's state.
// +enum
type NetworkInterfacePhase string

const (
	// NetworkInterfacePending: a direct NIC that does not hold its ElasticIP (yet).
	NetworkInterfacePending NetworkInterfacePhase = "Pending"
	// NetworkInterfaceReady: the NIC has its address.
	NetworkInterfaceReady NetworkInterfacePhase = "Ready"
	// NetworkInterfaceFailed: the NIC can never hold its ElasticIP; the Pod must be
	// re-created (docs/reference.md#networkinterface).
	NetworkInterfaceFailed NetworkInterfacePhase = "Failed"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:selectablefield:JSONPath=`.spec.elasticIP`
// +kubebuilder:resource:scope=Namespaced,shortName=nic
// +kubebuilder:selectablefield:JSONPath=`.spec.nodeName`
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="NODE",type=string,JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="ELASTICIP",type=string,JSONPath=`.spec.elasticIP`
// +kubebuilder:printcolumn:name="ADDRESS",type=string,JSONPath=`.status.address`
// +kubebuilder:printcolumn:name="PHASE",type=string,JSONPath=`.status.phase`

// NetworkInterface is one network interface of a Pod, named "<pod>.<interface>" and
// owned by the Pod. It is created by the controller.
type NetworkInterface struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec NetworkInterfaceSpec `json:"spec"`
	// +optional
	Status NetworkInterfaceStatus `json:"status,omitempty"`
}

// NetworkInterfaceSpec is the wanted state of a NetworkInterface.
// +kubebuilder:validation:XValidation:rule="has(self.elasticIP) == has(oldSelf.elasticIP) && (!has(self.elasticIP) || self.elasticIP == oldSelf.elasticIP)",message="elasticIP is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.createdAfterPodNetwork) == has(oldSelf.createdAfterPodNetwork) && (!has(self.createdAfterPodNetwork) || self.createdAfterPodNetwork == oldSelf.createdAfterPodNetwork)",message="createdAfterPodNetwork is immutable"
type NetworkInterfaceSpec struct {
	// podRef names the Pod and the interface inside it. Immutable.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="podRef is immutable"
	PodRef PodReference `json:"podRef"`
	// nodeName is the Node the Pod runs on.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// elasticIP names an ElasticIP in the same namespace that this NIC carries directly.
	// Immutable.
	// +optional
	ElasticIP string `json:"elasticIP,omitempty"`
	// allocationIdentity is the workload identity of the Pod ("vmi.<vm>" for a KubeVirt
	// virt-launcher Pod): a new Pod of the same identity may take over the ElasticIP.
	// +optional
	AllocationIdentity string `json:"allocationIdentity,omitempty"`
	// createdAfterPodNetwork says the controller made this direct NIC when its Pod's
	// network was already set up (the annotations naming the ElasticIP were added or
	// changed on the running Pod): the CNI plugin plumbed the Pod without it, so it never
	// holds its ElasticIP and its phase is Failed (docs/reference.md#networkinterface).
	// Set at creation. Immutable.
	// +optional
	CreatedAfterPodNetwork bool `json:"createdAfterPodNetwork,omitempty"`
}

// PodReference names a Pod and one of its interfaces.
type PodReference struct {
	// name of the Pod.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// uid of the Pod.
	// +required
	// +kubebuilder:validation:MinLength=1
	UID string `json:"uid"`
	// interface is the interface name inside the Pod, e.g. "eth0".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	Interface string `json:"interface"`
}

// NetworkInterfaceStatus is the observed state of a NetworkInterface.
type NetworkInterfaceStatus struct {
	// phase: Pending, Ready or Failed.
	// +optional
	Phase NetworkInterfacePhase `json:"phase,omitempty"`
	// address in CIDR form: the Pod IP/32 for a Vpc NIC (its IPv6 address/128 when the
	// Pod has no IPv4 one), <ElasticIP>/32 (IPv6: /128) for a direct NIC (empty while it
	// does not hold the ElasticIP).
	// +optional
	Address string `json:"address,omitempty"`
	// addresses of a Vpc NIC in CIDR form, one per family, IPv4 first: a dual-stack Pod's
	// IPv4/32 and IPv6/128. An ElasticIPAttachment translates to the one of its
	// ElasticIP's family.
	// +optional
	// +listType=atomic
	Addresses []string `json:"addresses,omitempty"`
	// sandboxAddresses are the addresses the Pod's sandbox got on this interface, one
	// per family, IPv4 first, as the juneau CNI plugin saw them at the end of its ADD and
	// the node agent of the Pod's Node wrote them here (field manager juneau-node). The
	// controller takes a Vpc NIC's address from them while the kubelet has not yet
	// reported the Pod's IPs, so the ElasticIP is attached, translated and answered for
	// before that report, and the readiness gate can be True in it
	// (docs/reference.md#networkinterface). Once the Pod has IPs in its status, those
	// win.
	// +optional
	// +listType=atomic
	SandboxAddresses []string `json:"sandboxAddresses,omitempty"`
	// routes inside the Pod for a direct NIC.
	// +optional
	// +listType=atomic
	Routes []Route `json:"routes,omitempty"`
	// rules inside the Pod for a direct extra NIC.
	// +optional
	// +listType=atomic
	Rules []RoutingRule `json:"rules,omitempty"`
	// conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// Route is one route inside a Pod.
type Route struct {
	// destination in CIDR form, "0.0.0.0/0" for the default route.
	// +required
	Destination string `json:"destination"`
	// gateway address.
	// +optional
	Gateway string `json:"gateway,omitempty"`
	// onLink says the gateway is reachable on the link without a covering route.
	// +optional
	OnLink bool `json:"onLink,omitempty"`
	// table is the routing table; 0 means the main table.
	// +optional
	Table int64 `json:"table,omitempty"`
}

// RoutingRule is one policy routing rule inside a Pod.
type RoutingRule struct {
	// from is the source prefix in CIDR form.
	// +required
	From string `json:"from"`
	// table to look up.
	// +required
	Table int64 `json:"table"`
	// priority of the rule.
	// +required
	Priority int32 `json:"priority"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// NetworkInterfaceList is a list of NetworkInterfaces.
type NetworkInterfaceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NetworkInterface `json:"items"`
}

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:selectablefield:JSONPath=`.spec.address`
// +kubebuilder:resource:scope=Cluster,shortName=arpad
// +kubebuilder:selectablefield:JSONPath=`.spec.nodeName`
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="EXTERNALNETWORK",type=string,JSONPath=`.spec.externalNetwork`
// +kubebuilder:printcolumn:name="ADDRESS",type=string,JSONPath=`.spec.address`
// +kubebuilder:printcolumn:name="NODE",type=string,JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="ANSWERING",type=string,JSONPath=`.status.conditions[?(@.type=="Answering")].status`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`

// ARPAdvertisement says which single Node answers ARP for an address of an arp network.
// It is created by the controller, not by users.
type ARPAdvertisement struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ARPAdvertisementSpec `json:"spec"`
	// +optional
	Status ARPAdvertisementStatus `json:"status,omitempty"`
}

// ARPAdvertisementSpec is the wanted state of an ARPAdvertisement. Only nodeName may change.
type ARPAdvertisementSpec struct {
	// externalNetwork names the ExternalNetwork (type arp) of the address. Immutable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="externalNetwork is immutable"
	ExternalNetwork string `json:"externalNetwork"`
	// address is the address to answer for, IPv4 (by ARP) or IPv6 (by Neighbor
	// Discovery), in canonical form. Immutable.
	// +required
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="address is immutable"
	Address string `json:"address"`
	// nodeName is the single Node that answers.
	// +required
	// +kubebuilder:validation:MinLength=1
	NodeName string `json:"nodeName"`
}

// ARPAdvertisementStatus is the observed state of an ARPAdvertisement.
type ARPAdvertisementStatus struct {
	// conditions: Answering, written by the node agent that answers.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// ARPAdvertisementList is a list of ARPAdvertisements.
type ARPAdvertisementList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ARPAdvertisement `json:"items"`
}
