package cni

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/node/cniserver"
)

// pollInterval is how often ADD asks the agent again while it waits.
const pollInterval = 200 * time.Millisecond

// askTimeout bounds one question to the agent, so a hung agent cannot eat the wait.
const askTimeout = 2 * time.Second

// agent is what ADD needs from the node agent (cniserver.Client).
type agent interface {
	Interfaces(ctx context.Context, namespace, pod string, uid types.UID) ([]cniserver.Interface, error)
}

var _ agent = (*cniserver.Client)(nil)

// notHeldError says which direct NICs did not hold their ElasticIPs when the wait ended.
type notHeldError struct {
	pod podRef
	// within is the configured bound of the wait (waitSeconds), not the time measured:
	// the message stays the same from one attempt to the next, as the docs quote it.
	within  time.Duration
	pending []cniserver.Interface
}

// Error names, per NIC, whom it waits for (the agent's message names the holder), e.g.
// `Pod "default/web-2" did not get its ElasticIPs within 10s: eth0: NetworkInterface
// "web-2.eth0" does not hold ElasticIP "web-eip": ElasticIP "web-eip" is used by
// NetworkInterface "web.eth0"`.
func (e *notHeldError) Error() string {
	parts := make([]string, 0, len(e.pending))
	for _, n := range e.pending {
		msg := n.Waiting
		if msg == "" {
			msg = cniserver.NotHeldMessage(v1alpha1.NetworkInterfaceName(e.pod.Name, n.Interface), n.ElasticIP, "")
		}
		parts = append(parts, n.Interface+": "+msg)
	}
	return fmt.Sprintf("Pod %q did not get its ElasticIPs within %s: %s", e.pod.String(), e.within, strings.Join(parts, "; "))
}

// agentError says the agent could not tell the Pod's direct NICs: within the wait
// (within, its configured bound), or at once (within 0: an error no retry mends, or the
// runtime gave up).
type agentError struct {
	pod    podRef
	within time.Duration
	err    error
}

func (e *agentError) Error() string {
	if e.within > 0 {
		return fmt.Sprintf("Pod %q: the node agent could not tell its direct NICs within %s: %v", e.pod.String(), e.within, e.err)
	}
	return fmt.Sprintf("Pod %q: the node agent could not tell its direct NICs: %v", e.pod.String(), e.err)
}

func (e *agentError) Unwrap() error { return e.err }

// waitForInterfaces asks the agent for the Pod's direct NICs until every one holds its
// ElasticIP (or there are none), retrying agent errors that may go away, for at most
// wait. It returns the NICs sorted by interface name.
func waitForInterfaces(ctx context.Context, a agent, pod podRef, wait time.Duration) ([]cniserver.Interface, error) {
	logger := klog.FromContext(ctx)
	deadline := time.Now().Add(wait)
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, min(askTimeout, max(time.Until(deadline), pollInterval)))
		nics, err := a.Interfaces(actx, pod.Namespace, pod.Name, pod.UID)
		cancel()
		var pending []cniserver.Interface
		if err == nil {
			pending = notHolding(nics)
			if len(pending) == 0 {
				sortByInterface(nics)
				return nics, nil
			}
			logger.V(2).Info("Waiting for direct NICs to hold their ElasticIPs", "attempt", attempt, "pending", len(pending))
		} else {
			logger.V(2).Info("Asking the node agent failed", "attempt", attempt, "err", err)
			if !cniserver.IsRetryable(err) {
				return nil, &agentError{pod: pod, err: err}
			}
		}
		if !time.Now().Add(pollInterval).Before(deadline) {
			if err != nil {
				return nil, &agentError{pod: pod, within: wait, err: err}
			}
			return nil, &notHeldError{pod: pod, within: wait, pending: pending}
		}
		select {
		case <-ctx.Done():
			return nil, &agentError{pod: pod, err: ctx.Err()}
		case <-time.After(pollInterval):
		}
	}
}

func notHolding(nics []cniserver.Interface) []cniserver.Interface {
	var out []cniserver.Interface
	for _, n := range nics {
		if !n.Holds {
			out = append(out, n)
		}
	}
	sortByInterface(out)
	return out
}

func sortByInterface(nics []cniserver.Interface) {
	sort.Slice(nics, func(i, j int) bool { return nics[i].Interface < nics[j].Interface })
}
