package admission

import (
	"fmt"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
)

func TestExternalNetworkRules(t *testing.T) {
	pools := func(f *fixture) {
		f.cached(pool("a", arp, "10.225.51.0/24"), pool("b", arp, "10.225.52.0/24"), pool("g", bgp, "10.225.53.0/24"))
	}
	runRuleCases(t, []ruleCase{
		{name: "valid", setup: pools, obj: network("net", arp, "a", "b"), want: allowed()},
		{name: "duplicate pool", setup: pools, obj: network("net", arp, "a", "a"),
			want: invalid(`spec.addressPools[1]`)},
		{name: "missing pool", setup: pools, obj: network("net", arp, "a", "nope"),
			want: invalid(`spec.addressPools[1]`, `AddressPool "nope" does not exist`)},
		{name: "pool not yet in the cache", obj: network("net", arp, "fresh"),
			setup: func(f *fixture) { f.live(pool("fresh", arp, "10.225.51.0/24")) },
			want:  allowed()},
		{name: "deleting pool", obj: network("net", arp, "a"),
			setup: func(f *fixture) { f.cached(deleting(pool("a", arp, "10.225.51.0/24"))) },
			want:  invalid(`spec.addressPools[0]`, `AddressPool "a" is being deleted`)},
		{name: "pool mode differs", setup: pools, obj: network("net", arp, "a", "g"),
			want: invalid(`spec.addressPools[1]`, `AddressPool "g" has advertiseMode "bgp"`, `type "arp"`)},
		{name: "pool of another network", obj: network("net", arp, "a", "b"),
			setup: func(f *fixture) { pools(f); f.cached(network("other", arp, "b")) },
			want:  invalid(`spec.addressPools[1]`, `ExternalNetwork "other"`)},
		{name: "pool of a network not yet in the cache", obj: network("net", arp, "a"),
			setup: func(f *fixture) { pools(f); f.live(network("fresh", arp, "a")) },
			want:  invalid(`spec.addressPools[0]`, `ExternalNetwork "fresh"`)},
		{name: "append a pool", op: admissionv1.Update, setup: pools,
			obj: network("net", arp, "a", "b"), old: network("net", arp, "a"), want: allowed()},
		{name: "remove a pool", op: admissionv1.Update, setup: pools,
			obj: network("net", arp, "b"), old: network("net", arp, "a", "b"),
			want: invalid(`spec.addressPools[0]`, `appended`)},
		{name: "type is immutable", op: admissionv1.Update, setup: pools,
			obj: network("net", bgp, "g"), old: network("net", arp, "g"),
			want: invalid(`spec.type`, `immutable`)},
		{name: "appended pool is missing", op: admissionv1.Update, setup: pools,
			obj: network("net", arp, "gone", "nope"), old: network("net", arp, "gone"),
			want: invalid(`spec.addressPools[1]`, `AddressPool "nope" does not exist`)},
		{name: "a pool gone since does not block appending", op: admissionv1.Update, setup: pools,
			obj: network("net", arp, "gone", "b"), old: network("net", arp, "gone"), want: allowed()},
		{name: "relabel with a pool gone", op: admissionv1.Update,
			obj: withLabels(network("net", arp, "gone"), "x", "y"), old: network("net", arp, "gone"), want: allowed()},
		{name: "delete unused", op: admissionv1.Delete, old: network("net", arp, "a"),
			setup: func(f *fixture) { f.cached(eip("e", "other", "")) }, want: allowed()},
		{name: "delete while an ElasticIP names it", op: admissionv1.Delete, old: network("net", arp, "a"),
			setup: func(f *fixture) { f.cached(eip("e", "net", "")) },
			want:  forbidden(`ElasticIP "team/e"`, `spec.externalNetwork`)},
		{name: "delete while an ElasticIP not yet in the cache names it", op: admissionv1.Delete, old: network("net", arp, "a"),
			setup: func(f *fixture) { f.live(eip("fresh", "net", "")) },
			want:  forbidden(`ElasticIP "team/fresh"`)},
		{name: "delete while only deleting ElasticIPs name it", op: admissionv1.Delete, old: network("net", arp, "a"),
			setup: func(f *fixture) { f.cached(deleting(eip("e", "net", ""))) }, want: allowed()},
		{name: "delete names the first ElasticIPs sorted", op: admissionv1.Delete, old: network("net", arp, "a"),
			setup: func(f *fixture) {
				for i := 7; i >= 1; i-- {
					f.cached(eip(fmt.Sprintf("e%d", i), "net", ""))
				}
			},
			want: forbidden(`"team/e1", "team/e2", "team/e3", "team/e4", "team/e5" and 2 more`)},
	})
}
