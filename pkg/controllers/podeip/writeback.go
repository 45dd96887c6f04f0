package podeip

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/annotations"
	"github.com/loutres/juneau/pkg/apis/juneau/podaddr"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/status"
)

// planAnnotations writes back what the Pod holds, and only that (docs/automatic.md#annotations):
// for each ElasticIP it holds, its name and address under the keys of its family
// (annotations.WrittenBackKeys); for a Pod that asked with the managed-cloud keys also
// that service's names of its IPv4 ElasticIP, the NetworkInterface's name included.
// Whatever the Pod does not hold is removed: the ElasticIP it names that another Pod
// uses, one released, deleted or moved on, and everything once it finished or stops
// asking. A terminating Pod keeps what it has until it is gone (it still holds its
// addresses then), and so does one whose annotations cannot be read. Whoever else
// carries an address the controller writes loses it first (addressBook), so no two Pods
// carry one address. A write-back that only adds to the Pod's annotations waits while
// the kubelet sets up a gated Pod (gateFirst); one that removes or changes what the Pod
// carries never waits.
func (p *plan) planAnnotations(in inputs) {
	if in.Pod == nil || in.State == podHolding {
		return
	}
	have := in.Pod.Annotations
	want := map[string]string{}
	for _, sp := range p.Slots {
		if !sp.Held {
			continue
		}
		eip := sp.Usable
		family := eip.Spec.Family()
		nameKey, addrKey := annotations.WrittenBackKeys(family)
		want[nameKey], want[addrKey] = eip.Name, eip.Status.Address
		if family == v1alpha1.IPv4 && annotations.UsesManagedCloudKeys(have) {
			want[v1alpha1.AliasAllocatedEIPID] = eip.Name
			want[v1alpha1.AliasAllocatedEIPAddress] = eip.Status.Address
			want[v1alpha1.AliasAllocatedENIID] = v1alpha1.NetworkInterfaceName(in.Name, v1alpha1.DefaultInterface)
		}
	}
	stale := false
	for _, k := range annotations.WrittenBack() {
		v, wanted := want[k]
		if got, ok := have[k]; ok != wanted || got != v {
			stale = true
		}
	}
	if !stale || (onlyAdds(have, want) && gateFirst(in.Pod)) {
		return
	}
	p.Annotations = map[string]*string{}
	for _, k := range annotations.WrittenBack() {
		if v, ok := want[k]; ok {
			p.Annotations[k] = &v
		} else {
			p.Annotations[k] = nil
		}
	}
}

// writtenAddresses are the addresses a write-back patch sets (one per family).
func writtenAddresses(patch map[string]*string) []string {
	var out []string
	for _, f := range []v1alpha1.IPFamily{v1alpha1.IPv4, v1alpha1.IPv6} {
		if _, addrKey := annotations.WrittenBackKeys(f); patch[addrKey] != nil {
			out = append(out, *patch[addrKey])
		}
	}
	return out
}

// onlyAdds says every written-back key the Pod carries stays as it is.
func onlyAdds(have, want map[string]string) bool {
	return !slices.ContainsFunc(annotations.WrittenBack(), func(k string) bool {
		got, had := have[k]
		v, wanted := want[k]
		return had && (!wanted || got != v)
	})
}

// gateFirst says the write-back waits for the Pod's readiness gate: the Pod lists juneau's
// gate, which is not True yet, and the kubelet has not reported its IPs, so it is still
// setting up the Pod's sandbox and containers. An annotation written then reaches the
// kubelet as an update of the Pod, which it keeps for its next look at the Pod, the one
// after the containers start; that look then works from this copy of the Pod, without
// the gate the node agent sets True meanwhile, and reports the Pod not Ready, and the
// Pod is Ready only at the kubelet's look after that, a second later
// (docs/automatic.md#what-the-controller-does). Written once the gate is True, the
// annotations bring the kubelet the Pod with it; once the kubelet reported the IPs they
// cost nothing (a Pod whose gate stays False, such as on a bgp network without an
// Established peer, gets them then).
func gateFirst(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || len(podaddr.OfPod(pod)) > 0 {
		return false
	}
	return slices.ContainsFunc(v1alpha1.GateTypesOf(pod), func(t string) bool {
		c := status.PodCondition(pod, t)
		return c == nil || c.Status != corev1.ConditionTrue
	})
}
