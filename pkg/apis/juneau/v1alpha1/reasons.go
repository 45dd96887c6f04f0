package v1alpha1

import corev1 "k8s.io/api/core/v1"

// Reasons of conditions and Events. Every reason has a severity, declared beside it in
// severities below: the type of the Event that announces it (EventType). Warning means
// something is wrong that a user has to act on; Normal is progress, or waiting that
// resolves itself. docs/reference.md#events says when Events are emitted.

// Condition reasons.
const (
	// ReasonAllocated: the address is reserved.
	ReasonAllocated = "Allocated"
	// ReasonNoAddressAvailable: every pool of the network is exhausted.
	ReasonNoAddressAvailable = "NoAddressAvailable"
	// ReasonAddressInUse: requestedIP is reserved by another consumer.
	ReasonAddressInUse = "AddressInUse"
	// ReasonMissingDependency: the ExternalNetwork or one of its pools does not exist.
	ReasonMissingDependency = "MissingDependency"
	// ReasonInvalidAddressPool: a pool cannot be used by its network (wrong mode, another
	// network's, unparsable), or requestedIP lies outside the pools.
	ReasonInvalidAddressPool = "InvalidAddressPool"
	// ReasonAddressOutsidePools: the ElasticIP's reserved address lies in no AddressPool
	// of its network any more (a pool was re-created smaller): it stays reserved while
	// the ElasticIP exists and is handed to nobody new.
	ReasonAddressOutsidePools = "AddressOutsidePools"
	// ReasonNamespaceNotAdmitted: the ElasticIP's ExternalNetwork does not admit its
	// namespace (spec.namespaceSelector, docs/reference.md#tenancy): Allocated False, no
	// address is reserved for it. As an Event, also: an ElasticIP that held its address
	// before keeps it (Allocated stays True, its message saying why).
	ReasonNamespaceNotAdmitted = "NamespaceNotAdmitted"
	// ReasonWaitingForNetworkInterfaces: a deleting ElasticIP is still named by NICs.
	ReasonWaitingForNetworkInterfaces = "WaitingForNetworkInterfaces"
	// ReasonAttached: the ElasticIP is used by one attachment or NIC.
	ReasonAttached = "Attached"
	// ReasonUnused: nobody asks for the ElasticIP.
	ReasonUnused = "Unused"
	// ReasonConflict: more than one user wants the ElasticIP at once.
	ReasonConflict = "Conflict"
	// ReasonWaitingForHandover: a deleting NIC may still carry the address.
	ReasonWaitingForHandover = "WaitingForHandover"
	// ReasonWaitingForElasticIP: a direct NIC (or attachment) waits for the ElasticIP to pick it.
	ReasonWaitingForElasticIP = "WaitingForElasticIP"
	// ReasonElasticIPNotReady: the ElasticIP has no address yet.
	ReasonElasticIPNotReady = "ElasticIPNotReady"
	// ReasonPodNetworkAlreadySetUp: a direct NIC was made after its Pod's network had
	// been set up, so it was never plumbed; phase Failed until the Pod is re-created.
	ReasonPodNetworkAlreadySetUp = "PodNetworkAlreadySetUp"
	// ReasonElasticIPDeleting: a direct NIC names an ElasticIP being deleted that it does
	// not hold, which is handed to no new NIC; phase Failed.
	ReasonElasticIPDeleting = "ElasticIPDeleting"
	// ReasonWaitingForNetworkInterface: an attachment's target NIC has no address or node yet.
	ReasonWaitingForNetworkInterface = "WaitingForNetworkInterface"
	// ReasonMissingElasticIP: an attachment names an ElasticIP that does not exist.
	ReasonMissingElasticIP = "MissingElasticIP"
	// ReasonMissingNetworkInterface: an attachment names a NIC that does not exist.
	ReasonMissingNetworkInterface = "MissingNetworkInterface"
	// ReasonAddressFamilyMismatch: an attachment's ElasticIP is of a family its target
	// Pod has no address of (an IPv6 ElasticIP for an IPv4-only Pod): juneau translates
	// within one family only, never between them (no NAT64).
	ReasonAddressFamilyMismatch = "AddressFamilyMismatch"
	// ReasonWaitingForPodIP: a Vpc NIC whose Pod has no IP yet.
	ReasonWaitingForPodIP = "WaitingForPodIP"
	// ReasonNotAllocated: the ElasticIP has no address, so nobody can use it yet.
	ReasonNotAllocated = "NotAllocated"
	// ReasonReleased: a deleting ElasticIP gave its address back.
	ReasonReleased = "Released"
	// ReasonReady: the object is ready.
	ReasonReady = "Ready"
	// ReasonPoolsReady: every pool of a network exists and matches its type.
	ReasonPoolsReady = "PoolsReady"
	// ReasonNodeAddressInPool: a Node address lies inside an AddressPool.
	ReasonNodeAddressInPool = "NodeAddressInPool"
	// ReasonAnswering: the node agent answers ARP for the address.
	ReasonAnswering = "Answering"
	// ReasonReservedAddress: the advertisement's address is the network or broadcast
	// address of the answering Node's external subnet; the node agent does not answer.
	ReasonReservedAddress = "ReservedAddress"
	// ReasonAgentNotReporting: the node agent of the advertisement's Node stopped renewing
	// its heartbeat Lease, so nobody can tell whether it still answers (Answering Unknown).
	ReasonAgentNotReporting = "AgentNotReporting"
	// ReasonNotAnswering: an ElasticIP is used, but the Node of its user does not answer
	// ARP for it (yet), so no traffic reaches it.
	ReasonNotAnswering = "NotAnswering"
	// ReasonProgrammed: the node agent programmed the Pod's ElasticIP traffic.
	ReasonProgrammed = "Programmed"
	// ReasonNotProgrammed: the Pod's ElasticIP traffic is not programmed on its Node.
	ReasonNotProgrammed = "NotProgrammed"
	// ReasonAnnounced: the /32 is announced to at least one Established BGP peer.
	ReasonAnnounced = "Announced"
	// ReasonNotAnnounced: an ElasticIP of a bgp network is used, but the Node of its
	// user does not announce it to any Established BGP peer (yet), so no router sends
	// its traffic there.
	ReasonNotAnnounced = "NotAnnounced"
	// ReasonNoEstablishedPeer: BGPPeers select the Node but none of their sessions is
	// Established.
	ReasonNoEstablishedPeer = "NoEstablishedPeer"
	// ReasonNoPeer: no BGPPeer selects the Node, so nobody hears the announcement.
	ReasonNoPeer = "NoPeer"
	// ReasonAssigned: the Pod's automatic ElasticIP is attached to this Pod.
	ReasonAssigned = "Assigned"
	// ReasonElasticIPInUse: the ElasticIP a Pod names is used by another Pod (or
	// another ElasticIPAttachment, or directly): the Pod waits for it to be free.
	ReasonElasticIPInUse = "ElasticIPInUse"
	// ReasonWriteRefused: the API server refused a write the controller needs (the
	// webhook denied it, a quota, an invalid object): it is not retried until something
	// changes; the message says what to fix.
	ReasonWriteRefused = "WriteRefused"
	// ReasonNotRequested: the Pod no longer asks for an automatic ElasticIP (or has
	// finished), so it has none.
	ReasonNotRequested = "NotRequested"
	// ReasonNoIPv6NextHop: the advertisement's address is IPv6 and the Node's agent has
	// no IPv6 next hop to announce it with (no global IPv6 address on its external
	// interface at start, and no --bgp-ipv6-next-hop).
	ReasonNoIPv6NextHop = "NoIPv6NextHop"
)

// Reasons of Events that announce an action rather than a condition.
const (
	// EventAdvertisementMoved: another Node answers ARP for an ElasticIP.
	EventAdvertisementMoved = "AdvertisementMoved"
	// EventWebhookReplicaUnreachable: the controller deleted a webhook replica it could
	// not reach (its Node died), so that the API server stops calling it.
	EventWebhookReplicaUnreachable = "WebhookReplicaUnreachable"
	// EventInvalidAnnotations: a Pod's juneau annotations cannot be read.
	EventInvalidAnnotations = "InvalidAnnotations"
	// EventHostNetwork: a host-network Pod asks for an automatic ElasticIP.
	EventHostNetwork = "HostNetworkPod"
	// EventExternalNetworkNotFound: the network a Pod names does not exist (or is deleting).
	EventExternalNetworkNotFound = "ExternalNetworkNotFound"
	// EventNoDefaultNetwork: a Pod names no network and none is the default.
	EventNoDefaultNetwork = "NoDefaultExternalNetwork"
	// EventAmbiguousDefaultNetwork: more than one network is marked as the default.
	EventAmbiguousDefaultNetwork = "AmbiguousDefaultExternalNetwork"
	// EventElasticIPNameTaken: a user's ElasticIP has the name of a Pod's automatic one.
	EventElasticIPNameTaken = "ElasticIPNameTaken"
	// EventAttachmentNameTaken: a user's attachment has the name of a Pod's automatic one.
	EventAttachmentNameTaken = "ElasticIPAttachmentNameTaken"
	// EventElasticIPNotFound: the ElasticIP a Pod names does not exist (or is deleting).
	EventElasticIPNotFound = "ElasticIPNotFound"
	// EventReleaseBlocked: an ElasticIP due for release is still referenced.
	EventReleaseBlocked = "ReleaseBlocked"
	// EventElasticIPCreated: an automatic ElasticIP was created for a Pod.
	EventElasticIPCreated = "ElasticIPCreated"
	// EventAllocated: a Pod's annotations now carry its ElasticIP's name and address.
	EventAllocated = "ElasticIPAllocated"
	// EventAttachmentCreated: an automatic attachment was created for a Pod.
	EventAttachmentCreated = "ElasticIPAttachmentCreated"
	// EventAttachmentDeleted: an automatic attachment was deleted.
	EventAttachmentDeleted = "ElasticIPAttachmentDeleted"
	// EventReleaseScheduled: an automatic ElasticIP will be released after a delay.
	EventReleaseScheduled = "ReleaseScheduled"
	// EventReleaseCancelled: the Pod came back before its ElasticIP was released.
	EventReleaseCancelled = "ReleaseCancelled"
	// EventReleased: an automatic ElasticIP was released.
	EventReleased = "ElasticIPReleased"
	// EventFailedCreate, EventFailedUpdate, EventFailedDelete: a write failed.
	EventFailedCreate = "FailedCreate"
	EventFailedUpdate = "FailedUpdate"
	EventFailedDelete = "FailedDelete"
)

// severities declares the severity of every reason above, in the same order.
var severities = map[string]string{
	ReasonAllocated:                   corev1.EventTypeNormal,
	ReasonNoAddressAvailable:          corev1.EventTypeWarning,
	ReasonAddressInUse:                corev1.EventTypeWarning,
	ReasonMissingDependency:           corev1.EventTypeWarning,
	ReasonInvalidAddressPool:          corev1.EventTypeWarning,
	ReasonAddressOutsidePools:         corev1.EventTypeWarning,
	ReasonNamespaceNotAdmitted:        corev1.EventTypeWarning,
	ReasonWaitingForNetworkInterfaces: corev1.EventTypeNormal,
	ReasonAttached:                    corev1.EventTypeNormal,
	ReasonUnused:                      corev1.EventTypeNormal,
	ReasonConflict:                    corev1.EventTypeWarning,
	ReasonWaitingForHandover:          corev1.EventTypeNormal,
	ReasonWaitingForElasticIP:         corev1.EventTypeNormal,
	ReasonElasticIPNotReady:           corev1.EventTypeNormal,
	ReasonPodNetworkAlreadySetUp:      corev1.EventTypeWarning,
	ReasonElasticIPDeleting:           corev1.EventTypeWarning,
	ReasonWaitingForNetworkInterface:  corev1.EventTypeNormal,
	ReasonMissingElasticIP:            corev1.EventTypeWarning,
	ReasonMissingNetworkInterface:     corev1.EventTypeWarning,
	ReasonAddressFamilyMismatch:       corev1.EventTypeWarning,
	ReasonWaitingForPodIP:             corev1.EventTypeNormal,
	ReasonNotAllocated:                corev1.EventTypeNormal,
	ReasonReleased:                    corev1.EventTypeNormal,
	ReasonReady:                       corev1.EventTypeNormal,
	ReasonPoolsReady:                  corev1.EventTypeNormal,
	ReasonNodeAddressInPool:           corev1.EventTypeWarning,
	ReasonAnswering:                   corev1.EventTypeNormal,
	ReasonNotAnswering:                corev1.EventTypeNormal,
	ReasonAgentNotReporting:           corev1.EventTypeWarning,
	ReasonReservedAddress:             corev1.EventTypeWarning,
	ReasonProgrammed:                  corev1.EventTypeNormal,
	ReasonNotProgrammed:               corev1.EventTypeNormal,
	ReasonAnnounced:                   corev1.EventTypeNormal,
	ReasonNotAnnounced:                corev1.EventTypeNormal,
	ReasonNoEstablishedPeer:           corev1.EventTypeWarning,
	ReasonNoPeer:                      corev1.EventTypeWarning,
	ReasonAssigned:                    corev1.EventTypeNormal,
	ReasonElasticIPInUse:              corev1.EventTypeWarning,
	ReasonWriteRefused:                corev1.EventTypeWarning,
	ReasonNotRequested:                corev1.EventTypeNormal,
	ReasonNoIPv6NextHop:               corev1.EventTypeWarning,

	EventAdvertisementMoved:        corev1.EventTypeNormal,
	EventWebhookReplicaUnreachable: corev1.EventTypeWarning,
	EventInvalidAnnotations:        corev1.EventTypeWarning,
	EventHostNetwork:               corev1.EventTypeWarning,
	EventExternalNetworkNotFound:   corev1.EventTypeWarning,
	EventNoDefaultNetwork:          corev1.EventTypeWarning,
	EventAmbiguousDefaultNetwork:   corev1.EventTypeWarning,
	EventElasticIPNameTaken:        corev1.EventTypeWarning,
	EventAttachmentNameTaken:       corev1.EventTypeWarning,
	EventElasticIPNotFound:         corev1.EventTypeWarning,
	EventReleaseBlocked:            corev1.EventTypeWarning,
	EventElasticIPCreated:          corev1.EventTypeNormal,
	EventAllocated:                 corev1.EventTypeNormal,
	EventAttachmentCreated:         corev1.EventTypeNormal,
	EventAttachmentDeleted:         corev1.EventTypeNormal,
	EventReleaseScheduled:          corev1.EventTypeNormal,
	EventReleaseCancelled:          corev1.EventTypeNormal,
	EventReleased:                  corev1.EventTypeNormal,
	EventFailedCreate:              corev1.EventTypeWarning,
	EventFailedUpdate:              corev1.EventTypeWarning,
	EventFailedDelete:              corev1.EventTypeWarning,
}

// EventType is the severity of a reason: corev1.EventTypeWarning or
// corev1.EventTypeNormal. A reason declared nowhere is a Warning, so that a forgotten
// declaration is noticed rather than hidden.
func EventType(reason string) string {
	if t, ok := severities[reason]; ok {
		return t
	}
	return corev1.EventTypeWarning
}
