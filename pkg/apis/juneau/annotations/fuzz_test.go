package annotations

import (
	"reflect"
	"strings"
	"testing"

	utilvalidation "k8s.io/apimachinery/pkg/util/validation"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/apis/juneau/validation"
)

// fuzzKeys are the annotations FuzzParse sets; bit i of the mask sets fuzzKeys[i].
var fuzzKeys = [...]string{
	v1alpha1.AnnotationElasticIP,
	v1alpha1.AnnotationNetworks,
	v1alpha1.AnnotationPodWithEIP,
	v1alpha1.AliasPodWithEIP,
	v1alpha1.AnnotationPodEIPName,
	v1alpha1.AliasPodEIPInstance,
	v1alpha1.AnnotationEIPBandwidth,
	v1alpha1.AnnotationReleaseStrategy,
}

// FuzzParse feeds arbitrary annotation values to the parsers and checks that they never
// panic, are deterministic, and that whatever they accept satisfies the documented
// contract. The pod-eip-instanceid alias takes the value of pod-eip-name, so that a key
// and its alias both set to one value is reached as often as a conflict.
func FuzzParse(f *testing.F) {
	f.Add(uint8(0b00000111), "web-eip", `[{"interface":"ext0","elasticIP":"gw-eip"}]`, "true", "", "", "", "")
	f.Add(uint8(0b11000110), "", `[{"interface":"ext0","elasticIP":"gw-eip"}]`, "true", "", "", "5", "5m30s")
	f.Add(uint8(0b00000010), "", `[{"interface":"eth0","elasticIP":"a"},{"interface":"ext1"}]`, "", "", "", "", "")
	f.Add(uint8(0b11001100), "", "", "true", "true", "", "100000", "Follow")
	f.Add(uint8(0b10110100), "", "", "false", "", "web-eip", "", "Never")
	f.Add(uint8(0b00101000), "", "", "", "true", "eip-xxxxx66wjkj16lf9xxxxx", "", "")
	f.Add(uint8(0b00001100), "", "", "true", "false", "", "", "")
	f.Add(uint8(0b00010101), "a", "", "true", "", "a", "", "")
	f.Add(uint8(0b00000011), "a", `[{"interface":"eth0","elasticIP":"a"}]`, "", "", "", "", "")
	f.Add(uint8(0b00000010), "", `[{"interface":"ext0"},{"interface":"ext0"}]`, "", "", "", "", "")
	f.Add(uint8(0b00000010), "", `[{"interface":"ext0","elasticIP":"x"},{"interface":"ext1","elasticIP":"x"}]`, "", "", "", "", "")
	f.Add(uint8(0b00000010), "", `[{"Interface":"ext0"}] trailing`, "", "", "", "", "")
	f.Add(uint8(0b00000010), "", `[{"interface":"ext0","interface":"x"}]`, "", "", "", "", "")
	f.Add(uint8(0b00000010), "", `[{"interface":{"a":[1,2,{"b":null}]}}]`, "", "", "", "", "")
	f.Add(uint8(0b00000010), "", `[[[[[[`, "", "", "", "", "")
	f.Add(uint8(0b00000010), "", "null", "", "", "", "", "")
	f.Add(uint8(0b00000010), "", `["\u0000", 1e400, true]`, "", "", "", "", "")
	f.Add(uint8(0b00000010), "", `[{"interface":"external0"},{"interface":"lo"}]`, "", "", "", "", "")
	f.Add(uint8(0b11010101), "ns/x", "", "yes", "", "Bad_Name", "0", "-1s")
	f.Add(uint8(0b11000100), "", "", "True", "", "", "99999999999", "follow")

	f.Fuzz(func(t *testing.T, mask uint8, eip, networks, withEIP, aliasWith, name, bandwidth, release string) {
		values := [...]string{eip, networks, withEIP, aliasWith, name, name, bandwidth, release}
		ann := map[string]string{}
		for i, k := range fuzzKeys {
			if mask&(1<<i) != 0 {
				ann[k] = values[i]
			}
		}

		nics, directErrs := ParseDirect(ann)
		auto, autoErrs := ParseAuto(ann)
		podErrs := ValidatePod(ann)

		nics2, directErrs2 := ParseDirect(ann)
		if !reflect.DeepEqual(nics, nics2) || !reflect.DeepEqual(directErrs, directErrs2) {
			t.Fatalf("ParseDirect is not deterministic for %q", ann)
		}
		if len(ann) > 0 != HasJuneauAnnotations(ann) {
			t.Fatalf("HasJuneauAnnotations(%q) = %v", ann, HasJuneauAnnotations(ann))
		}
		for _, e := range append(append(directErrs, autoErrs...), podErrs...) {
			if !strings.HasPrefix(e.Field, "metadata.annotations[") || e.Detail == "" {
				t.Fatalf("error without annotation path or explanation: %v", e)
			}
		}
		if len(directErrs) > 0 && nics != nil {
			t.Fatalf("ParseDirect returned NICs %v along with errors %v", nics, directErrs)
		}
		if len(directErrs) == 0 {
			checkNICs(t, nics)
		}
		if len(autoErrs) == 0 {
			checkAuto(t, auto)
		}
		if (len(directErrs) > 0 || len(autoErrs) > 0) && len(podErrs) == 0 {
			t.Fatalf("ValidatePod accepted %q although a parser refused it", ann)
		}
		if len(podErrs) == 0 && auto.Wanted() {
			for _, n := range nics {
				if n.Interface == v1alpha1.DefaultInterface || (auto.ElasticIPName != "" && n.ElasticIP == auto.ElasticIPName) {
					t.Fatalf("ValidatePod accepted direct %v together with automatic %+v", n, auto)
				}
			}
		}
	})
}

func checkNICs(t *testing.T, nics []DirectNIC) {
	t.Helper()
	eips := map[string]bool{}
	for i, n := range nics {
		if n.Interface == v1alpha1.DefaultInterface {
			if i != 0 || n.ElasticIP == "" {
				t.Fatalf("eth0 must come first and only with an ElasticIP: %v", nics)
			}
		} else {
			if len(n.Interface) > MaxExtraInterfaceLength || len(utilvalidation.IsDNS1123Label(n.Interface)) > 0 || reservedInterface(n.Interface) != "" {
				t.Fatalf("accepted bad interface name %q", n.Interface)
			}
			if i > 0 && nics[i-1].Interface != v1alpha1.DefaultInterface && nics[i-1].Interface >= n.Interface {
				t.Fatalf("interfaces not unique and sorted: %v", nics)
			}
		}
		if n.ElasticIP != "" {
			if eips[n.ElasticIP] || strings.Contains(n.ElasticIP, "/") || len(utilvalidation.IsDNS1123Subdomain(n.ElasticIP)) > 0 {
				t.Fatalf("accepted bad or repeated ElasticIP %q in %v", n.ElasticIP, nics)
			}
			eips[n.ElasticIP] = true
		}
	}
}

func checkAuto(t *testing.T, a AutoEIP) {
	t.Helper()
	if a.Enabled && a.ElasticIPName != "" {
		t.Fatalf("accepted both pod-with-eip and pod-eip-name: %+v", a)
	}
	if a.BandwidthMbps != nil && (*a.BandwidthMbps < validation.MinBandwidthMbps || *a.BandwidthMbps > validation.MaxBandwidthMbps) {
		t.Fatalf("accepted bandwidth %d", *a.BandwidthMbps)
	}
	r := a.Release
	switch {
	case !r.Set && r != (ReleaseStrategy{}):
		t.Fatalf("release strategy filled in without being set: %+v", r)
	case r.Set && r.Kind == ReleaseAfter && r.After <= 0:
		t.Fatalf("accepted release delay %v", r.After)
	case r.Set && r.Kind != ReleaseAfter && (r.After != 0 || (r.Kind != ReleaseFollow && r.Kind != ReleaseNever)):
		t.Fatalf("accepted release strategy %+v", r)
	}
}
