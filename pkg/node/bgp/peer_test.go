package bgp

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func TestPeerFor(t *testing.T) {
	p := &v1alpha1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor-a"}, Spec: v1alpha1.BGPPeerSpec{
		PeerAddress: "10.225.51.1", PeerASN: 64512, MyASN: 4200000000,
		HoldTime: &metav1.Duration{Duration: 9 * time.Second}, KeepaliveTime: &metav1.Duration{Duration: 3 * time.Second},
		EBGPMultihop: ptr.To[int32](4),
	}}
	got, err := PeerFor(p, "s3cret")
	want := Peer{Name: "tor-a", Address: routerA, PeerASN: 64512, MyASN: 4200000000, HoldTime: 9 * time.Second,
		KeepaliveTime: 3 * time.Second, Password: "s3cret", EBGPMultihopTTL: 4}
	if err != nil || got != want {
		t.Errorf("PeerFor = %+v, %v; want %+v", got, err, want)
	}

	minimal := &v1alpha1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor-b"},
		Spec: v1alpha1.BGPPeerSpec{PeerAddress: "10.225.51.2", PeerASN: 64512, MyASN: 64512}}
	if got, err := PeerFor(minimal, ""); err != nil || got.HoldTime != 0 || got.holdTime() != 90*time.Second || got.EBGPMultihopTTL != 0 {
		t.Errorf("PeerFor(minimal) = %+v, %v", got, err)
	}

	bad := &v1alpha1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor-c"}, Spec: v1alpha1.BGPPeerSpec{
		PeerAddress: "fd00::1", PeerASN: 0, MyASN: 4294967296, EBGPMultihop: ptr.To[int32](1)}}
	_, err = PeerFor(bad, "")
	for _, w := range []string{`BGPPeer "tor-c"`, "spec.peerAddress", "spec.peerASN 0", "spec.myASN 4294967296", "spec.ebgpMultihop 1"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v lacks %q", err, w)
		}
	}
	// BFD: absent fields take the defaults; out of range ones are refused.
	withBFD := minimal.DeepCopy()
	withBFD.Spec.BFD = &v1alpha1.BGPPeerBFD{MinTxInterval: &metav1.Duration{Duration: 100 * time.Millisecond}}
	if got, err := PeerFor(withBFD, ""); err != nil ||
		got.BFD != (BFD{Enabled: true, MinRx: 300 * time.Millisecond, MinTx: 100 * time.Millisecond, Multiplier: 3}) {
		t.Errorf("PeerFor(with BFD) = %+v, %v", got.BFD, err)
	}
	withBFD.Spec.BFD = &v1alpha1.BGPPeerBFD{MinRxInterval: &metav1.Duration{Duration: 10 * time.Millisecond}, Multiplier: ptr.To[int32](300)}
	_, err = PeerFor(withBFD, "")
	for _, w := range []string{"spec.bfd.minRxInterval 10ms", "spec.bfd.multiplier 300"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v lacks %q", err, w)
		}
	}
	withBFD.Spec.BFD, withBFD.Spec.PeerASN, withBFD.Spec.EBGPMultihop = &v1alpha1.BGPPeerBFD{}, 64999, ptr.To[int32](2)
	if _, err := PeerFor(withBFD, ""); err == nil || !strings.Contains(err.Error(), "single-hop BFD only") {
		t.Errorf("BFD with multihop: %v", err)
	}
	slow := minimal.DeepCopy()
	slow.Spec.KeepaliveTime = &metav1.Duration{Duration: 100 * time.Second}
	if _, err := PeerFor(slow, ""); err == nil || !strings.Contains(err.Error(), "keepalive time 1m40s") {
		t.Errorf("keepalive above the hold time: %v", err)
	}
}

func TestSelects(t *testing.T) {
	peer := func(s *metav1.LabelSelector) *v1alpha1.BGPPeer {
		return &v1alpha1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor-a"}, Spec: v1alpha1.BGPPeerSpec{NodeSelector: s}}
	}
	rackA := map[string]string{"rack": "a"}
	for _, tc := range []struct {
		name string
		sel  *metav1.LabelSelector
		want bool
	}{
		{"absent selects every Node", nil, true},
		{"empty selects every Node", &metav1.LabelSelector{}, true},
		{"match", &metav1.LabelSelector{MatchLabels: rackA}, true},
		{"no match", &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "b"}}, false},
		{"expression", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "rack", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"a"}}}}, false},
	} {
		if got, err := Selects(peer(tc.sel), rackA); err != nil || got != tc.want {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := Selects(peer(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "rack", Operator: "Near"}}}), rackA); err == nil {
		t.Error("an invalid selector selected")
	}
}

// TTL security reaches the Peer and GoBGP's configuration; a password longer than the
// kernel's TCP-MD5 keys is refused, naming the field and the Secret.
func TestPeerForTTLSecurityAndPassword(t *testing.T) {
	p := &v1alpha1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor-a"}, Spec: v1alpha1.BGPPeerSpec{
		PeerAddress: "10.225.51.1", PeerASN: 64512, MyASN: 64513, TTLSecurity: ptr.To(true),
		PasswordSecretRef: &v1alpha1.SecretKeyReference{Namespace: "juneau-system", Name: "juneau-bgp-passwords", Key: "tor-a"},
	}}
	got, err := PeerFor(p, strings.Repeat("x", MaxPasswordLength))
	if err != nil || !got.TTLSecurity {
		t.Fatalf("PeerFor = %+v, %v", got, err)
	}
	req := peerRequest(got, Config{}, false)
	if ts := req.GetTtlSecurity(); !ts.GetEnabled() || ts.GetTtlMin() != 255 {
		t.Errorf("TTL security %v, want enabled with a minimum of 255", ts)
	}
	for _, af := range req.GetAfiSafis() {
		if af.GetPrefixLimits().GetMaxPrefixes() != MaxReceivedPrefixes {
			t.Errorf("%v: prefix limit %v, want %d", af.GetConfig().GetFamily(), af.GetPrefixLimits(), MaxReceivedPrefixes)
		}
	}
	_, err = PeerFor(p, strings.Repeat("x", MaxPasswordLength+1))
	for _, w := range []string{"spec.passwordSecretRef", `key "tor-a" of Secret juneau-system/juneau-bgp-passwords`, "81 bytes", "at most 80"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v lacks %q", err, w)
		}
	}
	p.Spec.EBGPMultihop, p.Spec.PeerASN = ptr.To[int32](2), 64999
	if _, err := PeerFor(p, ""); err == nil || !strings.Contains(err.Error(), "TTL security with eBGP multihop") {
		t.Errorf("TTL security with multihop: %v", err)
	}
}
