package admission

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/apis/juneau/validation"
)

// networkInterfaceRules: the spec rules only. A NIC naming an ElasticIP that another
// NIC holds is accepted on purpose: the Pod that lost a race waits Pending
// (WaitingForElasticIP) and takes the address over when the holder goes away.
func (v *Validators) networkInterfaceRules() rules[*v1alpha1.NetworkInterface] {
	return rules[*v1alpha1.NetworkInterface]{
		create: func(_ context.Context, n *v1alpha1.NetworkInterface) (field.ErrorList, error) {
			return validation.ValidateNetworkInterface(n), nil
		},
		update: func(_ context.Context, n, old *v1alpha1.NetworkInterface) (field.ErrorList, error) {
			return validation.ValidateNetworkInterfaceUpdate(n, old), nil
		},
		unchanged: func(n, old *v1alpha1.NetworkInterface) bool { return equality.Semantic.DeepEqual(n.Spec, old.Spec) },
	}
}
