package annotations

import (
	"reflect"
	"testing"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func TestParseDirect(t *testing.T) {
	n0, n1 := pathNetworks+"[0]", pathNetworks+"[1]"
	tests := []struct {
		name     string
		eip      *string // juneau.loutres.me/elastic-ip, nil = absent
		networks *string // juneau.loutres.me/networks, nil = absent
		want     []DirectNIC
		errs     []wantErr
	}{
		{name: "no annotations"},
		{name: "eth0 ElasticIP", eip: s("web-eip"), want: []DirectNIC{{"eth0", "web-eip"}}},
		{name: "eth0 ElasticIP empty", eip: s(""), errs: []wantErr{required(pathEIP)}},
		{name: "eth0 ElasticIP with namespace", eip: s("other/web-eip"), errs: []wantErr{invalid(pathEIP)}},
		{name: "eth0 ElasticIP invalid name", eip: s("Web_EIP"), errs: []wantErr{invalid(pathEIP)}},
		{name: "one extra NIC", networks: s(`[{"interface":"ext0","elasticIP":"gw-eip"}]`),
			want: []DirectNIC{{"ext0", "gw-eip"}}},
		{name: "sorted, eth0 first", eip: s("a-eip"),
			networks: s(` [ {"elasticIP":"z-eip","interface":"zz"}, {"interface":"ext0"}, {"interface":"abc","elasticIP":"b-eip"} ] `),
			want:     []DirectNIC{{"eth0", "a-eip"}, {"abc", "b-eip"}, {"ext0", ""}, {"zz", "z-eip"}}},
		{name: "empty list", networks: s("[]")},
		{name: "eth0 entry with ElasticIP", networks: s(`[{"interface":"eth0","elasticIP":"web-eip"}]`),
			want: []DirectNIC{{"eth0", "web-eip"}}},
		{name: "eth0 entry without ElasticIP", networks: s(`[{"interface":"eth0"}]`)},
		{name: "8-character interface", networks: s(`[{"interface":"external"}]`), want: []DirectNIC{{"external", ""}}},

		{name: "empty value", networks: s(""), errs: []wantErr{invalid(pathNetworks)}},
		{name: "null", networks: s("null"), errs: []wantErr{invalid(pathNetworks)}},
		{name: "object instead of list", networks: s(`{"interface":"ext0"}`), errs: []wantErr{invalid(pathNetworks)}},
		{name: "string instead of list", networks: s(`"ext0"`), errs: []wantErr{invalid(pathNetworks)}},
		{name: "YAML-ish", networks: s(`- interface: ext0`), errs: []wantErr{invalid(pathNetworks)}},
		{name: "second list after the first", networks: s(`[] []`), errs: []wantErr{invalid(pathNetworks)}},
		{name: "garbage after the list", networks: s(`[{"interface":"ext0"}] x`), errs: []wantErr{invalid(pathNetworks)}},
		{name: "truncated", networks: s(`[{"interface":"ext0"}`), errs: []wantErr{invalid(pathNetworks)}},
		{name: "missing comma", networks: s(`[{"interface":"ext0"} {"interface":"ext1"}]`), errs: []wantErr{invalid(pathNetworks)}},
		{name: "trailing comma", networks: s(`[{"interface":"ext0"},]`), errs: []wantErr{invalid(pathNetworks)}},
		{name: "unknown field", networks: s(`[{"interface":"ext0","vlan":"7"}]`), errs: []wantErr{forbidden(n0 + ".vlan")}},
		{name: "unknown field with object value", networks: s(`[{"interface":"ext0","extra":{"a":1}}]`), errs: []wantErr{forbidden(n0 + ".extra")}},
		{name: "wrong case", networks: s(`[{"Interface":"ext0"}]`), errs: []wantErr{forbidden(n0 + ".Interface")}},
		{name: "key given twice", networks: s(`[{"interface":"ext0","interface":"ext1"}]`), errs: []wantErr{duplicated(n0 + ".interface")}},
		{name: "number", networks: s(`[{"interface":5}]`), errs: []wantErr{invalid(n0 + ".interface")}},
		{name: "null ElasticIP", networks: s(`[{"interface":"ext0","elasticIP":null}]`), errs: []wantErr{invalid(n0 + ".elasticIP")}},
		{name: "nested list", networks: s(`[{"interface":["ext0"]}]`), errs: []wantErr{invalid(n0 + ".interface")}},
		{name: "entry not an object", networks: s(`[{"interface":"ext0"},"ext1"]`), errs: []wantErr{invalid(n1)}},
		{name: "interface missing", networks: s(`[{"elasticIP":"gw-eip"}]`), errs: []wantErr{required(n0 + ".interface")}},
		{name: "interface empty", networks: s(`[{"interface":""}]`), errs: []wantErr{required(n0 + ".interface")}},
		{name: "interface too long", networks: s(`[{"interface":"external0"}]`), errs: []wantErr{invalid(n0 + ".interface")}},
		{name: "interface upper case", networks: s(`[{"interface":"Ext0"}]`), errs: []wantErr{invalid(n0 + ".interface")}},
		{name: "interface with underscore", networks: s(`[{"interface":"ext_0"}]`), errs: []wantErr{invalid(n0 + ".interface")}},
		{name: "loopback", networks: s(`[{"interface":"lo"}]`), errs: []wantErr{invalid(n0 + ".interface")}},
		{name: "fallback tunnel", networks: s(`[{"interface":"tunl0"}]`), errs: []wantErr{invalid(n0 + ".interface")}},
		{name: "ElasticIP empty", networks: s(`[{"interface":"ext0","elasticIP":""}]`), errs: []wantErr{invalid(n0 + ".elasticIP")}},
		{name: "ElasticIP with namespace", networks: s(`[{"interface":"ext0","elasticIP":"ns/gw-eip"}]`), errs: []wantErr{invalid(n0 + ".elasticIP")}},
		{name: "duplicate interface", networks: s(`[{"interface":"ext0"},{"interface":"ext0","elasticIP":"gw-eip"}]`),
			errs: []wantErr{duplicated(n1 + ".interface")}},
		{name: "eth0 in both annotations", eip: s("web-eip"), networks: s(`[{"interface":"eth0","elasticIP":"web-eip"}]`),
			errs: []wantErr{duplicated(n0 + ".interface")}},
		{name: "eth0 in both, list entry without ElasticIP", eip: s("web-eip"), networks: s(`[{"interface":"eth0"}]`),
			errs: []wantErr{duplicated(n0 + ".interface")}},
		{name: "one ElasticIP on two extra NICs", networks: s(`[{"interface":"ext0","elasticIP":"gw-eip"},{"interface":"ext1","elasticIP":"gw-eip"}]`),
			errs: []wantErr{duplicated(n1 + ".elasticIP")}},
		{name: "one ElasticIP on eth0 and an extra NIC", eip: s("gw-eip"), networks: s(`[{"interface":"ext0","elasticIP":"gw-eip"}]`),
			errs: []wantErr{duplicated(n0 + ".elasticIP")}},
		{name: "every bad entry reported", eip: s("a/b"), networks: s(`[{"interface":"Bad"},{"interface":"ext1","elasticIP":"x/y"},{"interface":"ext2"}]`),
			errs: []wantErr{invalid(pathEIP), invalid(n0 + ".interface"), invalid(n1 + ".elasticIP")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ann := map[string]string{"unrelated": "x"}
			if tt.eip != nil {
				ann[v1alpha1.AnnotationElasticIP] = *tt.eip
			}
			if tt.networks != nil {
				ann[v1alpha1.AnnotationNetworks] = *tt.networks
			}
			nics, errs := ParseDirect(ann)
			expectErrs(t, errs, tt.errs...)
			if !reflect.DeepEqual(nics, tt.want) {
				t.Errorf("ParseDirect = %#v, want %#v", nics, tt.want)
			}
		})
	}
}

func TestParseDirectMessages(t *testing.T) {
	n0 := pathNetworks + "[0]"
	msg := func(eip, networks string) func(path string, fragments ...string) {
		ann := map[string]string{v1alpha1.AnnotationNetworks: networks}
		if eip != "" {
			ann[v1alpha1.AnnotationElasticIP] = eip
		}
		_, errs := ParseDirect(ann)
		return func(path string, fragments ...string) { t.Helper(); expectDetail(t, errs, path, fragments...) }
	}
	msg("", `[{"Interface":"ext0"}]`)(n0+".Interface", `unknown field "Interface"`, "case-sensitive")
	msg("", `[{"interface":"ext0"}] x`)(pathNetworks, "nothing after it")
	msg("", `{"interface":"ext0"}`)(pathNetworks, "JSON list")
	msg("", `[{"interface":"ext0"`)(pathNetworks, "not valid JSON")
	msg("", `[{"interface":"external0"}]`)(n0+".interface", "at most 8 characters")
	msg("", `[{"interface":"lo"}]`)(n0+".interface", "loopback")
	msg("", `[{"interface":"ext0","elasticIP":"ns/gw"}]`)(n0+".elasticIP", "same namespace")
	msg("web-eip", `[{"interface":"eth0","elasticIP":"web-eip"}]`)(n0+".interface", v1alpha1.AnnotationElasticIP, "one place only")
	msg("gw-eip", `[{"interface":"ext0","elasticIP":"gw-eip"}]`)(n0+".elasticIP", `already carried by interface "eth0"`)
	msg("", `[{"interface":"ext0"},{"interface":"ext0"}]`)(pathNetworks+"[1].interface", "already given at "+n0+".interface")
}

func s(v string) *string { return &v }

func TestCompareNICs(t *testing.T) {
	eth0, a, b := DirectNIC{Interface: "eth0"}, DirectNIC{Interface: "a"}, DirectNIC{Interface: "ext0"}
	if compareNICs(eth0, a) >= 0 || compareNICs(a, eth0) <= 0 || compareNICs(a, b) >= 0 || compareNICs(b, b) != 0 {
		t.Error("compareNICs must order eth0 first, then by interface name")
	}
}
