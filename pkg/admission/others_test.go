package admission

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
)

func TestNetworkInterfaceRules(t *testing.T) {
	runRuleCases(t, []ruleCase{
		{name: "valid", obj: nic("web", "eth0", ""), want: allowed()},
		{name: "named after its Pod and interface", obj: named(nic("web", "eth0", ""), "web.eth1"),
			want: invalid(`metadata.name`, `"web.eth0"`)},
		{name: "a taken ElasticIP is accepted: the NIC waits", obj: nic("web", "eth0", "e"),
			setup: func(f *fixture) { f.cached(eip("e", "net", ""), pod("old", direct("e")), nic("old", "eth0", "e")) },
			want:  allowed()},
		{name: "elasticIP is immutable", op: admissionv1.Update, obj: nic("web", "eth0", "b"), old: nic("web", "eth0", "a"),
			want: invalid(`spec.elasticIP`, `immutable`)},
		{name: "nodeName is set once", op: admissionv1.Update,
			obj: onNode(nic("web", "eth0", ""), "node-b"), old: nic("web", "eth0", ""),
			want: invalid(`spec.nodeName`, `"node-a"`)},
	})
}

func TestARPAdvertisementRules(t *testing.T) {
	base := func(f *fixture) {
		f.cached(pool("a", arp, "10.225.51.0/24"), network("net", arp, "a"), pool("g", bgp, "10.225.53.0/24"), network("bgp-net", bgp, "g"),
			node("node-a", "10.225.50.1"), node("node-b", "10.225.50.2"))
	}
	runRuleCases(t, []ruleCase{
		{name: "valid", setup: base, obj: arpAd("eip-team-e", "net", "10.225.51.7", "node-a"), want: allowed()},
		{name: "missing network", setup: base, obj: arpAd("ad", "nope", "10.225.51.7", "node-a"),
			want: invalid(`spec.externalNetwork`, `ExternalNetwork "nope" does not exist`)},
		{name: "network of type bgp", setup: base, obj: arpAd("ad", "bgp-net", "10.225.53.7", "node-a"),
			want: invalid(`spec.externalNetwork`, `ExternalNetwork "bgp-net" has type "bgp"`)},
		{name: "address outside the pools", setup: base, obj: arpAd("ad", "net", "10.225.52.7", "node-a"),
			want: invalid(`spec.address`, `ExternalNetwork "net"`)},
		{name: "missing Node", setup: base, obj: arpAd("ad", "net", "10.225.51.7", "node-z"),
			want: invalid(`spec.nodeName`, `Node "node-z" does not exist`)},
		{name: "Node not yet in the cache", obj: arpAd("ad", "net", "10.225.51.7", "node-new"),
			setup: func(f *fixture) { base(f); f.live(node("node-new")) }, want: allowed()},
		{name: "address of a Node", obj: arpAd("ad", "net", "10.225.51.9", "node-a"),
			setup: func(f *fixture) { base(f); f.cached(node("node-c", "10.225.51.9")) },
			want:  invalid(`spec.address`, `Node "node-c"`)},
		{name: "address already advertised", obj: arpAd("ad", "net", "10.225.51.7", "node-a"),
			setup: func(f *fixture) { base(f); f.cached(arpAd("first", "net", "10.225.51.7", "node-b")) },
			want:  invalid(`spec.address`, `ARPAdvertisement "first"`)},
		{name: "address advertised by one not yet in the cache", obj: arpAd("ad", "net", "10.225.51.7", "node-a"),
			setup: func(f *fixture) { base(f); f.live(arpAd("first", "net", "10.225.51.7", "node-b")) },
			want:  invalid(`spec.address`, `ARPAdvertisement "first"`)},
		{name: "the other advertisement is being deleted", obj: arpAd("ad", "net", "10.225.51.7", "node-a"),
			setup: func(f *fixture) { base(f); f.cached(deleting(arpAd("first", "net", "10.225.51.7", "node-b"))) },
			want:  allowed()},
		{name: "nodeName may move", op: admissionv1.Update, setup: base,
			obj: arpAd("ad", "net", "10.225.51.7", "node-b"), old: arpAd("ad", "net", "10.225.51.7", "node-a"), want: allowed()},
		{name: "nodeName moves to a missing Node", op: admissionv1.Update, setup: base,
			obj: arpAd("ad", "net", "10.225.51.7", "node-z"), old: arpAd("ad", "net", "10.225.51.7", "node-a"),
			want: invalid(`spec.nodeName`, `Node "node-z"`)},
		{name: "address is immutable", op: admissionv1.Update, setup: base,
			obj: arpAd("ad", "net", "10.225.51.8", "node-a"), old: arpAd("ad", "net", "10.225.51.7", "node-a"),
			want: invalid(`spec.address`, `immutable`)},
	})
}

func TestAllocationClaimRules(t *testing.T) {
	base := func(f *fixture) { f.cached(pool("a", arp, "10.225.51.0/24")) }
	runRuleCases(t, []ruleCase{
		{name: "valid", setup: base, obj: claim("10.225.51.7", "a", ns, "e", "uid-e"), want: allowed()},
		{name: "pool not yet in the cache", obj: claim("10.225.51.7", "fresh", ns, "e", "uid-e"),
			setup: func(f *fixture) { f.live(pool("fresh", arp, "10.225.51.0/24")) }, want: allowed()},
		{name: "missing pool", setup: base, obj: claim("10.225.51.7", "nope", ns, "e", "uid-e"),
			want: invalid(`spec.addressPool`, `AddressPool "nope" does not exist`)},
		{name: "address outside the pool", setup: base, obj: claim("10.225.52.7", "a", ns, "e", "uid-e"),
			want: invalid(`spec.address`, `AddressPool "a"`)},
		{name: "name is the address", setup: base,
			obj:  named(claim("10.225.51.7", "a", ns, "e", "uid-e"), "claim-7"),
			want: invalid(`metadata.name`, `"10.225.51.7"`)},
		{name: "spec is immutable", op: admissionv1.Update, obj: claim("10.225.51.7", "a", ns, "e", "uid-2"),
			old: claim("10.225.51.7", "a", ns, "e", "uid-e"), want: invalid(`spec.consumer.uid`, `immutable`)},
		{name: "relabel", op: admissionv1.Update, obj: withLabels(claim("10.225.51.7", "gone", ns, "e", "uid-e"), "a", "b"),
			old: claim("10.225.51.7", "gone", ns, "e", "uid-e"), want: allowed()},
	})
}
