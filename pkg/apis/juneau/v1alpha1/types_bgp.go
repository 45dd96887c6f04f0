package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +genclient:nonNamespaced
// +genclient:noStatus
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:selectablefield:JSONPath=`.spec.peerAddress`
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="PEER",type=string,JSONPath=`.spec.peerAddress`
// +kubebuilder:printcolumn:name="PEER-ASN",type=integer,JSONPath=`.spec.peerASN`
// +kubebuilder:printcolumn:name="MY-ASN",type=integer,JSONPath=`.spec.myASN`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`

// BGPPeer is a BGP router that the Nodes it selects announce the ElasticIPs of type bgp
// networks to. Every selected Node's agent keeps one session with it; the sessions of a
// Node are shown in the BGPNodeStatus named after that Node.
type BGPPeer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BGPPeerSpec `json:"spec"`
}

// BGPPeerSpec is the wanted state of a BGPPeer.
// +kubebuilder:validation:XValidation:rule="!has(self.keepaliveTime) || !has(self.holdTime) || duration(self.keepaliveTime) < duration(self.holdTime)",message="keepaliveTime must be shorter than holdTime"
// +kubebuilder:validation:XValidation:rule="!has(self.ebgpMultihop) || self.peerASN != self.myASN",message="ebgpMultihop applies to eBGP sessions only: peerASN equals myASN"
// +kubebuilder:validation:XValidation:rule="!has(self.ebgpMultihop) || !has(self.ttlSecurity) || !self.ttlSecurity",message="ttlSecurity applies to directly connected routers only: remove ebgpMultihop or ttlSecurity"
// +kubebuilder:validation:XValidation:rule="!has(self.ebgpMultihop) || !has(self.bfd)",message="bfd applies to directly connected routers only (single-hop BFD): remove ebgpMultihop or bfd"
type BGPPeerSpec struct {
	// peerAddress is the router's IPv4 address; the Node's agent connects to its TCP
	// port 179 (the Node itself listens on no TCP port).
	// +required
	// +kubebuilder:validation:MinLength=7
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:XValidation:rule="isIP(self) && ip.isCanonical(self) && ip(self).family() == 4",message="peerAddress must be an IPv4 address such as 10.225.51.1"
	PeerAddress string `json:"peerAddress"`

	// peerASN is the router's autonomous system number.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4294967294
	PeerASN int64 `json:"peerASN"`

	// myASN is the autonomous system number the Nodes use in this session. Equal to
	// peerASN, the session is internal BGP (iBGP).
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4294967294
	MyASN int64 `json:"myASN"`

	// nodeSelector selects the Nodes that peer with this router; empty or absent: every
	// Node.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`

	// holdTime is the BGP hold time the Nodes propose, in whole seconds from 3s to
	// 65535s; the session uses the smaller of both sides' values. Default 90s.
	// +optional
	// +kubebuilder:default="90s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('3s') && duration(self) <= duration('65535s')",message="holdTime must be between 3s and 65535s"
	// +kubebuilder:validation:XValidation:rule="duration(self).getMilliseconds() % 1000 == 0",message="holdTime must be a whole number of seconds"
	HoldTime *metav1.Duration `json:"holdTime,omitempty"`

	// keepaliveTime is the interval between keepalive messages, in whole seconds,
	// shorter than holdTime. Default: a third of the negotiated hold time.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s')",message="keepaliveTime must be at least 1s"
	// +kubebuilder:validation:XValidation:rule="duration(self).getMilliseconds() % 1000 == 0",message="keepaliveTime must be a whole number of seconds"
	KeepaliveTime *metav1.Duration `json:"keepaliveTime,omitempty"`

	// passwordSecretRef names the key of a Secret holding the TCP-MD5 password
	// (RFC 2385) of the session. The node agent must be allowed to read that Secret
	// (docs/bgp.md).
	// +optional
	PasswordSecretRef *SecretKeyReference `json:"passwordSecretRef,omitempty"`

	// ebgpMultihop is the IP TTL of an eBGP session to a router that is not on a
	// directly connected network (2–255). Absent: directly connected (TTL 1).
	// +optional
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=255
	EBGPMultihop *int32 `json:"ebgpMultihop,omitempty"`

	// ttlSecurity turns on the Generalized TTL Security Mechanism (GTSM, RFC 5082) for a
	// directly connected router: the Node sends with TTL 255 and takes only segments
	// that arrive with TTL 255, which nothing beyond the shared link can forge. The
	// router must do the same (docs/bgp.md#ttl-security), or the session never comes
	// up. Not with ebgpMultihop. Default false.
	// +optional
	TTLSecurity *bool `json:"ttlSecurity,omitempty"`

	// bfd turns on Bidirectional Forwarding Detection (BFD, RFC 5880, single hop as in
	// RFC 5881) beside the BGP session: the Node and the router exchange small UDP
	// packets every few hundred milliseconds, so that either side notices within about a
	// second that the other went away, where BGP alone waits for the hold time. The
	// router must run BFD for this Node too (docs/bgp.md#bfd); the Node then listens on
	// UDP port 3784. `bfd: {}` takes the defaults (300ms, 300ms, 3). Absent: no BFD.
	// Not with ebgpMultihop.
	// +optional
	BFD *BGPPeerBFD `json:"bfd,omitempty"`
}

// BGPPeerBFD are the BFD timers of the sessions with a BGPPeer. Each side sends at the
// slower of its own minTxInterval and the other's minRxInterval, and declares the other
// down when nothing arrived for the other's multiplier times that interval: with the
// defaults on both sides, 900ms.
type BGPPeerBFD struct {
	// minRxInterval is the shortest interval between the router's BFD packets that the
	// Node asks for (Required Min RX Interval), a whole number of milliseconds from 50ms
	// to 60s (the webhook checks the whole milliseconds). Default 300ms.
	// +optional
	// +kubebuilder:default="300ms"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('50ms') && duration(self) <= duration('60s')",message="minRxInterval must be between 50ms and 60s"
	MinRxInterval *metav1.Duration `json:"minRxInterval,omitempty"`

	// minTxInterval is the shortest interval between the Node's own BFD packets
	// (Desired Min TX Interval), a whole number of milliseconds from 50ms to 60s (the
	// webhook checks the whole milliseconds). Default 300ms.
	// +optional
	// +kubebuilder:default="300ms"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('50ms') && duration(self) <= duration('60s')",message="minTxInterval must be between 50ms and 60s"
	MinTxInterval *metav1.Duration `json:"minTxInterval,omitempty"`

	// multiplier is the Detect Mult the Node sends: the router declares the Node down
	// after this many of its intervals without a packet (2–255). Default 3.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=255
	Multiplier *int32 `json:"multiplier,omitempty"`
}

// SecretKeyReference names one key of a Secret.
type SecretKeyReference struct {
	// namespace of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// key in the Secret's data.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// BGPPeerList is a list of BGPPeers.
type BGPPeerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BGPPeer `json:"items"`
}

// BGPSessionState is the state of one BGP session of a Node: Established, or what
// keeps it from being established.
// +enum
// +kubebuilder:validation:Enum=Established;Connecting;Refused;WrongASN;AuthenticationFailed;Unreachable;Failed
type BGPSessionState string

const (
	// BGPSessionEstablished: the session is up; announcements flow.
	BGPSessionEstablished BGPSessionState = "Established"
	// BGPSessionConnecting: the session is being set up and no error was seen yet.
	BGPSessionConnecting BGPSessionState = "Connecting"
	// BGPSessionRefused: the router refused the connection (TCP reset, or a BGP
	// notification that it rejects or shut down the session).
	BGPSessionRefused BGPSessionState = "Refused"
	// BGPSessionWrongASN: one side's AS number is not what the other expects.
	BGPSessionWrongASN BGPSessionState = "WrongASN"
	// BGPSessionAuthenticationFailed: connections signed with the TCP-MD5 password get
	// no answer (the router drops segments whose signature does not match), or the
	// router reported an authentication failure.
	BGPSessionAuthenticationFailed BGPSessionState = "AuthenticationFailed"
	// BGPSessionUnreachable: the router cannot be reached, or stopped answering (hold
	// timer expired).
	BGPSessionUnreachable BGPSessionState = "Unreachable"
	// BGPSessionFailed: any other error; the message says which.
	BGPSessionFailed BGPSessionState = "Failed"
)

// BFDSessionState is the state of the BFD session beside a BGP session (RFC 5880 §4.1),
// as the Node sees it.
// +enum
// +kubebuilder:validation:Enum=Up;Down;Init;AdminDown
type BFDSessionState string

const (
	// BFDUp: BFD packets flow both ways; the router is declared down as soon as they
	// stop for the detection time.
	BFDUp BFDSessionState = "Up"
	// BFDDown: no BFD session with the router (it does not run BFD for this Node, or
	// its packets stopped). BFD only takes a session down that was Up: a router
	// without BFD keeps its BGP session.
	BFDDown BFDSessionState = "Down"
	// BFDInit: the Node hears the router and waits for the router to hear it.
	BFDInit BFDSessionState = "Init"
	// BFDAdminDown: the session is held down on purpose.
	BFDAdminDown BFDSessionState = "AdminDown"
)

// +genclient
// +genclient:nonNamespaced
// +genclient:noStatus
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=bgpns
// +kubebuilder:printcolumn:name="CONFIGURED",type=integer,JSONPath=`.status.peersConfigured`
// +kubebuilder:printcolumn:name="ESTABLISHED",type=integer,JSONPath=`.status.peersEstablished`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`

// BGPNodeStatus shows the BGP sessions of one Node. It is named after the Node and
// written by that Node's agent; there is nothing to set in it.
type BGPNodeStatus struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Status BGPNodeState `json:"status,omitempty"`
}

// BGPNodeState is the state of a Node's BGP sessions.
type BGPNodeState struct {
	// peersConfigured is the number of BGPPeers that select the Node.
	// +required
	PeersConfigured int32 `json:"peersConfigured"`
	// peersEstablished is the number of those sessions that are Established.
	// +required
	PeersEstablished int32 `json:"peersEstablished"`
	// peers has one entry per BGPPeer that selects the Node, sorted by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	Peers []BGPSessionStatus `json:"peers,omitempty"`
}

// BGPSessionStatus is the state of the session with one BGPPeer.
type BGPSessionStatus struct {
	// name of the BGPPeer.
	// +required
	Name string `json:"name"`
	// peerAddress of the BGPPeer.
	// +required
	PeerAddress string `json:"peerAddress"`
	// state: Established, or Connecting, or the last error (Refused, WrongASN,
	// AuthenticationFailed, Unreachable, Failed).
	// +required
	State BGPSessionState `json:"state"`
	// stateMessage says what went wrong, in words; empty while Established. (Named so
	// that kubectl describe, which sorts the keys of each entry, shows it after the
	// state.)
	// +optional
	StateMessage string `json:"stateMessage,omitempty"`
	// since is when the session entered this state.
	// +required
	Since metav1.Time `json:"since"`
	// prefixesAnnounced is the number of prefixes announced in this session.
	// +required
	PrefixesAnnounced int32 `json:"prefixesAnnounced"`
	// stateBFD is the state of the BFD session with the router (Up, Down, Init,
	// AdminDown) when the BGPPeer has spec.bfd; absent otherwise. (Named, like
	// stateMessage, so that kubectl describe, which sorts the keys of each entry, starts
	// the entry with its name and shows it after the state.)
	// +optional
	StateBFD BFDSessionState `json:"stateBFD,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// BGPNodeStatusList is a list of BGPNodeStatuses.
type BGPNodeStatusList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BGPNodeStatus `json:"items"`
}

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:selectablefield:JSONPath=`.spec.address`
// +kubebuilder:resource:scope=Cluster,shortName=bgpad
// +kubebuilder:selectablefield:JSONPath=`.spec.nodeName`
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="EXTERNALNETWORK",type=string,JSONPath=`.spec.externalNetwork`
// +kubebuilder:printcolumn:name="ADDRESS",type=string,JSONPath=`.spec.address`
// +kubebuilder:printcolumn:name="NODE",type=string,JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="ANNOUNCED",type=string,JSONPath=`.status.conditions[?(@.type=="Announced")].status`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`

// BGPAdvertisement says which single Node announces an address of a bgp network, as
// "<address>/32" with itself as next hop, to every BGPPeer selecting that Node. It is
// created by the controller, not by users.
type BGPAdvertisement struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BGPAdvertisementSpec `json:"spec"`
	// +optional
	Status BGPAdvertisementStatus `json:"status,omitempty"`
}

// BGPAdvertisementSpec is the wanted state of a BGPAdvertisement. externalNetwork and
// address are immutable.
type BGPAdvertisementSpec struct {
	// externalNetwork names the ExternalNetwork (type bgp) of the address. Immutable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="externalNetwork is immutable"
	ExternalNetwork string `json:"externalNetwork"`
	// address is the address to announce, IPv4 (as a /32) or IPv6 (as a /128, in its
	// canonical text form). Immutable.
	// +required
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="address is immutable"
	Address string `json:"address"`
	// nodeName is the single Node that announces the address.
	// +required
	// +kubebuilder:validation:MinLength=1
	NodeName string `json:"nodeName"`
	// communities are the BGP communities announced with the address: those of its
	// AddressPool's spec.bgpCommunities, as the controller copied them.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=32
	// +kubebuilder:validation:items:Pattern=`^(0|[1-9][0-9]{0,9}):(0|[1-9][0-9]{0,9})(:(0|[1-9][0-9]{0,9}))?$`
	Communities []string `json:"communities,omitempty"`
}

// BGPAdvertisementStatus is the observed state of a BGPAdvertisement.
type BGPAdvertisementStatus struct {
	// conditions: Announced, written by the agent of the announcing Node (to how many
	// Established peers the address is announced).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// BGPAdvertisementList is a list of BGPAdvertisements.
type BGPAdvertisementList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BGPAdvertisement `json:"items"`
}
