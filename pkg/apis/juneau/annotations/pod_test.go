package annotations

import (
	"testing"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func TestValidatePod(t *testing.T) {
	const (
		eip      = v1alpha1.AnnotationElasticIP
		networks = v1alpha1.AnnotationNetworks
		with     = v1alpha1.AnnotationPodWithEIP
		name     = v1alpha1.AnnotationPodEIPName
		aWith    = v1alpha1.AliasPodWithEIP
		aName    = v1alpha1.AliasPodEIPInstance
	)
	tests := []struct {
		name string
		ann  map[string]string
		errs []wantErr
	}{
		{name: "none"},
		{name: "direct only", ann: map[string]string{eip: "web-eip", networks: `[{"interface":"ext0","elasticIP":"gw-eip"}]`}},
		{name: "automatic only", ann: map[string]string{with: "true"}},
		{name: "NAT on eth0, direct on an extra NIC", ann: map[string]string{with: "true", networks: `[{"interface":"ext0","elasticIP":"gw-eip"}]`}},
		{name: "NAT on eth0, extra NIC without ElasticIP", ann: map[string]string{name: "web-eip", networks: `[{"interface":"ext0"}]`}},
		{name: "direct eth0, automatic switched off", ann: map[string]string{eip: "web-eip", with: "false"}},
		{name: "direct and allocated on eth0", ann: map[string]string{eip: "web-eip", with: "true"},
			errs: []wantErr{forbidden(annPath(with))}},
		{name: "direct through networks and allocated by alias", ann: map[string]string{networks: `[{"interface":"eth0","elasticIP":"web-eip"}]`, aWith: "true"},
			errs: []wantErr{forbidden(annPath(aWith))}},
		{name: "direct and existing on eth0", ann: map[string]string{eip: "web-eip", name: "other-eip"},
			errs: []wantErr{forbidden(annPath(name))}},
		{name: "same ElasticIP by NAT and directly", ann: map[string]string{aName: "gw-eip", networks: `[{"interface":"ext0","elasticIP":"gw-eip"}]`},
			errs: []wantErr{invalid(annPath(aName))}},
		{name: "both parsers report", ann: map[string]string{eip: "a/b", with: "on"},
			errs: []wantErr{invalid(annPath(eip)), notSupported(annPath(with))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expectErrs(t, ValidatePod(tt.ann), tt.errs...)
		})
	}
	expectDetail(t, ValidatePod(map[string]string{eip: "web-eip", with: "true"}), annPath(with), `"web-eip"`, "either directly or by NAT")
	expectDetail(t, ValidatePod(map[string]string{name: "gw-eip", networks: `[{"interface":"ext0","elasticIP":"gw-eip"}]`}),
		annPath(name), `interface "ext0"`)
}

func TestHasJuneauAnnotations(t *testing.T) {
	tests := []struct {
		ann  map[string]string
		want bool
	}{
		{ann: nil, want: false},
		{ann: map[string]string{"app": "web", "kubectl.kubernetes.io/restartedAt": "now"}, want: false},
		{ann: map[string]string{"network.alibabacloud.com/allocated-eip-id": "x"}, want: false},
		{ann: map[string]string{"juneau.loutres.me.example.com/x": "y"}, want: false},
		{ann: map[string]string{v1alpha1.AnnotationElasticIP: "web-eip"}, want: true},
		{ann: map[string]string{v1alpha1.AnnotationAllocatedEIPName: "web"}, want: true},
		{ann: map[string]string{"juneau.loutres.me/typo": ""}, want: true},
		{ann: map[string]string{"app": "web", v1alpha1.AliasPodEIPInstance: "eip-1"}, want: true},
	}
	for _, tt := range tests {
		if got := HasJuneauAnnotations(tt.ann); got != tt.want {
			t.Errorf("HasJuneauAnnotations(%v) = %v, want %v", tt.ann, got, tt.want)
		}
	}
	for _, k := range CompatibilityKeys() {
		if !HasJuneauAnnotations(map[string]string{k: "x"}) {
			t.Errorf("alias %s is not recognised", k)
		}
	}
}
