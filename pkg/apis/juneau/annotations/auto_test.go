package annotations

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func TestParseAuto(t *testing.T) {
	const (
		with      = v1alpha1.AnnotationPodWithEIP
		name      = v1alpha1.AnnotationPodEIPName
		net       = v1alpha1.AnnotationEIPExternalNetwork
		bw        = v1alpha1.AnnotationEIPBandwidth
		rel       = v1alpha1.AnnotationReleaseStrategy
		aWith     = v1alpha1.AliasPodWithEIP
		aInstance = v1alpha1.AliasPodEIPInstance
		aBW       = v1alpha1.AliasEIPBandwidth
		aRel      = v1alpha1.AliasReleaseStrategy
		fams      = v1alpha1.AnnotationPodEIPIPFamilies
	)
	v4, v6 := v1alpha1.IPv4, v1alpha1.IPv6
	tests := []struct {
		name string
		ann  map[string]string
		want AutoEIP
		errs []wantErr
	}{
		{name: "nothing", ann: map[string]string{"app": "web"}},
		{name: "allocate", ann: map[string]string{with: "true"}, want: AutoEIP{Enabled: true}},
		{name: "explicitly off", ann: map[string]string{with: "false"}},
		{name: "allocate with everything", ann: map[string]string{with: "true", net: "ext-net", bw: "5", rel: "5m30s"},
			want: AutoEIP{Enabled: true, ExternalNetwork: "ext-net", BandwidthMbps: ptr.To[int32](5),
				Release: ReleaseStrategy{Kind: ReleaseAfter, After: 5*time.Minute + 30*time.Second, Set: true}}},
		{name: "alias allocate", ann: map[string]string{aWith: "true", aBW: "100000", aRel: "Never"},
			want: AutoEIP{Enabled: true, BandwidthMbps: ptr.To[int32](100000), Release: ReleaseStrategy{Kind: ReleaseNever, Set: true}}},
		{name: "key and alias agree", ann: map[string]string{with: "true", aWith: "true", bw: "7", aBW: "7"},
			want: AutoEIP{Enabled: true, BandwidthMbps: ptr.To[int32](7)}},
		{name: "existing ElasticIP", ann: map[string]string{name: "web-eip"}, want: AutoEIP{ElasticIPName: "web-eip"}},
		{name: "existing ElasticIP by alias", ann: map[string]string{aInstance: "eip-xxxxx66wjkj16lf9xxxxx"},
			want: AutoEIP{ElasticIPName: "eip-xxxxx66wjkj16lf9xxxxx"}},
		{name: "existing ElasticIP with pod-with-eip false", ann: map[string]string{with: "false", name: "web-eip"},
			want: AutoEIP{ElasticIPName: "web-eip"}},
		{name: "existing ElasticIP carries allocation settings", ann: map[string]string{aInstance: "web-eip", aRel: "Follow", aBW: "5"},
			want: AutoEIP{ElasticIPName: "web-eip", BandwidthMbps: ptr.To[int32](5), Release: ReleaseStrategy{Kind: ReleaseFollow, Set: true}}},
		{name: "lowest bandwidth", ann: map[string]string{with: "true", bw: "1"}, want: AutoEIP{Enabled: true, BandwidthMbps: ptr.To[int32](1)}},
		{name: "IPv6 only", ann: map[string]string{with: "true", fams: "IPv6"}, want: AutoEIP{Enabled: true, Families: []v1alpha1.IPFamily{v6}}},
		{name: "both families", ann: map[string]string{with: "true", fams: "IPv4,IPv6"}, want: AutoEIP{Enabled: true, Families: []v1alpha1.IPFamily{v4, v6}}},
		{name: "both families, IPv6 first and spaced", ann: map[string]string{with: "true", fams: "IPv6, IPv4"}, want: AutoEIP{Enabled: true, Families: []v1alpha1.IPFamily{v4, v6}}},

		{name: "pod-with-eip True", ann: map[string]string{with: "True"}, errs: []wantErr{notSupported(annPath(with))}},
		{name: "pod-with-eip yes by alias", ann: map[string]string{aWith: "yes"}, errs: []wantErr{notSupported(annPath(aWith))}},
		{name: "pod-with-eip key and alias differ", ann: map[string]string{with: "true", aWith: "false"},
			errs: []wantErr{invalid(annPath(aWith))}},
		{name: "allocate and existing", ann: map[string]string{with: "true", name: "web-eip"},
			errs: []wantErr{forbidden(annPath(name))}},
		{name: "allocate and existing by aliases", ann: map[string]string{aWith: "true", aInstance: "web-eip"},
			errs: []wantErr{forbidden(annPath(aInstance))}},
		{name: "name and alias differ", ann: map[string]string{name: "a", aInstance: "b"}, errs: []wantErr{invalid(annPath(aInstance))}},
		{name: "name with namespace", ann: map[string]string{name: "ns/web-eip"}, errs: []wantErr{invalid(annPath(name))}},
		{name: "name empty", ann: map[string]string{name: ""}, errs: []wantErr{required(annPath(name))}},
		{name: "network invalid", ann: map[string]string{with: "true", net: "Ext_Net"}, errs: []wantErr{invalid(annPath(net))}},
		{name: "network empty", ann: map[string]string{with: "true", net: ""}, errs: []wantErr{required(annPath(net))}},
		{name: "bandwidth zero", ann: map[string]string{with: "true", bw: "0"}, errs: []wantErr{invalid(annPath(bw))}},
		{name: "bandwidth too high", ann: map[string]string{with: "true", bw: "100001"}, errs: []wantErr{invalid(annPath(bw))}},
		{name: "bandwidth overflow", ann: map[string]string{with: "true", bw: "99999999999999999999"}, errs: []wantErr{invalid(annPath(bw))}},
		{name: "bandwidth fraction", ann: map[string]string{with: "true", bw: "5.5"}, errs: []wantErr{invalid(annPath(bw))}},
		{name: "bandwidth signed", ann: map[string]string{with: "true", bw: "+5"}, errs: []wantErr{invalid(annPath(bw))}},
		{name: "bandwidth with unit", ann: map[string]string{with: "true", bw: "5M"}, errs: []wantErr{invalid(annPath(bw))}},
		{name: "bandwidth empty", ann: map[string]string{with: "true", aBW: ""}, errs: []wantErr{invalid(annPath(aBW))}},
		{name: "bandwidth key and alias differ", ann: map[string]string{with: "true", bw: "5", aBW: "10"}, errs: []wantErr{invalid(annPath(aBW))}},
		{name: "release lower case", ann: map[string]string{with: "true", rel: "follow"}, errs: []wantErr{invalid(annPath(rel))}},
		{name: "release without unit", ann: map[string]string{with: "true", rel: "10"}, errs: []wantErr{invalid(annPath(rel))}},
		{name: "release zero", ann: map[string]string{with: "true", rel: "0s"}, errs: []wantErr{invalid(annPath(rel))}},
		{name: "release negative", ann: map[string]string{with: "true", aRel: "-5m"}, errs: []wantErr{invalid(annPath(aRel))}},
		{name: "release key and alias differ", ann: map[string]string{with: "true", rel: "Never", aRel: "Follow"}, errs: []wantErr{invalid(annPath(aRel))}},
		{name: "family lower case", ann: map[string]string{with: "true", fams: "ipv6"}, errs: []wantErr{invalid(annPath(fams))}},
		{name: "family twice", ann: map[string]string{with: "true", fams: "IPv4,IPv4"}, errs: []wantErr{invalid(annPath(fams))}},
		{name: "family empty", ann: map[string]string{with: "true", fams: ""}, errs: []wantErr{invalid(annPath(fams))}},
		{name: "errors collected", ann: map[string]string{with: "maybe", bw: "x", rel: "y", aRel: "z"},
			errs: []wantErr{invalid(annPath(aRel)), notSupported(annPath(with)), invalid(annPath(bw)), invalid(annPath(rel))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := ParseAuto(tt.ann)
			expectErrs(t, errs, tt.errs...)
			if len(tt.errs) == 0 && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseAuto = %+v, want %+v", got, tt.want)
			}
		})
	}

	_, errs := ParseAuto(map[string]string{with: "true", aWith: "false"})
	expectDetail(t, errs, annPath(aWith), with, aWith, `"true"`)
	_, errs = ParseAuto(map[string]string{aWith: "true", aInstance: "x"})
	expectDetail(t, errs, annPath(aInstance), aWith)
	_, errs = ParseAuto(map[string]string{with: "true", bw: "0"})
	expectDetail(t, errs, annPath(bw), "from 1 to 100000")
	_, errs = ParseAuto(map[string]string{with: "true", rel: "soon"})
	expectDetail(t, errs, annPath(rel), `"Follow"`, `"Never"`, "5m30s")
}

func TestEffectiveRelease(t *testing.T) {
	var plain AutoEIP
	if got := plain.EffectiveRelease(false); got != (ReleaseStrategy{Kind: ReleaseFollow}) {
		t.Errorf("plain Pod default = %+v, want Follow", got)
	}
	if got := plain.EffectiveRelease(true); got != (ReleaseStrategy{Kind: ReleaseAfter, After: 10 * time.Minute}) {
		t.Errorf("stateful default = %+v, want After 10m", got)
	}
	explicit := AutoEIP{Release: ReleaseStrategy{Kind: ReleaseNever, Set: true}}
	if got := explicit.EffectiveRelease(true); got != explicit.Release {
		t.Errorf("explicit strategy = %+v, want %+v", got, explicit.Release)
	}
	if (AutoEIP{}).Wanted() || !(AutoEIP{Enabled: true}).Wanted() || !(AutoEIP{ElasticIPName: "x"}).Wanted() {
		t.Error("Wanted() must be true exactly when pod-with-eip or pod-eip-name asks for an ElasticIP")
	}
}

func TestDefaultNetworks(t *testing.T) {
	net := func(name, isDefault string, deleting bool) *v1alpha1.ExternalNetwork {
		n := &v1alpha1.ExternalNetwork{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if isDefault != "" {
			n.Annotations = map[string]string{v1alpha1.AnnotationDefaultNetwork: isDefault}
		}
		if deleting {
			n.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
		}
		return n
	}
	got := DefaultNetworks([]*v1alpha1.ExternalNetwork{
		net("zeta", "true", false), net("plain", "", false), net("off", "false", false),
		net("going", "true", true), net("alpha", "true", false),
	})
	if want := []string{"alpha", "zeta"}; !reflect.DeepEqual(got, want) {
		t.Errorf("DefaultNetworks = %q, want %q", got, want)
	}
	if got := DefaultNetworks(nil); len(got) != 0 {
		t.Errorf("DefaultNetworks(nil) = %q", got)
	}
}
