package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ElasticIPPhase summarises an ElasticIP's state.
// +enum
type ElasticIPPhase string

const (
	// ElasticIPPending: network and pools resolved, no address reserved yet.
	ElasticIPPending ElasticIPPhase = "Pending"
	// ElasticIPAvailable: an address is reserved and nobody uses it.
	ElasticIPAvailable ElasticIPPhase = "Available"
	// ElasticIPAttached: exactly one ElasticIPAttachment or one NetworkInterface uses the address.
	ElasticIPAttached ElasticIPPhase = "Attached"
	// ElasticIPError: dependencies are inconsistent or the address is wanted by conflicting users.
	ElasticIPError ElasticIPPhase = "Error"
)

// AttachmentKind names the kind of object that uses an ElasticIP.
// +enum
// +kubebuilder:validation:Enum=ElasticIPAttachment;NetworkInterface
type AttachmentKind string

const (
	// AttachmentKindElasticIPAttachment: NAT use.
	AttachmentKindElasticIPAttachment AttachmentKind = "ElasticIPAttachment"
	// AttachmentKindNetworkInterface: direct use.
	AttachmentKindNetworkInterface AttachmentKind = "NetworkInterface"
)

// IPFamily is the address family of an ElasticIP.
// +enum
// +kubebuilder:validation:Enum=IPv4;IPv6
type IPFamily string

const (
	// IPv4: an address from the network's IPv4 pools (the default).
	IPv4 IPFamily = "IPv4"
	// IPv6: an address from the network's IPv6 pools.
	IPv6 IPFamily = "IPv6"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:selectablefield:JSONPath=`.spec.externalNetwork`
// +kubebuilder:resource:scope=Namespaced,shortName=eip
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="EXTERNALNETWORK",type=string,JSONPath=`.spec.externalNetwork`
// +kubebuilder:printcolumn:name="ADDRESS",type=string,JSONPath=`.status.address`
// +kubebuilder:printcolumn:name="ATTACHMENTKIND",type=string,JSONPath=`.status.attachment.kind`
// +kubebuilder:printcolumn:name="ATTACHMENT",type=string,JSONPath=`.status.attachment.name`
// +kubebuilder:printcolumn:name="PHASE",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="ALLOCATED",type=string,JSONPath=`.status.conditions[?(@.type=="Allocated")].status`
// +kubebuilder:printcolumn:name="ATTACHED",type=string,JSONPath=`.status.conditions[?(@.type=="Attached")].status`

// ElasticIP is an externally reachable IPv4 or IPv6 address reserved from an
// ExternalNetwork, used by one Pod at a time either through NAT or directly on a Pod NIC.
type ElasticIP struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ElasticIPSpec `json:"spec"`
	// +optional
	Status ElasticIPStatus `json:"status,omitempty"`
}

// ElasticIPSpec is the wanted state of an ElasticIP.
// +kubebuilder:validation:XValidation:rule="has(self.requestedIP) == has(oldSelf.requestedIP) && (!has(self.requestedIP) || self.requestedIP == oldSelf.requestedIP)",message="requestedIP is immutable"
type ElasticIPSpec struct {
	// externalNetwork names the ExternalNetwork the address comes from. Immutable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="externalNetwork is immutable"
	ExternalNetwork string `json:"externalNetwork"`

	// ipFamily is the family of the address: IPv4 (the default) or IPv6. Immutable.
	// +optional
	// +kubebuilder:default=IPv4
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="ipFamily is immutable"
	IPFamily IPFamily `json:"ipFamily,omitempty"`

	// requestedIP pins the address, in canonical form (10.225.51.5, 2001:db8::5) and of
	// the family ipFamily; it must lie in one of the network's pools. Immutable.
	// +optional
	// +kubebuilder:validation:MaxLength=39
	RequestedIP string `json:"requestedIP,omitempty"`

	// bandwidthMbps limits the traffic of this address, in Mbit/s, in each direction.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	BandwidthMbps *int32 `json:"bandwidthMbps,omitempty"`
}

// Family is the spec's ipFamily with its default applied: IPv4 when unset.
func (s ElasticIPSpec) Family() IPFamily {
	if s.IPFamily == "" {
		return IPv4
	}
	return s.IPFamily
}

// ElasticIPStatus is the observed state of an ElasticIP.
type ElasticIPStatus struct {
	// phase: Pending, Available, Attached or Error.
	// +optional
	Phase ElasticIPPhase `json:"phase,omitempty"`
	// address is the reserved address.
	// +optional
	Address string `json:"address,omitempty"`
	// attachment names the one object that uses the address; absent while unused.
	// +optional
	Attachment *AttachmentReference `json:"attachment,omitempty"`
	// conditions: Allocated and Attached.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// AttachmentReference names the object using an ElasticIP, in the ElasticIP's namespace.
// The user is that very object: another object of the same kind and name (a Pod
// re-created under the same name gets a new NetworkInterface) has another UID and is not
// the recorded user (docs/reference.md#holder).
type AttachmentReference struct {
	// kind: ElasticIPAttachment or NetworkInterface.
	// +required
	Kind AttachmentKind `json:"kind"`
	// name of the object.
	// +required
	Name string `json:"name"`
	// uid of the object. A record without one names nobody.
	// +optional
	UID types.UID `json:"uid,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// ElasticIPList is a list of ElasticIPs.
type ElasticIPList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ElasticIP `json:"items"`
}

// AttachmentPhase summarises an ElasticIPAttachment's state.
// +enum
type AttachmentPhase string

const (
	// AttachmentPending: waiting for the ElasticIP or the target NIC.
	AttachmentPending AttachmentPhase = "Pending"
	// AttachmentAttached: the ElasticIP is translated to the target's Pod IP.
	AttachmentAttached AttachmentPhase = "Attached"
	// AttachmentError: a reference is missing.
	AttachmentError AttachmentPhase = "Error"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:selectablefield:JSONPath=`.spec.elasticIPRef.name`
// +kubebuilder:selectablefield:JSONPath=`.spec.targetRef.networkInterfaceName`
// +kubebuilder:resource:scope=Namespaced,shortName=eipa
// +kubebuilder:selectablefield:JSONPath=`.status.nodeName`
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="ELASTICIP",type=string,JSONPath=`.spec.elasticIPRef.name`
// +kubebuilder:printcolumn:name="NETWORKINTERFACE",type=string,JSONPath=`.spec.targetRef.networkInterfaceName`
// +kubebuilder:printcolumn:name="EIP",type=string,JSONPath=`.status.elasticIP`
// +kubebuilder:printcolumn:name="PODIP",type=string,JSONPath=`.status.podIP`
// +kubebuilder:printcolumn:name="NODE",type=string,JSONPath=`.status.nodeName`
// +kubebuilder:printcolumn:name="PHASE",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`

// ElasticIPAttachment uses an ElasticIP through 1:1 NAT to a Pod's NetworkInterface.
type ElasticIPAttachment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ElasticIPAttachmentSpec `json:"spec"`
	// +optional
	Status ElasticIPAttachmentStatus `json:"status,omitempty"`
}

// ElasticIPAttachmentSpec is the wanted state of an ElasticIPAttachment. Immutable.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
type ElasticIPAttachmentSpec struct {
	// elasticIPRef names the ElasticIP, in the same namespace.
	// +required
	ElasticIPRef ElasticIPReference `json:"elasticIPRef"`
	// targetRef names the NetworkInterface, in the same namespace.
	// +required
	TargetRef AttachmentTarget `json:"targetRef"`
}

// ElasticIPReference names an ElasticIP in the same namespace.
type ElasticIPReference struct {
	// name of the ElasticIP.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// AttachmentTarget names the NetworkInterface an ElasticIP is translated to.
type AttachmentTarget struct {
	// networkInterfaceName is the NetworkInterface's name, e.g. "nginx.eth0".
	// +required
	// +kubebuilder:validation:MinLength=1
	NetworkInterfaceName string `json:"networkInterfaceName"`
}

// ElasticIPAttachmentStatus is the observed state of an ElasticIPAttachment.
type ElasticIPAttachmentStatus struct {
	// phase: Pending, Attached or Error.
	// +optional
	Phase AttachmentPhase `json:"phase,omitempty"`
	// elasticIP is the ElasticIP's address.
	// +optional
	ElasticIP string `json:"elasticIP,omitempty"`
	// podIP is the target NIC's Pod (Vpc) address.
	// +optional
	PodIP string `json:"podIP,omitempty"`
	// nodeName is the Node of the target's Pod; its node agent programs the NAT.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
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

// ElasticIPAttachmentList is a list of ElasticIPAttachments.
type ElasticIPAttachmentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ElasticIPAttachment `json:"items"`
}
