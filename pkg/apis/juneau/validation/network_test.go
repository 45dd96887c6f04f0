package validation

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func network(typ v1alpha1.AdvertiseMode, pools ...string) *v1alpha1.ExternalNetwork {
	return &v1alpha1.ExternalNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: "ext-net"},
		Spec:       v1alpha1.ExternalNetworkSpec{Type: typ, AddressPools: pools},
	}
}

func withNamespaceSelector(n *v1alpha1.ExternalNetwork, sel *metav1.LabelSelector) *v1alpha1.ExternalNetwork {
	n.Spec.NamespaceSelector = sel
	return n
}

func TestValidateExternalNetwork(t *testing.T) {
	tests := []struct {
		name string
		net  *v1alpha1.ExternalNetwork
		want []wantErr
	}{
		{name: "valid", net: network("arp", "pool-a", "pool.b")},
		{name: "type missing", net: network("", "pool-a"), want: []wantErr{required("spec.type")}},
		{name: "type unknown", net: network("l2", "pool-a"), want: []wantErr{notSupported("spec.type")}},
		{name: "no pools", net: network("arp"), want: []wantErr{required("spec.addressPools")}},
		{name: "bad pool name", net: network("arp", "pool-a", "Pool_B"), want: []wantErr{invalid("spec.addressPools[1]")}},
		{name: "empty pool name", net: network("arp", ""), want: []wantErr{required("spec.addressPools[0]")}},
		{name: "too long pool name", net: network("arp", strings.Repeat("a", 254)), want: []wantErr{invalid("spec.addressPools[0]")}},
		{name: "duplicate pool", net: network("bgp", "pool-a", "pool-b", "pool-a"), want: []wantErr{duplicated("spec.addressPools[2]")}},
		{name: "namespace selector", net: withNamespaceSelector(network("arp", "pool-a"), &metav1.LabelSelector{
			MatchLabels:      map[string]string{"tenant": "a"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"prod"}}}})},
		{name: "empty namespace selector", net: withNamespaceSelector(network("arp", "pool-a"), &metav1.LabelSelector{})},
		{name: "namespace selector operator unknown", net: withNamespaceSelector(network("arp", "pool-a"), &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tenant", Operator: "Near", Values: []string{"a"}}}}),
			want: []wantErr{invalid("spec.namespaceSelector.matchExpressions[0].operator")}},
		{name: "namespace selector In without values", net: withNamespaceSelector(network("arp", "pool-a"), &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tenant", Operator: metav1.LabelSelectorOpIn}}}),
			want: []wantErr{required("spec.namespaceSelector.matchExpressions[0].values")}},
		{name: "namespace selector label value", net: withNamespaceSelector(network("arp", "pool-a"), &metav1.LabelSelector{
			MatchLabels: map[string]string{"tenant": "a b"}}),
			want: []wantErr{invalid("spec.namespaceSelector.matchLabels")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expectErrs(t, ValidateExternalNetwork(tt.net), tt.want...)
		})
	}
	expectDetail(t, ValidateExternalNetwork(network("arp", "Pool_B")), "spec.addressPools[0]", `"Pool_B"`, "AddressPool name")
}

func TestValidateExternalNetworkUpdate(t *testing.T) {
	old := network("arp", "pool-a", "pool-b")
	tests := []struct {
		name string
		new  *v1alpha1.ExternalNetwork
		want []wantErr
	}{
		{name: "unchanged", new: network("arp", "pool-a", "pool-b")},
		{name: "append", new: network("arp", "pool-a", "pool-b", "pool-c")},
		{name: "type changed", new: network("bgp", "pool-a", "pool-b"), want: []wantErr{invalid("spec.type")}},
		{name: "removed", new: network("arp", "pool-a"), want: []wantErr{forbidden("spec.addressPools")}},
		{name: "reordered", new: network("arp", "pool-b", "pool-a"), want: []wantErr{invalid("spec.addressPools[0]")}},
		{name: "all removed", new: network("arp"), want: []wantErr{required("spec.addressPools"), forbidden("spec.addressPools")}},
		{name: "namespace selector added", new: withNamespaceSelector(network("arp", "pool-a", "pool-b"), &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "a"}})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expectErrs(t, ValidateExternalNetworkUpdate(tt.new, old), tt.want...)
		})
	}
	expectDetail(t, ValidateExternalNetworkUpdate(network("arp"), old), "spec.addressPools", `missing: "pool-a", "pool-b"`)
}
