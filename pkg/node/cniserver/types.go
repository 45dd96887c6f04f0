// Package cniserver is the node agent's side of the local unix socket the juneau CNI
// plugin asks. The plugin holds no cluster credentials: everything it needs to know
// about a Pod's direct NICs (docs/reference.md#direct-nics) comes from the agent's caches through this
// socket, and the plugin reports back what it plumbed.
//
// Protocol (HTTP/1.1 over the unix socket, JSON bodies):
//
//	GET  /v1/interfaces?namespace=<ns>&pod=<name>&uid=<uid>  → InterfacesResponse
//	POST /v1/plumbed    Plumbing                               → 204 (after every successful ADD)
//	POST /v1/unplumbed  Plumbing                               → 204 (during DEL)
//
// Errors are answered with a non-2xx status and an ErrorResponse body.
package cniserver

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// DefaultSocket is where the agent listens and the plugin asks unless configured otherwise.
const DefaultSocket = "/run/juneau/cni.sock"

// Paths of the protocol.
const (
	PathInterfaces = "/v1/interfaces"
	PathPlumbed    = "/v1/plumbed"
	PathUnplumbed  = "/v1/unplumbed"
)

// Interface is one direct NIC of a Pod (a NetworkInterface with spec.elasticIP) as the
// agent's cache sees it.
type Interface struct {
	// Interface is the name inside the Pod, e.g. "eth0" or "ext0".
	Interface string `json:"interface"`
	// ElasticIP is the name of the ElasticIP the NIC carries (same namespace as the Pod).
	ElasticIP string `json:"elasticIP"`
	// Holds is true when the NIC holds the ElasticIP: status.address is set and the
	// phase is Ready. The plugin plumbs only NICs that hold their address.
	Holds bool `json:"holds"`
	// Address is status.address, "<EIP>/32" ("<EIP>/128" for IPv6), empty while the
	// NIC does not hold it.
	Address string `json:"address,omitempty"`
	// Routes and Rules are status.routes and status.rules: what to set up inside the
	// Pod. When empty the plugin derives them with DefaultRouting.
	Routes []v1alpha1.Route       `json:"routes,omitempty"`
	Rules  []v1alpha1.RoutingRule `json:"rules,omitempty"`
	// Waiting explains, while Holds is false, whom the NIC waits for (the Ready
	// condition's message, naming the holder).
	Waiting string `json:"waiting,omitempty"`
}

// NotHeldMessage is Interface.Waiting of a NIC that does not hold its ElasticIP: it
// names the NIC (its NetworkInterface's name) and the ElasticIP, then why, when known
// (the NetworkInterface's Ready message, which names the holder).
func NotHeldMessage(nic, elasticIP, why string) string {
	msg := fmt.Sprintf("NetworkInterface %q does not hold ElasticIP %q", nic, elasticIP)
	if why != "" {
		msg += ": " + why
	}
	return msg
}

// InterfacesResponse is the body of GET /v1/interfaces.
type InterfacesResponse struct {
	Interfaces []Interface `json:"interfaces"`
}

// Plumbing tells the agent what the plugin set up for a Pod (POST /v1/plumbed) or
// took down (POST /v1/unplumbed).
type Plumbing struct {
	Namespace   string    `json:"namespace"`
	Pod         string    `json:"pod"`
	UID         types.UID `json:"uid,omitempty"`
	ContainerID string    `json:"containerID"`
	// Interfaces are the direct NICs concerned.
	Interfaces []PlumbedInterface `json:"interfaces"`
	// Addresses are, after an ADD, the Pod's own addresses as its primary plugin gave
	// them (the runtime reports them as the Pod's IPs), when the Pod's eth0 does not
	// carry an ElasticIP directly. The agent writes them into the Pod's eth0
	// NetworkInterface (status.sandboxAddresses) before the kubelet reports them.
	Addresses []string `json:"addresses,omitempty"`
}

// PlumbedInterface is one direct NIC the plugin plumbed.
type PlumbedInterface struct {
	// Interface is the name inside the Pod.
	Interface string `json:"interface"`
	// ElasticIP is the ElasticIP's name.
	ElasticIP string `json:"elasticIP"`
	// Address is "<EIP>/32" as configured inside the Pod.
	Address string `json:"address"`
	// HostInterface is the Node-side end of the NIC's veth, where the node routes
	// <EIP>/32 and where the Pod's packets enter the node (for anti-spoofing).
	HostInterface string `json:"hostInterface"`
	// Routes and Rules are what was configured inside the Pod.
	Routes []v1alpha1.Route       `json:"routes,omitempty"`
	Rules  []v1alpha1.RoutingRule `json:"rules,omitempty"`
}

// ErrorResponse is the body of every non-2xx answer.
type ErrorResponse struct {
	Error string `json:"error"`
}

// Source answers which direct NICs a Pod has. The node agent implements it from its
// NetworkInterface (and Pod) listers.
//
// Contract: the answer is exactly the Pod's direct NICs. A Pod whose annotations ask
// for a direct NIC must be reported even before its NetworkInterface reaches the cache
// (Holds false, Waiting saying so): an empty answer lets the Pod start without its
// ElasticIP. uid may be empty (runtimes that do not pass K8S_POD_UID); when it is set
// and differs from the cached Pod's, the cached Pod is an older one of the same name.
// Return ErrPodUnknown when the Pod is not (yet) in the cache and ErrNotReady while the
// caches have not synced; the plugin retries both until its wait ends.
type Source interface {
	DirectInterfaces(namespace, pod string, uid types.UID) ([]Interface, error)
}

// Observer learns what the plugin plumbed and took down on this node, for example to
// write the direct route into the Pod's readiness or to program anti-spoofing on the
// host interface. Calls are best effort: the plugin never fails a Pod because the
// Observer failed, so the agent must also be able to rebuild this knowledge (the
// node's <EIP>/32 routes are the ground truth).
type Observer interface {
	Plumbed(ctx context.Context, p Plumbing) error
	Unplumbed(ctx context.Context, p Plumbing) error
}

// Errors a Source returns for conditions the plugin waits out.
var (
	// ErrPodUnknown: the Pod (with that UID) is not in the agent's cache.
	ErrPodUnknown = errors.New("pod not known to the node agent")
	// ErrNotReady: the agent's caches have not synced yet.
	ErrNotReady = errors.New("node agent not ready")
)
