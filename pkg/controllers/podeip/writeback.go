package podeip

import (
	"github.com/loutres/juneau/pkg/apis/juneau/annotations"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
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
// carry one address.
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
	if !stale {
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
