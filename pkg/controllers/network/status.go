package network

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/controllers/conditions"
)

// networkStatus computes an ExternalNetwork's status. pools holds the AddressPools that
// exist, by name; networks is every ExternalNetwork, to find pools claimed twice.
//
// Ready is False with MissingDependency when a named pool does not exist, else with
// InvalidAddressPool when a pool's advertiseMode differs from spec.type or the pool
// already belongs to an older ExternalNetwork (SPEC §2.2: a pool belongs to at most one
// network; the webhook refuses the second, and should one slip through, the older
// network keeps the pool). The message names every problem. The Ready condition carries
// no lastTransitionTime.
func networkStatus(net *v1alpha1.ExternalNetwork, pools map[string]*v1alpha1.AddressPool, networks []*v1alpha1.ExternalNetwork) v1alpha1.ExternalNetworkStatus {
	var missing, wrongMode, taken []string
	for _, name := range net.Spec.AddressPools {
		p, ok := pools[name]
		switch {
		case !ok:
			missing = append(missing, name)
		case p.Spec.AdvertiseMode != net.Spec.Type:
			wrongMode = append(wrongMode, fmt.Sprintf("AddressPool %q advertises by %s, not %s", name, p.Spec.AdvertiseMode, net.Spec.Type))
		}
		if owner := firstOwner(name, networks); owner != nil && owner.Name != net.Name {
			taken = append(taken, fmt.Sprintf("AddressPool %q already belongs to ExternalNetwork %q", name, owner.Name))
		}
	}
	slices.Sort(missing)
	slices.Sort(wrongMode)
	slices.Sort(taken)
	var problems []string
	if len(missing) > 0 {
		problems = append(problems, kindList("AddressPool", missing)+" "+verb(missing, "does", "do")+" not exist")
	}
	problems = append(problems, wrongMode...)
	problems = append(problems, taken...)

	switch {
	case len(missing) > 0:
		return withReady(net, metav1.ConditionFalse, v1alpha1.ReasonMissingDependency, strings.Join(problems, "; "))
	case len(problems) > 0:
		return withReady(net, metav1.ConditionFalse, v1alpha1.ReasonInvalidAddressPool, strings.Join(problems, "; "))
	}
	names := slices.Clone(net.Spec.AddressPools)
	slices.Sort(names)
	return withReady(net, metav1.ConditionTrue, v1alpha1.ReasonPoolsReady,
		fmt.Sprintf("every AddressPool exists and advertises by %s: %s", net.Spec.Type, quoted(names)))
}

// firstOwner is the oldest ExternalNetwork (ties broken by name) naming the pool.
func firstOwner(pool string, networks []*v1alpha1.ExternalNetwork) *v1alpha1.ExternalNetwork {
	var owner *v1alpha1.ExternalNetwork
	for _, n := range networks {
		if !slices.Contains(n.Spec.AddressPools, pool) {
			continue
		}
		if owner == nil || cmp.Or(n.CreationTimestamp.Compare(owner.CreationTimestamp.Time), strings.Compare(n.Name, owner.Name)) < 0 {
			owner = n
		}
	}
	return owner
}

// kindList is `Kind "a"` or `Kinds "a", "b"` for sorted names.
func kindList(kind string, names []string) string {
	if len(names) == 1 {
		return kind + " " + quoted(names)
	}
	return kind + "s " + quoted(names)
}

func quoted(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

func verb(names []string, one, many string) string {
	if len(names) == 1 {
		return one
	}
	return many
}

func withReady(net *v1alpha1.ExternalNetwork, status metav1.ConditionStatus, reason, message string) v1alpha1.ExternalNetworkStatus {
	return v1alpha1.ExternalNetworkStatus{Conditions: []metav1.Condition{{
		Type:               v1alpha1.ConditionReady,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: net.Generation,
	}}}
}

// mergeStatus lays the computed status over the recorded one: conditions this controller
// does not own are kept, and lastTransitionTime only moves when a condition flips.
func mergeStatus(old, computed v1alpha1.ExternalNetworkStatus, now metav1.Time) v1alpha1.ExternalNetworkStatus {
	out := computed
	out.Conditions = conditions.Merge(old.Conditions, computed.Conditions, now)
	return out
}
