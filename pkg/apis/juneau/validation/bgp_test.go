package validation

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func bgpPeer(name string, mutate ...func(*v1alpha1.BGPPeerSpec)) *v1alpha1.BGPPeer {
	p := &v1alpha1.BGPPeer{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.BGPPeerSpec{PeerAddress: "10.225.51.1", PeerASN: 64512, MyASN: 64513},
	}
	for _, m := range mutate {
		m(&p.Spec)
	}
	return p
}

func seconds(s float64) *metav1.Duration {
	return &metav1.Duration{Duration: time.Duration(s * float64(time.Second))}
}

func millis(ms int) *metav1.Duration {
	return &metav1.Duration{Duration: time.Duration(ms) * time.Millisecond}
}

func TestValidateBGPPeer(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*v1alpha1.BGPPeerSpec)
		want   []wantErr
		detail []string
	}{
		{name: "valid eBGP", mutate: func(*v1alpha1.BGPPeerSpec) {}},
		{name: "valid iBGP with everything", mutate: func(s *v1alpha1.BGPPeerSpec) {
			s.MyASN = 64512
			s.HoldTime, s.KeepaliveTime = seconds(9), seconds(3)
			s.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "a"}}
			s.PasswordSecretRef = &v1alpha1.SecretKeyReference{Namespace: "juneau-system", Name: "juneau-bgp-passwords", Key: "tor-a"}
		}},
		{name: "largest ASN", mutate: func(s *v1alpha1.BGPPeerSpec) { s.PeerASN, s.MyASN = 4294967294, 1 }},
		{name: "multihop eBGP", mutate: func(s *v1alpha1.BGPPeerSpec) { s.EBGPMultihop = ptr.To[int32](255) }},
		{name: "hold time bounds", mutate: func(s *v1alpha1.BGPPeerSpec) { s.HoldTime, s.KeepaliveTime = seconds(65535), seconds(65534) }},
		{name: "smallest hold time", mutate: func(s *v1alpha1.BGPPeerSpec) { s.HoldTime, s.KeepaliveTime = seconds(3), seconds(1) }},

		{name: "address missing", mutate: func(s *v1alpha1.BGPPeerSpec) { s.PeerAddress = "" },
			want: []wantErr{required("spec.peerAddress")}},
		{name: "address IPv6", mutate: func(s *v1alpha1.BGPPeerSpec) { s.PeerAddress = "fd00::1" },
			want: []wantErr{invalid("spec.peerAddress")}, detail: []string{"is an IPv6 address, IPv4 expected"}},
		{name: "address not canonical", mutate: func(s *v1alpha1.BGPPeerSpec) { s.PeerAddress = "010.225.51.1" },
			want: []wantErr{invalid("spec.peerAddress")}},
		{name: "address loopback", mutate: func(s *v1alpha1.BGPPeerSpec) { s.PeerAddress = "127.0.0.1" },
			want: []wantErr{invalid("spec.peerAddress")}, detail: []string{"loopback"}},
		{name: "address unspecified", mutate: func(s *v1alpha1.BGPPeerSpec) { s.PeerAddress = "0.0.0.0" },
			want: []wantErr{invalid("spec.peerAddress")}, detail: []string{"unspecified"}},
		{name: "address multicast", mutate: func(s *v1alpha1.BGPPeerSpec) { s.PeerAddress = "224.0.0.5" },
			want: []wantErr{invalid("spec.peerAddress")}, detail: []string{"multicast"}},
		{name: "address broadcast", mutate: func(s *v1alpha1.BGPPeerSpec) { s.PeerAddress = "255.255.255.255" },
			want: []wantErr{invalid("spec.peerAddress")}, detail: []string{"broadcast"}},

		{name: "peer ASN missing", mutate: func(s *v1alpha1.BGPPeerSpec) { s.PeerASN = 0 },
			want: []wantErr{required("spec.peerASN")}, detail: []string{"4294967294"}},
		{name: "my ASN too large", mutate: func(s *v1alpha1.BGPPeerSpec) { s.MyASN = 4294967295 },
			want: []wantErr{invalid("spec.myASN")}, detail: []string{"from 1 to 4294967294"}},
		{name: "my ASN negative", mutate: func(s *v1alpha1.BGPPeerSpec) { s.MyASN = -1 },
			want: []wantErr{invalid("spec.myASN")}},
		{name: "AS_TRANS", mutate: func(s *v1alpha1.BGPPeerSpec) { s.PeerASN = 23456 },
			want: []wantErr{invalid("spec.peerASN")}, detail: []string{"AS_TRANS"}},

		{name: "bad selector operator", mutate: func(s *v1alpha1.BGPPeerSpec) {
			s.NodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "rack", Operator: "Near"}}}
		}, want: []wantErr{invalid("spec.nodeSelector.matchExpressions[0].operator")}},
		{name: "bad selector label", mutate: func(s *v1alpha1.BGPPeerSpec) {
			s.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "a b"}}
		}, want: []wantErr{invalid("spec.nodeSelector.matchLabels")}},

		{name: "hold time 0", mutate: func(s *v1alpha1.BGPPeerSpec) { s.HoldTime = seconds(0) },
			want: []wantErr{invalid("spec.holdTime")}, detail: []string{"from 3s to 65535s", "no keepalives"}},
		{name: "hold time 2s", mutate: func(s *v1alpha1.BGPPeerSpec) { s.HoldTime = seconds(2) },
			want: []wantErr{invalid("spec.holdTime")}},
		{name: "hold time too long", mutate: func(s *v1alpha1.BGPPeerSpec) { s.HoldTime = seconds(65536) },
			want: []wantErr{invalid("spec.holdTime")}},
		{name: "hold time fraction", mutate: func(s *v1alpha1.BGPPeerSpec) { s.HoldTime = seconds(4.5) },
			want: []wantErr{invalid("spec.holdTime")}, detail: []string{"whole number of seconds"}},
		{name: "keepalive equal to hold", mutate: func(s *v1alpha1.BGPPeerSpec) { s.HoldTime, s.KeepaliveTime = seconds(9), seconds(9) },
			want: []wantErr{invalid("spec.keepaliveTime")}, detail: []string{"shorter than the hold time 9s"}},
		{name: "keepalive above the default hold", mutate: func(s *v1alpha1.BGPPeerSpec) { s.KeepaliveTime = seconds(90) },
			want: []wantErr{invalid("spec.keepaliveTime")}, detail: []string{"1m30s"}},
		{name: "keepalive 0", mutate: func(s *v1alpha1.BGPPeerSpec) { s.KeepaliveTime = seconds(0) },
			want: []wantErr{invalid("spec.keepaliveTime")}, detail: []string{"at least 1s"}},
		{name: "keepalive fraction", mutate: func(s *v1alpha1.BGPPeerSpec) { s.KeepaliveTime = seconds(1.5) },
			want: []wantErr{invalid("spec.keepaliveTime")}},

		{name: "password ref incomplete", mutate: func(s *v1alpha1.BGPPeerSpec) {
			s.PasswordSecretRef = &v1alpha1.SecretKeyReference{}
		}, want: []wantErr{required("spec.passwordSecretRef.namespace"), required("spec.passwordSecretRef.name"), required("spec.passwordSecretRef.key")}},
		{name: "password ref malformed", mutate: func(s *v1alpha1.BGPPeerSpec) {
			s.PasswordSecretRef = &v1alpha1.SecretKeyReference{Namespace: "Juneau", Name: "a/b", Key: "tor a"}
		}, want: []wantErr{invalid("spec.passwordSecretRef.namespace"), invalid("spec.passwordSecretRef.name"), invalid("spec.passwordSecretRef.key")}},

		{name: "multihop 1", mutate: func(s *v1alpha1.BGPPeerSpec) { s.EBGPMultihop = ptr.To[int32](1) },
			want: []wantErr{invalid("spec.ebgpMultihop")}, detail: []string{"from 2 to 255", "directly connected"}},
		{name: "multihop 256", mutate: func(s *v1alpha1.BGPPeerSpec) { s.EBGPMultihop = ptr.To[int32](256) },
			want: []wantErr{invalid("spec.ebgpMultihop")}},
		{name: "multihop iBGP", mutate: func(s *v1alpha1.BGPPeerSpec) { s.MyASN, s.EBGPMultihop = 64512, ptr.To[int32](3) },
			want: []wantErr{invalid("spec.ebgpMultihop")}, detail: []string{"eBGP sessions only", "64512"}},

		{name: "TTL security", mutate: func(s *v1alpha1.BGPPeerSpec) { s.TTLSecurity = ptr.To(true) }},
		{name: "TTL security off with multihop", mutate: func(s *v1alpha1.BGPPeerSpec) { s.TTLSecurity, s.EBGPMultihop = ptr.To(false), ptr.To[int32](2) }},
		{name: "TTL security multihop", mutate: func(s *v1alpha1.BGPPeerSpec) { s.TTLSecurity, s.EBGPMultihop = ptr.To(true), ptr.To[int32](2) },
			want: []wantErr{invalid("spec.ttlSecurity")}, detail: []string{"directly connected", "TTL 255"}},

		{name: "BFD defaults", mutate: func(s *v1alpha1.BGPPeerSpec) { s.BFD = &v1alpha1.BGPPeerBFD{} }},
		{name: "BFD bounds", mutate: func(s *v1alpha1.BGPPeerSpec) {
			s.BFD = &v1alpha1.BGPPeerBFD{MinRxInterval: millis(50), MinTxInterval: millis(60000), Multiplier: ptr.To[int32](255)}
		}},
		{name: "BFD with TTL security, iBGP", mutate: func(s *v1alpha1.BGPPeerSpec) {
			s.MyASN, s.TTLSecurity, s.BFD = 64512, ptr.To(true), &v1alpha1.BGPPeerBFD{Multiplier: ptr.To[int32](2)}
		}},
		{name: "BFD interval too short", mutate: func(s *v1alpha1.BGPPeerSpec) { s.BFD = &v1alpha1.BGPPeerBFD{MinRxInterval: millis(49)} },
			want: []wantErr{invalid("spec.bfd.minRxInterval")}, detail: []string{"from 50ms to 1m0s"}},
		{name: "BFD interval too long", mutate: func(s *v1alpha1.BGPPeerSpec) { s.BFD = &v1alpha1.BGPPeerBFD{MinTxInterval: millis(60001)} },
			want: []wantErr{invalid("spec.bfd.minTxInterval")}},
		{name: "BFD interval fraction", mutate: func(s *v1alpha1.BGPPeerSpec) {
			s.BFD = &v1alpha1.BGPPeerBFD{MinTxInterval: &metav1.Duration{Duration: 300*time.Millisecond + 500*time.Microsecond}}
		}, want: []wantErr{invalid("spec.bfd.minTxInterval")}, detail: []string{"whole number of milliseconds"}},
		{name: "BFD multiplier 1", mutate: func(s *v1alpha1.BGPPeerSpec) { s.BFD = &v1alpha1.BGPPeerBFD{Multiplier: ptr.To[int32](1)} },
			want: []wantErr{invalid("spec.bfd.multiplier")}, detail: []string{"from 2 to 255"}},
		{name: "BFD multiplier 256", mutate: func(s *v1alpha1.BGPPeerSpec) { s.BFD = &v1alpha1.BGPPeerBFD{Multiplier: ptr.To[int32](256)} },
			want: []wantErr{invalid("spec.bfd.multiplier")}},
		{name: "BFD multihop", mutate: func(s *v1alpha1.BGPPeerSpec) { s.EBGPMultihop, s.BFD = ptr.To[int32](2), &v1alpha1.BGPPeerBFD{} },
			want: []wantErr{forbidden("spec.bfd")}, detail: []string{"directly connected", "single-hop"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := bgpPeer("tor-a", tt.mutate)
			errs := ValidateBGPPeer(p)
			expectErrs(t, errs, tt.want...)
			if len(tt.detail) > 0 {
				expectDetail(t, errs, tt.want[0].Path, tt.detail...)
			}
			expectErrs(t, ValidateBGPPeerUpdate(p, bgpPeer("tor-a")), tt.want...)
		})
	}
}

func TestValidateBGPAdvertisement(t *testing.T) {
	ad := func(network, address, node string) *v1alpha1.BGPAdvertisement {
		return &v1alpha1.BGPAdvertisement{
			ObjectMeta: metav1.ObjectMeta{Name: "eip-default-web"},
			Spec:       v1alpha1.BGPAdvertisementSpec{ExternalNetwork: network, Address: address, NodeName: node},
		}
	}
	expectErrs(t, ValidateBGPAdvertisement(ad("bgp-net", "10.225.53.7", "node-a")))
	expectErrs(t, ValidateBGPAdvertisement(ad("", "10.225.53.07", "Node_A")),
		required("spec.externalNetwork"), invalid("spec.address"), invalid("spec.nodeName"))
	// IPv6 goes out as a /128 over MP-BGP; its address must be canonical like IPv4's.
	expectErrs(t, ValidateBGPAdvertisement(ad("bgp-net", "fd00:225:51::7", "node-a")))
	expectErrs(t, ValidateBGPAdvertisement(ad("bgp-net", "fd00:225:51:0::7", "node-a")), invalid("spec.address"))
	expectErrs(t, ValidateBGPAdvertisementUpdate(ad("bgp-net", "fd00:225:51::7", "node-b"), ad("bgp-net", "fd00:225:51::7", "node-a")))
	old := ad("bgp-net", "10.225.53.7", "node-a")
	expectErrs(t, ValidateBGPAdvertisementUpdate(ad("bgp-net", "10.225.53.7", "node-b"), old))
	expectErrs(t, ValidateBGPAdvertisementUpdate(ad("other-net", "10.225.53.8", "node-b"), old),
		invalid("spec.externalNetwork"), invalid("spec.address"))
	expectDetail(t, ValidateBGPAdvertisementUpdate(ad("bgp-net", "10.225.53.8", "node-a"), old), "spec.address", `it was "10.225.53.7"`)
	// The controller rewrites the Node and the communities.
	moved := ad("bgp-net", "10.225.53.7", "node-b")
	moved.Spec.Communities = []string{"65000:100", "65000:1:2"}
	expectErrs(t, ValidateBGPAdvertisementUpdate(moved, old))
	moved.Spec.Communities = []string{"65000:100", "65000:100", "1:2:3:4"}
	expectErrs(t, ValidateBGPAdvertisement(moved), duplicated("spec.communities[1]"), invalid("spec.communities[2]"))
	expectErrs(t, ValidateBGPAdvertisementUpdate(moved, old), duplicated("spec.communities[1]"), invalid("spec.communities[2]"))
}

func selector(labels map[string]string, exprs ...metav1.LabelSelectorRequirement) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: labels, MatchExpressions: exprs}
}

func req(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelectorRequirement {
	return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
}

func TestSelectorsCanOverlap(t *testing.T) {
	rackA := selector(map[string]string{"rack": "a"})
	tests := []struct {
		name string
		a, b *metav1.LabelSelector
		want bool
	}{
		{"both absent", nil, nil, true},
		{"absent and empty", nil, &metav1.LabelSelector{}, true},
		{"absent selects every Node", nil, rackA, true},
		{"identical", rackA, selector(map[string]string{"rack": "a"}), true},
		{"different values of one key", rackA, selector(map[string]string{"rack": "b"}), false},
		{"different keys", rackA, selector(map[string]string{"zone": "x"}), true},
		{"In intersects", selector(nil, req("rack", metav1.LabelSelectorOpIn, "a", "b")), selector(nil, req("rack", metav1.LabelSelectorOpIn, "b", "c")), true},
		{"In disjoint", selector(nil, req("rack", metav1.LabelSelectorOpIn, "a", "b")), selector(nil, req("rack", metav1.LabelSelectorOpIn, "c")), false},
		{"NotIn excludes the value", rackA, selector(nil, req("rack", metav1.LabelSelectorOpNotIn, "a")), false},
		{"NotIn leaves another value", selector(nil, req("rack", metav1.LabelSelectorOpIn, "a", "b")), selector(nil, req("rack", metav1.LabelSelectorOpNotIn, "a")), true},
		{"two NotIn", selector(nil, req("rack", metav1.LabelSelectorOpNotIn, "a")), selector(nil, req("rack", metav1.LabelSelectorOpNotIn, "b")), true},
		{"Exists vs DoesNotExist", selector(nil, req("bgp", metav1.LabelSelectorOpExists)), selector(nil, req("bgp", metav1.LabelSelectorOpDoesNotExist)), false},
		{"value vs DoesNotExist", rackA, selector(nil, req("rack", metav1.LabelSelectorOpDoesNotExist)), false},
		{"NotIn vs DoesNotExist", selector(nil, req("rack", metav1.LabelSelectorOpNotIn, "a")), selector(nil, req("rack", metav1.LabelSelectorOpDoesNotExist)), true},
		{"Exists vs value", selector(nil, req("rack", metav1.LabelSelectorOpExists)), rackA, true},
		{"one key disjoint among several", selector(map[string]string{"zone": "x", "rack": "a"}), selector(map[string]string{"zone": "x", "rack": "b"}), false},
		{"selects nothing itself", selector(map[string]string{"rack": "a"}, req("rack", metav1.LabelSelectorOpNotIn, "a")), nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, pair := range [][2]*metav1.LabelSelector{{tt.a, tt.b}, {tt.b, tt.a}} {
				got, err := SelectorsCanOverlap(pair[0], pair[1])
				if err != nil || got != tt.want {
					t.Errorf("SelectorsCanOverlap(%v, %v) = %v, %v; want %v", pair[0], pair[1], got, err, tt.want)
				}
			}
		})
	}
	if _, err := SelectorsCanOverlap(selector(nil, req("rack", "Near")), nil); err == nil {
		t.Error("an invalid selector was accepted")
	}
}

func TestConflictingBGPPeers(t *testing.T) {
	withSelector := func(s *metav1.LabelSelector) func(*v1alpha1.BGPPeerSpec) {
		return func(spec *v1alpha1.BGPPeerSpec) { spec.NodeSelector = s }
	}
	withAddress := func(a string) func(*v1alpha1.BGPPeerSpec) {
		return func(spec *v1alpha1.BGPPeerSpec) { spec.PeerAddress = a }
	}
	peers := []*v1alpha1.BGPPeer{
		bgpPeer("tor-b-everyone"),
		bgpPeer("tor-a-rack-a", withSelector(selector(map[string]string{"rack": "a"}))),
		bgpPeer("tor-c-rack-b", withSelector(selector(map[string]string{"rack": "b"}))),
		bgpPeer("other-router", withAddress("10.225.51.2")),
		bgpPeer("broken", withSelector(selector(nil, req("rack", "Near")))),
	}
	got := ConflictingBGPPeers(peers)
	want := []BGPPeerConflict{
		{A: "tor-a-rack-a", B: "tor-b-everyone", Address: "10.225.51.1"},
		{A: "tor-b-everyone", B: "tor-c-rack-b", Address: "10.225.51.1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ConflictingBGPPeers (-want +got):\n%s", diff)
	}

	// The webhook's view: one peer against the others (itself included in the list).
	errs := ValidateBGPPeerUnique(peers[0], peers)
	expectErrs(t, errs, duplicated("spec.peerAddress"))
	expectDetail(t, errs, "spec.peerAddress", `BGPPeers "tor-a-rack-a", "tor-c-rack-b" have the same peerAddress`, "one session per router address")
	errs = ValidateBGPPeerUnique(peers[1], peers)
	expectDetail(t, errs, "spec.peerAddress", `BGPPeer "tor-b-everyone" has`)
	if errs := ValidateBGPPeerUnique(peers[1], []*v1alpha1.BGPPeer{peers[1], peers[2], peers[3]}); len(errs) != 0 {
		t.Errorf("exclusive selectors and another address: %v", describe(errs))
	}
	if !strings.Contains(errs.ToAggregate().Error(), "10.225.51.1") {
		t.Errorf("message lacks the address: %v", errs)
	}
}

// TestSelectorsCanOverlapExhaustive compares SelectorsCanOverlap with a search over
// every Node label set for random selectors over two keys and three values (plus a
// fourth value no selector names, standing for all the others).
func TestSelectorsCanOverlapExhaustive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []string{"rack", "zone"}
	values := []string{"a", "b", "c"}
	ops := []metav1.LabelSelectorOperator{metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn,
		metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist}
	randomSelector := func() *metav1.LabelSelector {
		if rng.IntN(5) == 0 {
			return nil
		}
		s := &metav1.LabelSelector{}
		for range rng.IntN(4) {
			r := metav1.LabelSelectorRequirement{Key: keys[rng.IntN(len(keys))], Operator: ops[rng.IntN(len(ops))]}
			if r.Operator == metav1.LabelSelectorOpIn || r.Operator == metav1.LabelSelectorOpNotIn {
				for _, v := range values {
					if rng.IntN(2) == 0 {
						r.Values = append(r.Values, v)
					}
				}
				if len(r.Values) == 0 {
					r.Values = []string{values[rng.IntN(len(values))]}
				}
			}
			s.MatchExpressions = append(s.MatchExpressions, r)
		}
		return s
	}
	matches := func(s *metav1.LabelSelector, set labels.Set) bool {
		if s == nil {
			return true
		}
		sel, err := metav1.LabelSelectorAsSelector(s)
		if err != nil {
			t.Fatal(err)
		}
		return sel.Matches(set)
	}
	choices := []string{"", "a", "b", "c", "other"} // "" is an absent label
	for range 3000 {
		a, b := randomSelector(), randomSelector()
		want := false
		for _, v1 := range choices {
			for _, v2 := range choices {
				set := labels.Set{}
				if v1 != "" {
					set["rack"] = v1
				}
				if v2 != "" {
					set["zone"] = v2
				}
				want = want || (matches(a, set) && matches(b, set))
			}
		}
		got, err := SelectorsCanOverlap(a, b)
		if err != nil || got != want {
			t.Fatalf("SelectorsCanOverlap(%v, %v) = %v, %v; a search over label sets says %v", a, b, got, err, want)
		}
	}
}
