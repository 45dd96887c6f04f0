package validation

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func claim(mutate ...func(*v1alpha1.AllocationClaim)) *v1alpha1.AllocationClaim {
	c := &v1alpha1.AllocationClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "10.225.51.5"},
		Spec: v1alpha1.AllocationClaimSpec{
			AddressPool: "pool-a",
			Address:     "10.225.51.5",
			Consumer:    v1alpha1.ConsumerReference{Kind: "ElasticIP", Namespace: "default", Name: "web", UID: "u-1"},
		},
	}
	for _, m := range mutate {
		m(c)
	}
	return c
}

func TestValidateAllocationClaim(t *testing.T) {
	tests := []struct {
		name  string
		claim *v1alpha1.AllocationClaim
		want  []wantErr
	}{
		{name: "valid", claim: claim()},
		{name: "cluster-scoped consumer", claim: claim(func(c *v1alpha1.AllocationClaim) { c.Spec.Consumer.Namespace = "" })},
		{name: "name differs from address", claim: claim(func(c *v1alpha1.AllocationClaim) { c.Name = "10.225.51.6" }),
			want: []wantErr{invalid("metadata.name")}},
		{name: "non-canonical address", claim: claim(func(c *v1alpha1.AllocationClaim) { c.Name, c.Spec.Address = "10.225.51.05", "10.225.51.05" }),
			want: []wantErr{invalid("spec.address")}},
		{name: "IPv6 address", claim: claim(func(c *v1alpha1.AllocationClaim) { c.Name, c.Spec.Address = "fd00--5", "fd00::5" })},
		{name: "IPv6 address named with colons", claim: claim(func(c *v1alpha1.AllocationClaim) { c.Name, c.Spec.Address = "fd00::5", "fd00::5" }),
			want: []wantErr{invalid("metadata.name")}},
		{name: "IPv6 address not canonical", claim: claim(func(c *v1alpha1.AllocationClaim) { c.Name, c.Spec.Address = "fd00-0--5", "fd00:0::5" }),
			want: []wantErr{invalid("spec.address")}},
		{name: "address missing", claim: claim(func(c *v1alpha1.AllocationClaim) { c.Spec.Address = "" }),
			want: []wantErr{required("spec.address")}},
		{name: "pool missing", claim: claim(func(c *v1alpha1.AllocationClaim) { c.Spec.AddressPool = "" }),
			want: []wantErr{required("spec.addressPool")}},
		{name: "pool name invalid", claim: claim(func(c *v1alpha1.AllocationClaim) { c.Spec.AddressPool = "Pool A" }),
			want: []wantErr{invalid("spec.addressPool")}},
		{name: "consumer incomplete", claim: claim(func(c *v1alpha1.AllocationClaim) { c.Spec.Consumer = v1alpha1.ConsumerReference{} }),
			want: []wantErr{required("spec.consumer.kind"), required("spec.consumer.name"), required("spec.consumer.uid")}},
		{name: "consumer namespace invalid", claim: claim(func(c *v1alpha1.AllocationClaim) { c.Spec.Consumer.Namespace = "my.ns" }),
			want: []wantErr{invalid("spec.consumer.namespace")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expectErrs(t, ValidateAllocationClaim(tt.claim), tt.want...)
		})
	}
	expectDetail(t, ValidateAllocationClaim(claim(func(c *v1alpha1.AllocationClaim) { c.Name = "x" })),
		"metadata.name", `"x"`, `must be "10.225.51.5" for spec.address "10.225.51.5"`)
	expectDetail(t, ValidateAllocationClaim(claim(func(c *v1alpha1.AllocationClaim) { c.Name, c.Spec.Address = "2001:db8::", "2001:db8::" })),
		"metadata.name", `must be "2001-db8--0" for spec.address "2001:db8::"`)
}

func TestValidateAllocationClaimUpdate(t *testing.T) {
	tests := []struct {
		name string
		new  *v1alpha1.AllocationClaim
		want []wantErr
	}{
		{name: "unchanged", new: claim(func(c *v1alpha1.AllocationClaim) { c.Labels = map[string]string{"x": "y"} })},
		{name: "pool changed", new: claim(func(c *v1alpha1.AllocationClaim) { c.Spec.AddressPool = "pool-b" }),
			want: []wantErr{invalid("spec.addressPool")}},
		{name: "address changed", new: claim(func(c *v1alpha1.AllocationClaim) { c.Spec.Address = "10.225.51.6" }),
			want: []wantErr{invalid("metadata.name"), invalid("spec.address")}},
		{name: "consumer changed", new: claim(func(c *v1alpha1.AllocationClaim) {
			c.Spec.Consumer = v1alpha1.ConsumerReference{Kind: "Pod", Name: "other", UID: "u-2"}
		}), want: []wantErr{invalid("spec.consumer.kind"), invalid("spec.consumer.namespace"), invalid("spec.consumer.name"), invalid("spec.consumer.uid")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expectErrs(t, ValidateAllocationClaimUpdate(tt.new, claim()), tt.want...)
		})
	}
	expectDetail(t, ValidateAllocationClaimUpdate(claim(func(c *v1alpha1.AllocationClaim) { c.Spec.Consumer.UID = "u-2" }), claim()),
		"spec.consumer.uid", `"u-2"`, `immutable`, `"u-1"`)
}

func TestValidateClaimInPool(t *testing.T) {
	p := pool("pool-a", "arp", "bad-entry", "10.225.51.0/29", "10.225.51.100-10.225.51.110")
	tests := []struct {
		name  string
		claim *v1alpha1.AllocationClaim
		pool  *v1alpha1.AddressPool
		want  []wantErr
	}{
		{name: "inside a CIDR", claim: claim(), pool: p},
		{name: "network address may be pinned", claim: claim(func(c *v1alpha1.AllocationClaim) { c.Spec.Address = "10.225.51.0" }), pool: p},
		{name: "inside a range", claim: claim(func(c *v1alpha1.AllocationClaim) { c.Spec.Address = "10.225.51.110" }), pool: p},
		{name: "outside", claim: claim(func(c *v1alpha1.AllocationClaim) { c.Spec.Address = "10.225.51.50" }), pool: p,
			want: []wantErr{invalid("spec.address")}},
		{name: "other pool", claim: claim(), pool: pool("pool-b", "arp", "10.225.51.0/24"),
			want: []wantErr{invalid("spec.addressPool")}},
		{name: "address unparsable", claim: claim(func(c *v1alpha1.AllocationClaim) { c.Spec.Address = "10.225.51" }), pool: p,
			want: []wantErr{invalid("spec.address")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expectErrs(t, ValidateClaimInPool(tt.claim, tt.pool), tt.want...)
		})
	}
	many := pool("pool-a", "arp", "10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6", "10.0.0.7")
	expectDetail(t, ValidateClaimInPool(claim(), many), "spec.address",
		`not inside AddressPool "pool-a"`, `"10.0.0.5" and 2 more`)
}
