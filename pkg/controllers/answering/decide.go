package answering

import (
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// Heartbeat is what a Node's Lease says of its agent at a moment.
type Heartbeat struct {
	// Alive: the Lease was renewed less than its duration ago.
	Alive bool
	// Expires is when an alive Lease runs out unless renewed.
	Expires time.Time
	// Why says, when not alive, what the Lease shows.
	Why string
}

// Judge reads a Node's heartbeat Lease (nil when there is none) at now.
func Judge(lease *coordinationv1.Lease, namespace, node string, now time.Time) Heartbeat {
	name := namespace + "/" + v1alpha1.NodeLeasePrefix + node
	if lease == nil {
		return Heartbeat{Why: fmt.Sprintf("the node agent of Node %q has no heartbeat Lease %q", node, name)}
	}
	renewed := lease.Spec.RenewTime
	if renewed == nil {
		renewed = lease.Spec.AcquireTime
	}
	if renewed == nil || lease.Spec.LeaseDurationSeconds == nil {
		return Heartbeat{Why: fmt.Sprintf("the node agent of Node %q never renewed its heartbeat Lease %q", node, name)}
	}
	expires := renewed.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
	if now.Before(expires) {
		return Heartbeat{Alive: true, Expires: expires}
	}
	return Heartbeat{Expires: expires, Why: fmt.Sprintf("the node agent of Node %q has not renewed its heartbeat Lease %q since %s",
		node, name, renewed.UTC().Format(time.RFC3339))}
}

// Unknown is the Answering condition an advertisement gets when its Node's agent is not
// reporting, or nil when it needs none: the agent is alive, or the condition does not
// claim an answer (absent, False or already Unknown).
func Unknown(ad *v1alpha1.ARPAdvertisement, hb Heartbeat) *metav1.Condition {
	if hb.Alive {
		return nil
	}
	for _, c := range ad.Status.Conditions {
		if c.Type == v1alpha1.ConditionAnswering && c.Status == metav1.ConditionTrue {
			return &metav1.Condition{
				Type: v1alpha1.ConditionAnswering, Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonAgentNotReporting,
				Message:            hb.Why + "; whether it still answers ARP is unknown",
				ObservedGeneration: ad.Generation,
			}
		}
	}
	return nil
}
