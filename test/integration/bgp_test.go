package integration

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/framework"
)

// TestBGPPeerSchema checks what the BGPPeer schema refuses on its own (without the
// webhook), that holdTime defaults to 90s, and the printer columns.
func TestBGPPeerSchema(t *testing.T) {
	cp := framework.Shared(t)
	ctx := testContext(t)
	peer := func(name, spec string) string {
		return fmt.Sprintf("apiVersion: juneau.loutres.me/v1alpha1\nkind: BGPPeer\nmetadata: {name: %s}\nspec: {%s}", name, spec)
	}
	base := "peerAddress: 10.225.51.1, peerASN: 64512, myASN: 64513"
	cases := []struct {
		name, spec string
		want       []string
	}{
		{"IPv6 address", "peerAddress: 'fd00::1', peerASN: 64512, myASN: 64513", []string{"spec.peerAddress", "must be an IPv4 address"}},
		{"not an address", "peerAddress: 10.225.51.300, peerASN: 64512, myASN: 64513", []string{"spec.peerAddress", "must be an IPv4 address"}},
		{"ASN 0", "peerAddress: 10.225.51.1, peerASN: 0, myASN: 64513", []string{"spec.peerASN", "should be greater than or equal to 1"}},
		{"ASN 4294967295", "peerAddress: 10.225.51.1, peerASN: 64512, myASN: 4294967295", []string{"spec.myASN", "should be less than or equal to 4294967294"}},
		{"missing myASN", "peerAddress: 10.225.51.1, peerASN: 64512", []string{"spec.myASN", "Required value"}},
		{"hold time 2s", base + ", holdTime: 2s", []string{"spec.holdTime", "between 3s and 65535s"}},
		{"hold time 0s", base + ", holdTime: 0s", []string{"spec.holdTime", "between 3s and 65535s"}},
		{"hold time fraction", base + ", holdTime: 4500ms", []string{"spec.holdTime", "whole number of seconds"}},
		{"hold time not a duration", base + ", holdTime: soon", []string{"spec.holdTime", "should match"}},
		{"keepalive not shorter", base + ", holdTime: 9s, keepaliveTime: 9s", []string{"keepaliveTime must be shorter than holdTime"}},
		{"keepalive above default hold", base + ", keepaliveTime: 100s", []string{"keepaliveTime must be shorter than holdTime"}},
		{"keepalive 0", base + ", keepaliveTime: 0s", []string{"spec.keepaliveTime", "at least 1s"}},
		{"multihop 1", base + ", ebgpMultihop: 1", []string{"spec.ebgpMultihop", "should be greater than or equal to 2"}},
		{"multihop iBGP", "peerAddress: 10.225.51.1, peerASN: 64512, myASN: 64512, ebgpMultihop: 3", []string{"ebgpMultihop applies to eBGP sessions only"}},
		{"TTL security multihop", base + ", ebgpMultihop: 2, ttlSecurity: true", []string{"ttlSecurity applies to directly connected routers only"}},
		{"BFD interval 40ms", base + ", bfd: {minRxInterval: 40ms}", []string{"spec.bfd.minRxInterval", "between 50ms and 60s"}},
		{"BFD interval 61s", base + ", bfd: {minTxInterval: 61s}", []string{"spec.bfd.minTxInterval", "between 50ms and 60s"}},
		{"BFD multiplier 1", base + ", bfd: {multiplier: 1}", []string{"spec.bfd.multiplier", "should be greater than or equal to 2"}},
		{"BFD multihop", base + ", ebgpMultihop: 2, bfd: {}", []string{"bfd applies to directly connected routers only"}},
		{"password without key", base + ", passwordSecretRef: {namespace: juneau-system, name: juneau-bgp-passwords}", []string{"spec.passwordSecretRef.key", "Required value"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := cp.Kubectl(ctx, peer("schema-"+strings.ReplaceAll(strings.ToLower(tc.name), " ", "-"), tc.spec), "apply", "-f", "-")
			if r.Err == nil {
				t.Fatalf("apply succeeded, want rejection containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.Stderr, w) {
					t.Errorf("rejection %q lacks %q", r.Stderr, w)
				}
			}
		})
	}

	good := peer("schema-tor-a", base+", keepaliveTime: 30s, ebgpMultihop: 2, ttlSecurity: false, nodeSelector: {matchLabels: {rack: a}}, "+
		"passwordSecretRef: {namespace: juneau-system, name: juneau-bgp-passwords, key: tor-a}")
	if r := cp.Kubectl(ctx, good, "apply", "-f", "-"); r.Err != nil {
		t.Fatalf("a valid BGPPeer is refused: %v", r.Err)
	}
	t.Cleanup(func() { cp.Kubectl(ctx, "", "delete", "bgppeer", "schema-tor-a", "--ignore-not-found") })
	got, err := cp.Juneau.JuneauV1alpha1().BGPPeers().Get(ctx, "schema-tor-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.HoldTime == nil || got.Spec.HoldTime.Duration != 90*time.Second {
		t.Errorf("holdTime = %v, want the default 90s", got.Spec.HoldTime)
	}
	if got.Spec.BFD != nil {
		t.Errorf("bfd = %+v on a BGPPeer without it, want none (no BFD unless asked for)", got.Spec.BFD)
	}
	// bfd: {} is BFD with the defaults; a given field is kept.
	withBFD := peer("schema-tor-bfd", "peerAddress: 10.225.51.9, peerASN: 64512, myASN: 64513, bfd: {minTxInterval: 1s}")
	if r := cp.Kubectl(ctx, withBFD, "apply", "-f", "-"); r.Err != nil {
		t.Fatalf("a BGPPeer with BFD is refused: %v\n%s", r.Err, r.Stderr)
	}
	t.Cleanup(func() { cp.Kubectl(ctx, "", "delete", "bgppeer", "schema-tor-bfd", "--ignore-not-found") })
	bfd, err := cp.Juneau.JuneauV1alpha1().BGPPeers().Get(ctx, "schema-tor-bfd", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b := bfd.Spec.BFD; b == nil || b.MinRxInterval == nil || b.MinRxInterval.Duration != 300*time.Millisecond ||
		b.MinTxInterval == nil || b.MinTxInterval.Duration != time.Second || b.Multiplier == nil || *b.Multiplier != 3 {
		t.Errorf("bfd = %+v, want minRxInterval 300ms and multiplier 3 by default, minTxInterval 1s as given", b)
	}
	r := cp.Kubectl(ctx, "", "get", "bgppeer", "schema-tor-a")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME PEER PEER-ASN MY-ASN AGE" ||
		!strings.HasPrefix(spaces.ReplaceAllString(lines[1], " "), "schema-tor-a 10.225.51.1 64512 64513 ") {
		t.Errorf("kubectl get bgppeer:\n%s", r.Stdout)
	}
}

// TestBGPNodeStatusColumns: kubectl get shows per Node how many peers are configured
// and established, and kubectl describe shows each session.
func TestBGPNodeStatusColumns(t *testing.T) {
	cp := framework.Shared(t)
	ctx := testContext(t)
	statuses := cp.Juneau.JuneauV1alpha1().BGPNodeStatuses()
	since := metav1.NewTime(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	_, err := statuses.Create(ctx, &v1alpha1.BGPNodeStatus{
		ObjectMeta: metav1.ObjectMeta{Name: "columns-node-a"},
		Status: v1alpha1.BGPNodeState{PeersConfigured: 2, PeersEstablished: 1, Peers: []v1alpha1.BGPSessionStatus{
			{Name: "tor-a", PeerAddress: "10.225.51.1", State: v1alpha1.BGPSessionEstablished, Since: since, PrefixesAnnounced: 3,
				StateBFD: v1alpha1.BFDUp},
			{Name: "tor-b", PeerAddress: "10.225.51.2", State: v1alpha1.BGPSessionWrongASN, Since: since,
				StateMessage: "the router's OPEN message carries an AS number other than peerASN 64512"},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cp.Kubectl(ctx, "", "delete", "bgpns", "columns-node-a", "--ignore-not-found") })

	r := cp.Kubectl(ctx, "", "get", "bgpns", "columns-node-a")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME CONFIGURED ESTABLISHED AGE" ||
		!strings.HasPrefix(spaces.ReplaceAllString(lines[1], " "), "columns-node-a 2 1 ") {
		t.Errorf("kubectl get bgpnodestatus:\n%s", r.Stdout)
	}
	r = cp.Kubectl(ctx, "", "describe", "bgpnodestatus", "columns-node-a")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	for _, want := range []string{"Peers Configured:", "Peers Established:", "Prefixes Announced:", "2030-01-02T03:04:05Z"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("describe lacks %q:\n%s", want, r.Stdout)
		}
	}
	// Each entry starts with its name and shows the message after the state.
	entry := regexp.MustCompile(`Name:\s+tor-b\n\s+Peer Address:\s+10\.225\.51\.2\n\s+Prefixes Announced:\s+0\n\s+Since:\s+\S+\n` +
		`\s+State:\s+WrongASN\n\s+State Message:\s+the router's OPEN message carries an AS number other than peerASN 64512\n`)
	if !entry.MatchString(r.Stdout) {
		t.Errorf("describe does not show tor-b's entry in order (name, address, prefixes, since, state, message):\n%s", r.Stdout)
	}
	withBFD := regexp.MustCompile(`Name:\s+tor-a\n\s+Peer Address:\s+10\.225\.51\.1\n\s+Prefixes Announced:\s+3\n\s+Since:\s+\S+\n` +
		`\s+State:\s+Established\n\s+State BFD:\s+Up\n\s+Name:\s+tor-b\n`)
	if !withBFD.MatchString(r.Stdout) {
		t.Errorf("describe does not show tor-a's entry, its BFD state after its state, before the next entry:\n%s", r.Stdout)
	}
	bad := "apiVersion: juneau.loutres.me/v1alpha1\nkind: BGPNodeStatus\nmetadata: {name: columns-node-b}\n" +
		"status: {peersConfigured: 1, peersEstablished: 0, peers: [{name: tor-a, peerAddress: 10.225.51.1, state: Sleeping, since: '2030-01-02T03:04:05Z', prefixesAnnounced: 0}]}"
	if r := cp.Kubectl(ctx, bad, "apply", "-f", "-"); r.Err == nil || !strings.Contains(r.Stderr, `Unsupported value: "Sleeping"`) {
		t.Errorf("an unknown session state: err=%v stderr=%q, want a rejection", r.Err, r.Stderr)
	}
	badBFD := strings.Replace(bad, "state: Sleeping", "state: Established, stateBFD: Sideways", 1)
	if r := cp.Kubectl(ctx, badBFD, "apply", "-f", "-"); r.Err == nil || !strings.Contains(r.Stderr, `Unsupported value: "Sideways"`) {
		t.Errorf("an unknown BFD state: err=%v stderr=%q, want a rejection", r.Err, r.Stderr)
	}
}

// TestBGPAdvertisementSchema: only nodeName may change, agents select their own by
// spec.nodeName, and kubectl shows the Announced condition.
func TestBGPAdvertisementSchema(t *testing.T) {
	cp := framework.Shared(t)
	ctx := testContext(t)
	ad := "apiVersion: juneau.loutres.me/v1alpha1\nkind: BGPAdvertisement\nmetadata: {name: schema-bgpad}\n" +
		"spec: {externalNetwork: %s, address: %s, nodeName: %s}"
	if r := cp.Kubectl(ctx, fmt.Sprintf(ad, "bgp-net", "10.225.53.7", "node-a"), "apply", "-f", "-"); r.Err != nil {
		t.Fatal(r.Err)
	}
	t.Cleanup(func() { cp.Kubectl(ctx, "", "delete", "bgpad", "schema-bgpad", "--ignore-not-found") })
	if r := cp.Kubectl(ctx, fmt.Sprintf(ad, "bgp-net", "10.225.53.7", "node-b"), "apply", "-f", "-"); r.Err != nil {
		t.Errorf("moving to node-b: %v", r.Err)
	}
	for _, tc := range []struct{ manifest, want string }{
		{fmt.Sprintf(ad, "other-net", "10.225.53.7", "node-b"), "externalNetwork is immutable"},
		{fmt.Sprintf(ad, "bgp-net", "10.225.53.8", "node-b"), "address is immutable"},
	} {
		if r := cp.Kubectl(ctx, tc.manifest, "apply", "-f", "-"); r.Err == nil || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("update: err=%v stderr=%q, want %q", r.Err, r.Stderr, tc.want)
		}
	}
	for node, want := range map[string]string{"node-a": "", "node-b": "bgpadvertisement.juneau.loutres.me/schema-bgpad"} {
		r := cp.Kubectl(ctx, "", "get", "bgpad", "-o", "name", "--field-selector", "spec.nodeName="+node)
		if r.Err != nil || strings.TrimSpace(r.Stdout) != want {
			t.Errorf("bgpadvertisements with spec.nodeName=%s: %q %v, want %q", node, r.Stdout, r.Err, want)
		}
	}

	got, err := cp.Juneau.JuneauV1alpha1().BGPAdvertisements().Get(ctx, "schema-bgpad", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&got.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionAnnounced, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonAnnounced, Message: "announced to 1 of 1 Established peers", ObservedGeneration: got.Generation})
	if _, err := cp.Juneau.JuneauV1alpha1().BGPAdvertisements().UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := cp.Kubectl(ctx, "", "get", "bgpad", "schema-bgpad")
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if r.Err != nil || len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME EXTERNALNETWORK ADDRESS NODE ANNOUNCED AGE" ||
		!strings.HasPrefix(spaces.ReplaceAllString(lines[1], " "), "schema-bgpad bgp-net 10.225.53.7 node-b True ") {
		t.Errorf("kubectl get bgpadvertisement: %v\n%s", r.Err, r.Stdout)
	}
}
