package network

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/messages"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/apis/juneau/validation"
)

// networkStatus computes an ExternalNetwork's status. pools holds the AddressPools that
// exist, by name; networks is every ExternalNetwork, to find pools claimed twice.
//
// Ready is False with MissingDependency when a named pool does not exist, else with
// InvalidAddressPool when a pool's advertiseMode differs from spec.type or the pool
// belongs to another ExternalNetwork (validation.PoolsOfNetwork decides which pools a
// network may use). The message names every problem. The Ready condition carries no
// lastTransitionTime.
func networkStatus(net *v1alpha1.ExternalNetwork, pools map[string]*v1alpha1.AddressPool, networks []*v1alpha1.ExternalNetwork) v1alpha1.ExternalNetworkStatus {
	verdict := validation.PoolsOfNetwork(net, func(name string) *v1alpha1.AddressPool { return pools[name] }, networks)
	var wrongMode, taken []string
	for _, p := range verdict.WrongMode {
		wrongMode = append(wrongMode, fmt.Sprintf("AddressPool %q advertises by %s, not %s", p.Name, p.Spec.AdvertiseMode, net.Spec.Type))
	}
	for _, tp := range verdict.Taken {
		taken = append(taken, fmt.Sprintf("AddressPool %q already belongs to ExternalNetwork %q", tp.Pool, tp.Owner))
	}
	slices.Sort(wrongMode)
	slices.Sort(taken)
	var problems []string
	if missing := verdict.Missing; len(missing) > 0 {
		problems = append(problems, messages.Kinds("AddressPool", missing)+" "+messages.Verb(messages.Count(missing), "does", "do")+" not exist")
	}
	problems = append(problems, wrongMode...)
	problems = append(problems, taken...)

	switch {
	case len(verdict.Missing) > 0:
		return withReady(net, metav1.ConditionFalse, v1alpha1.ReasonMissingDependency, strings.Join(problems, "; "))
	case len(problems) > 0:
		return withReady(net, metav1.ConditionFalse, v1alpha1.ReasonInvalidAddressPool, strings.Join(problems, "; "))
	}
	names := slices.Clone(net.Spec.AddressPools)
	slices.Sort(names)
	return withReady(net, metav1.ConditionTrue, v1alpha1.ReasonPoolsReady,
		fmt.Sprintf("every AddressPool exists and advertises by %s: %s", net.Spec.Type, messages.Names(names)))
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
