package admission

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// ruleCase is one review of a table test: setup seeds the fixture, then op is applied
// to obj (old for UPDATE and DELETE).
type ruleCase struct {
	name     string
	setup    func(f *fixture)
	op       admissionv1.Operation
	obj, old runtime.Object
	want     verdictCase
}

func runRuleCases(t *testing.T, cases []ruleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			if tc.setup != nil {
				tc.setup(f)
			}
			op := tc.op
			if op == "" {
				op = admissionv1.Create
			}
			tc.want.check(t, f.review(op, tc.obj, tc.old))
		})
	}
}

const (
	arp = v1alpha1.AdvertiseARP
	bgp = v1alpha1.AdvertiseBGP
)

func TestAddressPoolRules(t *testing.T) {
	runRuleCases(t, []ruleCase{
		{name: "valid", obj: pool("p", arp, "10.225.51.0/24", "10.225.52.5-10.225.52.9"),
			setup: func(f *fixture) { f.cached(pool("other", arp, "10.225.60.0/24"), node("node-a", "10.225.99.1")) },
			want:  allowed()},
		{name: "IPv6 pool", obj: pool("p", arp, "fd00:225:51::/64", "fd00:225:52::5-fd00:225:52::9"),
			setup: func(f *fixture) {
				f.cached(pool("other", arp, "10.225.51.0/24"), node("node-a", "10.225.99.1", "fd00:225:99::1"))
			},
			want: allowed()},
		{name: "communities on a bgp pool", obj: poolWithCommunities(pool("p", bgp, "10.225.53.0/24"), "65000:100", "65000:1:2"),
			want: allowed()},
		{name: "communities on an arp pool", obj: poolWithCommunities(pool("p", arp, "10.225.53.0/24"), "65000:100"),
			want: invalid(`spec.bgpCommunities`, `advertiseMode bgp only`)},
		{name: "a malformed community", obj: poolWithCommunities(pool("p", bgp, "10.225.53.0/24"), "65000:1:2:3"),
			want: invalid(`spec.bgpCommunities[0]`, `65000:1:2`)},
		{name: "mixed families", obj: pool("p", arp, "fd00:225:51::/64", "10.225.51.0/24"),
			want: invalid(`spec.addresses[1]`, `is IPv4 but spec.addresses[0] "fd00:225:51::/64" is IPv6`)},
		{name: "IPv6 overlaps a cached pool", obj: pool("p", arp, "fd00:225:51::/64"),
			setup: func(f *fixture) { f.cached(pool("other", bgp, "fd00:225:51::100-fd00:225:51::110")) },
			want:  invalid(`spec.addresses[0]`, `AddressPool "other"`)},
		{name: "contains a Node's IPv6 address", obj: pool("p", arp, "fd00:225:51::/64"),
			setup: func(f *fixture) { f.cached(node("node-a", "10.225.51.2", "fd00:225:51::2")) },
			want:  invalid(`spec.addresses[0]`, `fd00:225:51::2 of Node "node-a"`)},
		{name: "bad CIDR", obj: pool("p", arp, "10.225.51.1/24"),
			want: invalid(`spec.addresses[0]`, `"10.225.51.0/24"`)},
		{name: "entries overlap each other", obj: pool("p", arp, "10.225.51.0/24", "10.225.51.7"),
			want: invalid(`spec.addresses[1]`, `spec.addresses[0]`)},
		{name: "overlaps a cached pool", obj: pool("p", arp, "10.225.50.0/24", "10.225.51.0/25"),
			setup: func(f *fixture) { f.cached(pool("other", bgp, "10.225.51.100-10.225.51.110")) },
			want:  invalid(`spec.addresses[1]`, `AddressPool "other"`, `"10.225.51.100-10.225.51.110"`)},
		{name: "overlaps a pool not yet in the cache", obj: pool("p", arp, "10.225.51.0/24"),
			setup: func(f *fixture) { f.live(pool("fresh", arp, "10.225.51.9")) },
			want:  invalid(`spec.addresses[0]`, `AddressPool "fresh"`)},
		{name: "contains a Node address", obj: pool("p", arp, "10.225.50.0/24", "10.225.51.0/24"),
			setup: func(f *fixture) {
				f.cached(node("node-b", "10.225.51.3"), node("node-a", "10.225.51.2", "192.168.1.1"))
			},
			want: invalid(`spec.addresses[1]`, `10.225.51.2 of Node "node-a", 10.225.51.3 of Node "node-b"`)},
		{name: "contains the address of a Node not yet in the cache", obj: pool("p", arp, "10.225.51.0/24"),
			setup: func(f *fixture) { f.live(node("node-new", "10.225.51.200")) },
			want:  invalid(`spec.addresses[0]`, `Node "node-new"`)},
		{name: "append", op: admissionv1.Update,
			obj: pool("p", arp, "10.225.51.0/24", "10.225.52.0/24"), old: pool("p", arp, "10.225.51.0/24"),
			want: allowed()},
		{name: "reorder", op: admissionv1.Update,
			obj: pool("p", arp, "10.225.52.0/24", "10.225.51.0/24"), old: pool("p", arp, "10.225.51.0/24", "10.225.52.0/24"),
			want: invalid(`spec.addresses[0]`, `appended`)},
		{name: "remove", op: admissionv1.Update,
			obj: pool("p", arp, "10.225.51.0/24"), old: pool("p", arp, "10.225.51.0/24", "10.225.52.0/24"),
			want: invalid(`spec.addresses`, `"10.225.52.0/24"`)},
		{name: "advertiseMode is immutable", op: admissionv1.Update,
			obj: pool("p", bgp, "10.225.51.0/24"), old: pool("p", arp, "10.225.51.0/24"),
			want: invalid(`spec.advertiseMode`, `immutable`)},
		{name: "appended entry overlaps another pool", op: admissionv1.Update,
			setup: func(f *fixture) { f.cached(pool("other", arp, "10.225.52.0/24")) },
			obj:   pool("p", arp, "10.225.51.0/24", "10.225.52.0/26"), old: pool("p", arp, "10.225.51.0/24"),
			want: invalid(`spec.addresses[1]`, `AddressPool "other"`)},
		{name: "an old overlap does not block appending", op: admissionv1.Update,
			setup: func(f *fixture) { f.cached(pool("other", arp, "10.225.51.0/24")) },
			obj:   pool("p", arp, "10.225.51.0/24", "10.225.53.0/24"), old: pool("p", arp, "10.225.51.0/24"),
			want: allowed()},
		{name: "an old overlap does not block relabelling", op: admissionv1.Update,
			setup: func(f *fixture) { f.cached(pool("other", arp, "10.225.51.0/24")) },
			obj:   withLabels(pool("p", arp, "10.225.51.0/24"), "a", "b"), old: pool("p", arp, "10.225.51.0/24"),
			want: allowed()},
		{name: "updates of a deleting pool are never blocked", op: admissionv1.Update,
			obj: pool("p", bgp), old: deleting(pool("p", arp, "10.225.51.0/24")),
			want: allowed()},
		{name: "delete is allowed while nothing is reserved from it", op: admissionv1.Delete, old: pool("p", arp, "10.225.51.0/24"),
			setup: func(f *fixture) { f.live(claim("10.225.52.5", "other", "team", "e", "u1")) },
			want:  allowed()},
		{name: "delete is refused while addresses are reserved from it", op: admissionv1.Delete, old: pool("p", arp, "10.225.51.0/24"),
			setup: func(f *fixture) {
				f.live(claim("10.225.51.6", "p", "team", "web", "u2"), claim("10.225.51.5", "p", "team", "nginx", "u1"))
			},
			want: forbidden(`addresses are still reserved from it: 10.225.51.5 (ElasticIP "team/nginx"), 10.225.51.6 (ElasticIP "team/web")`,
				`release them first`)},
	})
}

func poolWithCommunities(p *v1alpha1.AddressPool, c ...string) *v1alpha1.AddressPool {
	p.Spec.BGPCommunities = c
	return p
}
