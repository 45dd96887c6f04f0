package admission

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func TestElasticIPRules(t *testing.T) {
	net := func(f *fixture) {
		f.cached(pool("a", arp, "10.225.51.0/24"), pool("b", arp, "10.225.52.10-10.225.52.20"), network("net", arp, "a", "b"))
	}
	net6 := func(f *fixture) {
		f.cached(pool("a", arp, "10.225.51.0/24"), pool("six", arp, "fd00:225:51::/64"), network("net", arp, "a", "six"))
	}
	runRuleCases(t, []ruleCase{
		{name: "valid", setup: net, obj: eip("e", "net", ""), want: allowed()},
		{name: "requestedIP in the second pool", setup: net, obj: eip("e", "net", "10.225.52.15"), want: allowed()},
		{name: "requestedIP may pin the network address", setup: net, obj: eip("e", "net", "10.225.51.0"), want: allowed()},
		{name: "missing network", obj: eip("e", "nope", ""),
			want: invalid(`spec.externalNetwork`, `ExternalNetwork "nope" does not exist`)},
		{name: "network not yet in the cache", obj: eip("e", "fresh", ""),
			setup: func(f *fixture) { f.live(network("fresh", arp, "a")) }, want: allowed()},
		{name: "deleting network", obj: eip("e", "net", ""),
			setup: func(f *fixture) { f.cached(deleting(network("net", arp, "a"))) },
			want:  invalid(`spec.externalNetwork`, `is being deleted`)},
		{name: "requestedIP malformed", setup: net, obj: eip("e", "net", "10.225.051.7"),
			want: invalid(`spec.requestedIP`, `leading zero`)},
		{name: "requestedIP outside the pools", setup: net, obj: eip("e", "net", "10.225.52.21"),
			want: invalid(`spec.requestedIP`, `ExternalNetwork "net"`, `"a", "b"`)},
		{name: "requestedIP outside, a pool missing", obj: eip("e", "net", "10.225.52.21"),
			setup: func(f *fixture) { f.cached(pool("a", arp, "10.225.51.0/24"), network("net", arp, "a", "gone")) },
			want:  invalid(`spec.requestedIP`, `AddressPool "gone" does not exist`)},
		{name: "requestedIP in a pool an older network owns", obj: eip("e", "net", "10.225.51.7"),
			setup: func(f *fixture) {
				older := network("older", arp, "a")
				older.CreationTimestamp = metav1.Unix(1, 0)
				younger := network("net", arp, "a", "b")
				younger.CreationTimestamp = metav1.Unix(2, 0)
				f.cached(pool("a", arp, "10.225.51.0/24"), pool("b", arp, "10.225.52.10-10.225.52.20"), older, younger)
			},
			want: invalid(`spec.requestedIP`, `ExternalNetwork "net" ("b")`, `AddressPool "a" belongs to ExternalNetwork "older"`)},
		{name: "requestedIP in the pool of the older network", obj: eip("e", "older", "10.225.51.7"),
			setup: func(f *fixture) {
				older := network("older", arp, "a")
				older.CreationTimestamp = metav1.Unix(1, 0)
				younger := network("net", arp, "a")
				younger.CreationTimestamp = metav1.Unix(2, 0)
				f.cached(pool("a", arp, "10.225.51.0/24"), older, younger)
			},
			want: allowed()},
		{name: "requestedIP in a pool of the wrong mode", obj: eip("e", "net", "10.225.51.7"),
			setup: func(f *fixture) { f.cached(pool("a", bgp, "10.225.51.0/24"), network("net", arp, "a")) },
			want:  invalid(`spec.requestedIP`, `AddressPool "a" advertises by bgp, not arp`)},
		{name: "requestedIP reserved by another consumer", setup: func(f *fixture) {
			net(f)
			f.live(claim("10.225.51.7", "a", "other-ns", "holder", "uid-holder"))
		}, obj: eip("e", "net", "10.225.51.7"),
			want: invalid(`spec.requestedIP`, `reserved by an ElasticIP of another namespace`, `AllocationClaim "10.225.51.7"`)},
		{name: "requestedIP reserved by another ElasticIP of the namespace", setup: func(f *fixture) {
			net(f)
			f.live(claim("10.225.51.7", "a", ns, "holder", "uid-holder"))
		}, obj: eip("e", "net", "10.225.51.7"),
			want: invalid(`spec.requestedIP`, `ElasticIP "`+ns+`/holder"`, `AllocationClaim "10.225.51.7"`)},
		{name: "requestedIP reserved by this ElasticIP", setup: func(f *fixture) {
			net(f)
			f.live(claim("10.225.51.7", "a", ns, "e", "eip-e"))
		}, obj: eip("e", "net", "10.225.51.7"), want: allowed()},
		// Its advertisement takes a hashed name (docs/reference.md#arp-advertisement).
		{name: "a name too long for the preferred advertisement name", setup: net,
			obj:  eip("e23456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789", "net", ""),
			want: allowed()},
		{name: "bandwidth may change", op: admissionv1.Update,
			obj: withBandwidth(eip("e", "net", ""), 100), old: eip("e", "net", ""), want: allowed()},
		{name: "bandwidth out of range", op: admissionv1.Update,
			obj: withBandwidth(eip("e", "net", ""), 0), old: eip("e", "net", ""), want: invalid(`spec.bandwidthMbps`)},
		{name: "externalNetwork is immutable", op: admissionv1.Update,
			obj: eip("e", "other", ""), old: eip("e", "net", ""), want: invalid(`spec.externalNetwork`, `immutable`)},
		{name: "IPv6 ElasticIP on a network of both families", setup: net6, obj: eip6("e", "net", ""), want: allowed()},
		{name: "IPv6 requestedIP", setup: net6, obj: eip6("e", "net", "fd00:225:51::7"), want: allowed()},
		{name: "IPv6 requestedIP outside the pools", setup: net6, obj: eip6("e", "net", "fd00:225:52::7"),
			want: invalid(`spec.requestedIP`, `is not inside the AddressPools of ExternalNetwork "net"`)},
		{name: "IPv6 requestedIP of an IPv4 ElasticIP", setup: net6, obj: eip("e", "net", "fd00:225:51::7"),
			want: invalid(`spec.requestedIP`, `is an IPv6 address but spec.ipFamily is IPv4`)},
		{name: "IPv6 requestedIP not canonical", setup: net6, obj: eip6("e", "net", "fd00:225:51:0:0::7"),
			want: invalid(`spec.requestedIP`, `canonical form "fd00:225:51::7"`)},
		{name: "IPv6 requestedIP reserved by another consumer", setup: func(f *fixture) {
			net6(f)
			f.live(claim("fd00:225:51::7", "six", "other-ns", "holder", "uid-holder"))
		}, obj: eip6("e", "net", "fd00:225:51::7"),
			want: invalid(`spec.requestedIP`, `reserved by an ElasticIP of another namespace`, `AllocationClaim "fd00-225-51--7"`)},
		{name: "ipFamily is immutable", op: admissionv1.Update,
			obj: eip6("e", "net", ""), old: eip("e", "net", ""), want: invalid(`spec.ipFamily`, `immutable`)},
		{name: "ipFamily IPv4 written out is no change", op: admissionv1.Update,
			obj: func() *v1alpha1.ElasticIP { e := eip("e", "net", ""); e.Spec.IPFamily = v1alpha1.IPv4; return e }(),
			old: eip("e", "net", ""), want: allowed()},
		{name: "requestedIP is immutable", op: admissionv1.Update,
			obj: eip("e", "net", "10.225.51.8"), old: eip("e", "net", "10.225.51.7"), want: invalid(`spec.requestedIP`, `immutable`)},
		{name: "finalizer removal while deleting", op: admissionv1.Update,
			obj: eip("e", "net", ""), old: deleting(eip("e", "net", "")), want: allowed()},
		{name: "delete unused", op: admissionv1.Delete, old: eip("e", "net", ""), want: allowed()},
		{name: "delete while attached", op: admissionv1.Delete, old: eip("e", "net", ""),
			setup: func(f *fixture) { f.cached(attachment("web-attach", "e", "web.eth0")) },
			want:  forbidden(`ElasticIPAttachment "web-attach"`, `spec.elasticIPRef.name`)},
		{name: "delete while an attachment not yet in the cache references it", op: admissionv1.Delete, old: eip("e", "net", ""),
			setup: func(f *fixture) { f.live(attachment("fresh", "e", "web.eth0")) },
			want:  forbidden(`ElasticIPAttachment "fresh"`)},
		{name: "delete right after the attachment, still in the cache", op: admissionv1.Delete, old: eip("e", "net", ""),
			setup: func(f *fixture) {
				f.cached(attachment("gone", "e", "web.eth0"))
				if err := f.juneau.Tracker().Delete(schema.GroupVersionResource{Group: "juneau.loutres.me", Version: "v1alpha1", Resource: "elasticipattachments"}, ns, "gone"); err != nil {
					f.t.Fatal(err)
				}
			}, want: allowed()},
		{name: "delete while the attachment is being deleted", op: admissionv1.Delete, old: eip("e", "net", ""),
			setup: func(f *fixture) { f.cached(deleting(attachment("web-attach", "e", "web.eth0"))) }, want: allowed()},
		{name: "an attachment in another namespace does not count", op: admissionv1.Delete, old: eip("e", "net", ""),
			setup: func(f *fixture) {
				a := attachment("web-attach", "e", "web.eth0")
				a.Namespace = "elsewhere"
				f.cached(a)
			}, want: allowed()},
	})
}
