package admission

import (
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func bgpAdvertisement(name, net, addr, nodeName string) *v1alpha1.BGPAdvertisement {
	return &v1alpha1.BGPAdvertisement{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.BGPAdvertisementSpec{ExternalNetwork: net, Address: addr, NodeName: nodeName}}
}

func bgpPeer(name, addr string, selector map[string]string) *v1alpha1.BGPPeer {
	p := &v1alpha1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.BGPPeerSpec{PeerAddress: addr, PeerASN: 64512, MyASN: 64513}}
	if selector != nil {
		p.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: selector}
	}
	return p
}

func TestBGPAdvertisementRules(t *testing.T) {
	base := func(f *fixture) {
		f.cached(pool("a", arp, "10.225.51.0/24"), network("net", arp, "a"), pool("g", bgp, "10.225.53.0/24"), network("bgp-net", bgp, "g"),
			node("node-a", "10.225.50.1"), node("node-b", "10.225.50.2"))
	}
	runRuleCases(t, []ruleCase{
		{name: "valid", setup: base, obj: bgpAdvertisement("eip-team-e", "bgp-net", "10.225.53.7", "node-a"), want: allowed()},
		{name: "missing network", setup: base, obj: bgpAdvertisement("ad", "nope", "10.225.53.7", "node-a"),
			want: invalid(`spec.externalNetwork`, `ExternalNetwork "nope" does not exist`)},
		{name: "network of type arp", setup: base, obj: bgpAdvertisement("ad", "net", "10.225.51.7", "node-a"),
			want: invalid(`spec.externalNetwork`, `ExternalNetwork "net" has type "arp": only networks of type "bgp" are announced by BGP`)},
		{name: "address outside the pools", setup: base, obj: bgpAdvertisement("ad", "bgp-net", "10.225.51.7", "node-a"),
			want: invalid(`spec.address`, `is not inside the AddressPools of ExternalNetwork "bgp-net" ("g")`)},
		{name: "not an IPv4 address", setup: base, obj: bgpAdvertisement("ad", "bgp-net", "10.225.53", "node-a"),
			want: invalid(`spec.address`)},
		{name: "missing Node", setup: base, obj: bgpAdvertisement("ad", "bgp-net", "10.225.53.7", "node-z"),
			want: invalid(`spec.nodeName`, `Node "node-z" does not exist`)},
		{name: "address of a Node", obj: bgpAdvertisement("ad", "bgp-net", "10.225.53.9", "node-a"),
			setup: func(f *fixture) { base(f); f.cached(node("node-c", "10.225.53.9")) },
			want:  invalid(`spec.address`, `Node "node-c"`)},
		{name: "address already announced", obj: bgpAdvertisement("ad", "bgp-net", "10.225.53.7", "node-a"),
			setup: func(f *fixture) { base(f); f.cached(bgpAdvertisement("first", "bgp-net", "10.225.53.7", "node-b")) },
			want:  invalid(`spec.address`, `is already advertised by BGPAdvertisement "first": one address has at most one BGPAdvertisement`)},
		{name: "address announced by one not yet in the cache", obj: bgpAdvertisement("ad", "bgp-net", "10.225.53.7", "node-a"),
			setup: func(f *fixture) { base(f); f.live(bgpAdvertisement("first", "bgp-net", "10.225.53.7", "node-b")) },
			want:  invalid(`spec.address`, `BGPAdvertisement "first"`)},
		{name: "an ARPAdvertisement of the address is another kind", obj: bgpAdvertisement("ad", "bgp-net", "10.225.53.7", "node-a"),
			setup: func(f *fixture) { base(f); f.cached(arpAd("first", "net", "10.225.53.7", "node-b")) },
			want:  allowed()},
		{name: "the other advertisement is being deleted", obj: bgpAdvertisement("ad", "bgp-net", "10.225.53.7", "node-a"),
			setup: func(f *fixture) {
				base(f)
				f.cached(deleting(bgpAdvertisement("first", "bgp-net", "10.225.53.7", "node-b")))
			},
			want: allowed()},
		{name: "nodeName may move", op: admissionv1.Update, setup: base,
			obj: bgpAdvertisement("ad", "bgp-net", "10.225.53.7", "node-b"), old: bgpAdvertisement("ad", "bgp-net", "10.225.53.7", "node-a"), want: allowed()},
		{name: "nodeName moves to a missing Node", op: admissionv1.Update, setup: base,
			obj: bgpAdvertisement("ad", "bgp-net", "10.225.53.7", "node-z"), old: bgpAdvertisement("ad", "bgp-net", "10.225.53.7", "node-a"),
			want: invalid(`spec.nodeName`, `Node "node-z"`)},
		{name: "address is immutable", op: admissionv1.Update, setup: base,
			obj: bgpAdvertisement("ad", "bgp-net", "10.225.53.8", "node-a"), old: bgpAdvertisement("ad", "bgp-net", "10.225.53.7", "node-a"),
			want: invalid(`spec.address`, `immutable`)},
		{name: "externalNetwork is immutable", op: admissionv1.Update, setup: base,
			obj: bgpAdvertisement("ad", "other", "10.225.53.7", "node-a"), old: bgpAdvertisement("ad", "bgp-net", "10.225.53.7", "node-a"),
			want: invalid(`spec.externalNetwork`, `immutable`)},
		{name: "nodeName and communities may change", op: admissionv1.Update, setup: base,
			obj: withCommunities(bgpAdvertisement("ad", "bgp-net", "10.225.53.7", "node-b"), "65000:100", "65000:1:2"),
			old: bgpAdvertisement("ad", "bgp-net", "10.225.53.7", "node-a"), want: allowed()},
		{name: "a malformed community", op: admissionv1.Update, setup: base,
			obj: withCommunities(bgpAdvertisement("ad", "bgp-net", "10.225.53.7", "node-a"), "65000:70000"),
			old: bgpAdvertisement("ad", "bgp-net", "10.225.53.7", "node-a"), want: invalid(`spec.communities[0]`, `0 to 65535`)},
	})
}

func withCommunities(a *v1alpha1.BGPAdvertisement, c ...string) *v1alpha1.BGPAdvertisement {
	a.Spec.Communities = c
	return a
}

func TestBGPPeerRules(t *testing.T) {
	withPassword := bgpPeer("tor-a", "10.225.51.1", nil)
	withPassword.Spec.PasswordSecretRef = &v1alpha1.SecretKeyReference{Namespace: "juneau-system", Name: "juneau-bgp-passwords", Key: "tor-a"}
	badASN := bgpPeer("tor-a", "10.225.51.1", nil)
	badASN.Spec.PeerASN = 23456
	multihopIBGP := bgpPeer("tor-a", "10.225.51.1", nil)
	multihopIBGP.Spec.MyASN, multihopIBGP.Spec.EBGPMultihop = 64512, new(int32(2))
	withGTSM := bgpPeer("tor-a", "10.225.51.1", nil)
	withGTSM.Spec.TTLSecurity = new(true)
	multihopGTSM := bgpPeer("tor-a", "10.225.51.1", nil)
	multihopGTSM.Spec.TTLSecurity, multihopGTSM.Spec.EBGPMultihop = new(true), new(int32(2))
	withBFD := bgpPeer("tor-a", "10.225.51.1", nil)
	withBFD.Spec.BFD = &v1alpha1.BGPPeerBFD{MinRxInterval: &metav1.Duration{Duration: 100 * time.Millisecond}, Multiplier: new(int32(5))}
	bfdFraction := bgpPeer("tor-a", "10.225.51.1", nil)
	bfdFraction.Spec.BFD = &v1alpha1.BGPPeerBFD{MinTxInterval: &metav1.Duration{Duration: 250500 * time.Microsecond}}
	multihopBFD := bgpPeer("tor-a", "10.225.51.1", nil)
	multihopBFD.Spec.BFD, multihopBFD.Spec.EBGPMultihop = &v1alpha1.BGPPeerBFD{}, new(int32(2))
	runRuleCases(t, []ruleCase{
		{name: "BFD", obj: withBFD, want: allowed()},
		{name: "BFD interval of a fraction of a millisecond", obj: bfdFraction, want: invalid(`spec.bfd.minTxInterval`, `whole number of milliseconds`)},
		{name: "BFD with multihop", obj: multihopBFD, want: invalid(`spec.bfd: Forbidden`, `directly connected`)},
		{name: "TTL security", obj: withGTSM, want: allowed()},
		{name: "TTL security with multihop", obj: multihopGTSM, want: invalid(`spec.ttlSecurity`, `directly connected`)},
		{name: "valid", obj: bgpPeer("tor-a", "10.225.51.1", nil), want: allowed()},
		{name: "with a password", obj: withPassword, want: allowed()},
		{name: "loopback peer", obj: bgpPeer("tor-a", "127.0.0.1", nil), want: invalid(`spec.peerAddress`, `loopback`)},
		{name: "AS_TRANS", obj: badASN, want: invalid(`spec.peerASN`, `AS_TRANS`)},
		{name: "multihop on iBGP", obj: multihopIBGP, want: invalid(`spec.ebgpMultihop`, `iBGP`)},
		{name: "same router for every Node twice", obj: bgpPeer("tor-b", "10.225.51.1", nil),
			setup: func(f *fixture) { f.cached(bgpPeer("tor-a", "10.225.51.1", nil)) },
			want:  invalid(`spec.peerAddress`, `BGPPeer "tor-a" has the same peerAddress`)},
		{name: "same router, one not yet in the cache", obj: bgpPeer("tor-b", "10.225.51.1", map[string]string{"rack": "a"}),
			setup: func(f *fixture) { f.live(bgpPeer("tor-a", "10.225.51.1", nil)) },
			want:  invalid(`spec.peerAddress`, `BGPPeer "tor-a"`)},
		{name: "same router, exclusive selectors", obj: bgpPeer("tor-b", "10.225.51.1", map[string]string{"rack": "b"}),
			setup: func(f *fixture) { f.cached(bgpPeer("tor-a", "10.225.51.1", map[string]string{"rack": "a"})) },
			want:  allowed()},
		{name: "another router", obj: bgpPeer("tor-b", "10.225.51.2", nil),
			setup: func(f *fixture) { f.cached(bgpPeer("tor-a", "10.225.51.1", nil)) },
			want:  allowed()},
		{name: "a selector widened onto another's Nodes", op: admissionv1.Update,
			obj: bgpPeer("tor-b", "10.225.51.1", nil), old: bgpPeer("tor-b", "10.225.51.1", map[string]string{"rack": "b"}),
			setup: func(f *fixture) { f.cached(bgpPeer("tor-a", "10.225.51.1", map[string]string{"rack": "a"})) },
			want:  invalid(`spec.peerAddress`, `BGPPeer "tor-a"`)},
		{name: "timers change; the address and selector stay", op: admissionv1.Update,
			obj: withHold(bgpPeer("tor-b", "10.225.51.1", nil), 30), old: bgpPeer("tor-b", "10.225.51.1", nil),
			setup: func(f *fixture) { f.cached(bgpPeer("tor-a", "10.225.51.1", nil)) },
			want:  allowed()},
		{name: "an invalid update", op: admissionv1.Update,
			obj: withHold(bgpPeer("tor-a", "10.225.51.1", nil), 2), old: bgpPeer("tor-a", "10.225.51.1", nil),
			want: invalid(`spec.holdTime`)},
	})
}

func withHold(p *v1alpha1.BGPPeer, seconds int) *v1alpha1.BGPPeer {
	p.Spec.HoldTime = &metav1.Duration{Duration: time.Duration(seconds) * time.Second}
	return p
}
