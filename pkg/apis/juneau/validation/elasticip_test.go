package validation

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func eip(mutate ...func(*v1alpha1.ElasticIP)) *v1alpha1.ElasticIP {
	e := &v1alpha1.ElasticIP{
		ObjectMeta: metav1.ObjectMeta{Name: "web-eip", Namespace: "default"},
		Spec:       v1alpha1.ElasticIPSpec{ExternalNetwork: "ext-net"},
	}
	for _, m := range mutate {
		m(e)
	}
	return e
}

func TestValidateElasticIP(t *testing.T) {
	longNS := strings.Repeat("n", 63)
	tests := []struct {
		name string
		eip  *v1alpha1.ElasticIP
		want []wantErr
	}{
		{name: "minimal", eip: eip()},
		{name: "everything set", eip: eip(func(e *v1alpha1.ElasticIP) {
			e.Spec.RequestedIP, e.Spec.BandwidthMbps = "10.225.51.5", ptr.To[int32](100)
		})},
		{name: "network missing", eip: eip(func(e *v1alpha1.ElasticIP) { e.Spec.ExternalNetwork = "" }),
			want: []wantErr{required("spec.externalNetwork")}},
		{name: "network name invalid", eip: eip(func(e *v1alpha1.ElasticIP) { e.Spec.ExternalNetwork = "Ext_Net" }),
			want: []wantErr{invalid("spec.externalNetwork")}},
		{name: "requestedIP with leading zero", eip: eip(func(e *v1alpha1.ElasticIP) { e.Spec.RequestedIP = "10.225.51.05" }),
			want: []wantErr{invalid("spec.requestedIP")}},
		{name: "requestedIP IPv6 for an IPv4 ElasticIP", eip: eip(func(e *v1alpha1.ElasticIP) { e.Spec.RequestedIP = "fd00::5" }),
			want: []wantErr{invalid("spec.requestedIP")}},
		{name: "IPv6", eip: eip(func(e *v1alpha1.ElasticIP) { e.Spec.IPFamily = v1alpha1.IPv6 })},
		{name: "IPv4 written out", eip: eip(func(e *v1alpha1.ElasticIP) { e.Spec.IPFamily = v1alpha1.IPv4 })},
		{name: "requestedIP IPv6", eip: eip(func(e *v1alpha1.ElasticIP) {
			e.Spec.IPFamily, e.Spec.RequestedIP = v1alpha1.IPv6, "fd00:225:51::5"
		})},
		{name: "requestedIP IPv4 for an IPv6 ElasticIP", eip: eip(func(e *v1alpha1.ElasticIP) {
			e.Spec.IPFamily, e.Spec.RequestedIP = v1alpha1.IPv6, "10.225.51.5"
		}), want: []wantErr{invalid("spec.requestedIP")}},
		{name: "requestedIP IPv6 not canonical", eip: eip(func(e *v1alpha1.ElasticIP) {
			e.Spec.IPFamily, e.Spec.RequestedIP = v1alpha1.IPv6, "fd00:225:51:0::5"
		}), want: []wantErr{invalid("spec.requestedIP")}},
		{name: "ipFamily unknown", eip: eip(func(e *v1alpha1.ElasticIP) { e.Spec.IPFamily = "ipv6" }),
			want: []wantErr{notSupported("spec.ipFamily")}},
		{name: "requestedIP CIDR", eip: eip(func(e *v1alpha1.ElasticIP) { e.Spec.RequestedIP = "10.225.51.5/32" }),
			want: []wantErr{invalid("spec.requestedIP")}},
		{name: "bandwidth lowest", eip: eip(func(e *v1alpha1.ElasticIP) { e.Spec.BandwidthMbps = ptr.To[int32](1) })},
		{name: "bandwidth highest", eip: eip(func(e *v1alpha1.ElasticIP) { e.Spec.BandwidthMbps = ptr.To[int32](100000) })},
		{name: "bandwidth zero", eip: eip(func(e *v1alpha1.ElasticIP) { e.Spec.BandwidthMbps = ptr.To[int32](0) }),
			want: []wantErr{invalid("spec.bandwidthMbps")}},
		{name: "bandwidth negative", eip: eip(func(e *v1alpha1.ElasticIP) { e.Spec.BandwidthMbps = ptr.To[int32](-5) }),
			want: []wantErr{invalid("spec.bandwidthMbps")}},
		{name: "bandwidth too high", eip: eip(func(e *v1alpha1.ElasticIP) { e.Spec.BandwidthMbps = ptr.To[int32](100001) }),
			want: []wantErr{invalid("spec.bandwidthMbps")}},
		// The advertisement of a long name takes a hashed name (docs/reference.md#arp-advertisement).
		{name: "longest name in the longest namespace", eip: eip(func(e *v1alpha1.ElasticIP) {
			e.Namespace, e.Name = longNS, strings.Repeat("e", 253)
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expectErrs(t, ValidateElasticIP(tt.eip), tt.want...)
		})
	}
	expectDetail(t, ValidateElasticIP(eip(func(e *v1alpha1.ElasticIP) { e.Spec.BandwidthMbps = ptr.To[int32](0) })),
		"spec.bandwidthMbps", "from 1 to 100000")
	expectDetail(t, ValidateElasticIP(eip(func(e *v1alpha1.ElasticIP) { e.Spec.RequestedIP = "fd00::5" })),
		"spec.requestedIP", "is an IPv6 address but spec.ipFamily is IPv4")
	expectDetail(t, ValidateElasticIP(eip(func(e *v1alpha1.ElasticIP) {
		e.Spec.IPFamily, e.Spec.RequestedIP = v1alpha1.IPv6, "fd00:225:51:0::5"
	})), "spec.requestedIP", `canonical form "fd00:225:51::5"`)
}

func TestValidateElasticIPUpdate(t *testing.T) {
	old := eip(func(e *v1alpha1.ElasticIP) {
		e.Spec.RequestedIP, e.Spec.BandwidthMbps = "10.225.51.5", ptr.To[int32](10)
	})
	tests := []struct {
		name string
		new  *v1alpha1.ElasticIP
		want []wantErr
	}{
		{name: "bandwidth changed", new: eip(func(e *v1alpha1.ElasticIP) {
			e.Spec.RequestedIP, e.Spec.BandwidthMbps = "10.225.51.5", ptr.To[int32](20)
		})},
		{name: "bandwidth removed", new: eip(func(e *v1alpha1.ElasticIP) { e.Spec.RequestedIP = "10.225.51.5" })},
		{name: "network changed", new: eip(func(e *v1alpha1.ElasticIP) { e.Spec.ExternalNetwork, e.Spec.RequestedIP = "other", "10.225.51.5" }),
			want: []wantErr{invalid("spec.externalNetwork")}},
		{name: "requestedIP changed", new: eip(func(e *v1alpha1.ElasticIP) { e.Spec.RequestedIP = "10.225.51.6" }),
			want: []wantErr{invalid("spec.requestedIP")}},
		{name: "requestedIP removed", new: eip(), want: []wantErr{invalid("spec.requestedIP")}},
		{name: "ipFamily IPv4 written out", new: eip(func(e *v1alpha1.ElasticIP) {
			e.Spec.IPFamily, e.Spec.RequestedIP, e.Spec.BandwidthMbps = v1alpha1.IPv4, "10.225.51.5", ptr.To[int32](10)
		})},
		{name: "ipFamily changed", new: eip(func(e *v1alpha1.ElasticIP) {
			e.Spec.IPFamily, e.Spec.RequestedIP, e.Spec.BandwidthMbps = v1alpha1.IPv6, "10.225.51.5", ptr.To[int32](10)
		}), want: []wantErr{invalid("spec.requestedIP"), invalid("spec.ipFamily")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expectErrs(t, ValidateElasticIPUpdate(tt.new, old), tt.want...)
		})
	}
	set := eip(func(e *v1alpha1.ElasticIP) { e.Spec.RequestedIP = "10.225.51.9" })
	errs := ValidateElasticIPUpdate(set, eip())
	expectErrs(t, errs, invalid("spec.requestedIP"))
	expectDetail(t, errs, "spec.requestedIP", "unset")
}

func attachment(eipName, nic string) *v1alpha1.ElasticIPAttachment {
	return &v1alpha1.ElasticIPAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "att", Namespace: "default"},
		Spec: v1alpha1.ElasticIPAttachmentSpec{
			ElasticIPRef: v1alpha1.ElasticIPReference{Name: eipName},
			TargetRef:    v1alpha1.AttachmentTarget{NetworkInterfaceName: nic},
		},
	}
}

func TestValidateElasticIPAttachment(t *testing.T) {
	tests := []struct {
		name string
		att  *v1alpha1.ElasticIPAttachment
		want []wantErr
	}{
		{name: "valid", att: attachment("nginx-eip", "nginx.eth0")},
		{name: "Pod name with dots", att: attachment("nginx-eip", "web.v2.ext0")},
		{name: "missing both", att: attachment("", ""),
			want: []wantErr{required("spec.elasticIPRef.name"), required("spec.targetRef.networkInterfaceName")}},
		{name: "namespaced ElasticIP", att: attachment("other/nginx-eip", "nginx.eth0"),
			want: []wantErr{invalid("spec.elasticIPRef.name")}},
		{name: "ElasticIP name invalid", att: attachment("Nginx_EIP", "nginx.eth0"),
			want: []wantErr{invalid("spec.elasticIPRef.name")}},
		{name: "NIC is a Pod name", att: attachment("nginx-eip", "nginx"),
			want: []wantErr{invalid("spec.targetRef.networkInterfaceName")}},
		{name: "NIC interface too long", att: attachment("nginx-eip", "nginx.interface-name-16"),
			want: []wantErr{invalid("spec.targetRef.networkInterfaceName")}},
		{name: "NIC namespaced", att: attachment("nginx-eip", "ns/nginx.eth0"),
			want: []wantErr{invalid("spec.targetRef.networkInterfaceName")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expectErrs(t, ValidateElasticIPAttachment(tt.att), tt.want...)
		})
	}
	expectDetail(t, ValidateElasticIPAttachment(attachment("nginx-eip", "nginx")), "spec.targetRef.networkInterfaceName", "<pod>.<interface>")
	expectDetail(t, ValidateElasticIPAttachment(attachment("other/nginx-eip", "nginx.eth0")), "spec.elasticIPRef.name", "same namespace")
}

func TestValidateElasticIPAttachmentUpdate(t *testing.T) {
	old := attachment("nginx-eip", "nginx.eth0")
	expectErrs(t, ValidateElasticIPAttachmentUpdate(attachment("nginx-eip", "nginx.eth0"), old))
	expectErrs(t, ValidateElasticIPAttachmentUpdate(attachment("other-eip", "nginx.eth0"), old), invalid("spec.elasticIPRef.name"))
	expectErrs(t, ValidateElasticIPAttachmentUpdate(attachment("nginx-eip", "web.eth0"), old), invalid("spec.targetRef.networkInterfaceName"))
}
