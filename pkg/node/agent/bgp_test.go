package agent

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned/fake"
	"github.com/loutres/juneau/pkg/node/bgp"
	"github.com/loutres/juneau/pkg/node/nft"
)

func bgpPeer(name, addr string, selector map[string]string, secret string) *v1alpha1.BGPPeer {
	p := &v1alpha1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.BGPPeerSpec{PeerAddress: addr, PeerASN: 64512, MyASN: 64513}}
	if selector != nil {
		p.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: selector}
	}
	if secret != "" {
		p.Spec.PasswordSecretRef = &v1alpha1.SecretKeyReference{Namespace: "juneau-system", Name: secret, Key: name}
	}
	return p
}

func bgpAd(name, addr, node string) *v1alpha1.BGPAdvertisement {
	return &v1alpha1.BGPAdvertisement{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
		Spec: v1alpha1.BGPAdvertisementSpec{ExternalNetwork: "bgp-net", Address: addr, NodeName: node}}
}

func nodeObject(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: labels}}
}

// passwords is an Inputs.Password of fixed answers by Secret name.
func passwords(answers map[string]error) func(v1alpha1.SecretKeyReference) (string, error) {
	return func(ref v1alpha1.SecretKeyReference) (string, error) {
		if err := answers[ref.Name]; err != nil {
			return "", err
		}
		return "pw-" + ref.Key, nil
	}
}

// The speaker peers with the BGPPeers whose selector takes this Node's labels, with
// their passwords; one whose password cannot be read is reported, one whose password is
// being read is held back; it announces the /32s of the BGPAdvertisements naming this
// Node whose address the Node serves.
func TestComputeBGP(t *testing.T) {
	in := Inputs{
		NodeName: "node-a", ExternalInterface: "ext0", IPv6NextHop: true,
		Nodes: []*corev1.Node{nodeObject("node-a", map[string]string{"rack": "a"}), nodeObject("node-b", map[string]string{"rack": "b"})},
		BGPPeers: []*v1alpha1.BGPPeer{
			bgpPeer("tor-b", "10.225.51.2", map[string]string{"rack": "b"}, ""),
			bgpPeer("tor-a", "10.225.51.1", map[string]string{"rack": "a"}, "juneau-bgp-passwords"),
			bgpPeer("spine", "10.225.60.1", nil, ""),
			bgpPeer("forbidden", "10.225.51.3", nil, "other"),
			bgpPeer("pending", "10.225.51.4", nil, "new"),
		},
		Password: passwords(map[string]error{"other": errors.New(`Secret "juneau-system/other" is forbidden`), "new": ErrPasswordPending}),
		Attachments: []*v1alpha1.ElasticIPAttachment{
			attachment("a", "node-a", "10.225.53.5", "10.244.1.5", v1alpha1.AttachmentAttached, true),
			attachment("b", "node-a", "10.225.53.6", "10.244.1.6", v1alpha1.AttachmentAttached, true),
			attachment("six", "node-a", "fd00:225:53::6", "fd00:244:1::6", v1alpha1.AttachmentAttached, true),
		},
		BGPAdvertisements: []*v1alpha1.BGPAdvertisement{
			bgpAd("eip-b", "10.225.53.6", "node-a"), movedAt(withCommunities(bgpAd("eip-a", "10.225.53.5", "node-a"), "65000:100", "65000:1:2"), 3),
			withCommunities(bgpAd("not-programmed", "10.225.53.7", "node-a"), "65000:7"), bgpAd("elsewhere", "10.225.53.8", "node-b"),
			bgpAd("eip-six", "fd00:225:53::6", "node-a"), bgpAd("six-elsewhere", "fd00:225:53::8", "node-b"),
		},
	}
	d := Compute(in).BGP
	var names []string
	for _, p := range d.Peers {
		names = append(names, p.Name)
		switch p.Name {
		case "tor-a":
			if p.Password != "pw-tor-a" || p.Problem != "" || p.Address != netip.MustParseAddr("10.225.51.1") || p.PeerASN != 64512 || p.MyASN != 64513 {
				t.Errorf("tor-a: %+v", p)
			}
		case "forbidden":
			if !strings.Contains(p.Problem, `cannot read the TCP-MD5 password (spec.passwordSecretRef): Secret "juneau-system/other" is forbidden`) {
				t.Errorf("forbidden: problem %q", p.Problem)
			}
		}
	}
	if want := []string{"forbidden", "spine", "tor-a"}; !slices.Equal(names, want) {
		t.Errorf("peers %v, want %v (tor-b selects node-b only; pending is held back)", names, want)
	}
	if !slices.Equal(d.Pending, []string{"pending"}) {
		t.Errorf("pending %v", d.Pending)
	}
	wantSecrets := []types.NamespacedName{{Namespace: "juneau-system", Name: "juneau-bgp-passwords"}, {Namespace: "juneau-system", Name: "new"},
		{Namespace: "juneau-system", Name: "other"}}
	if !slices.Equal(d.Secrets, wantSecrets) {
		t.Errorf("secrets %v, want %v", d.Secrets, wantSecrets)
	}
	wantPrefixes := []netip.Prefix{netip.MustParsePrefix("10.225.53.5/32"), netip.MustParsePrefix("10.225.53.6/32"),
		netip.MustParsePrefix("fd00:225:53::6/128")}
	if !slices.Equal(d.Announce, wantPrefixes) {
		t.Errorf("announce %v, want %v", d.Announce, wantPrefixes)
	}
	if len(d.NoIPv6NextHop) != 0 {
		t.Errorf("NoIPv6NextHop %v with a next hop", d.NoIPv6NextHop)
	}
	created := in.BGPAdvertisements[1].CreationTimestamp.Time
	want := map[netip.Prefix]bgp.PathAttributes{
		netip.MustParsePrefix("10.225.53.5/32"):     {Communities: []string{"65000:100", "65000:1:2"}, MED: bgp.MEDOf(created, 3)},
		netip.MustParsePrefix("10.225.53.6/32"):     {MED: bgp.MEDOf(time.Time{}, 1)},
		netip.MustParsePrefix("fd00:225:53::6/128"): {MED: bgp.MEDOf(time.Time{}, 1)},
	}
	if !maps.EqualFunc(d.Attributes, want, func(a, b bgp.PathAttributes) bool {
		return slices.Equal(a.Communities, b.Communities) && a.MED == b.MED
	}) {
		t.Errorf("attributes %v, want %v (those of the announced prefixes, MEDs from creation and generation)", d.Attributes, want)
	}

	// Without an IPv6 next hop, the /128s of this Node's advertisements (served or not)
	// are not announced but reported; other Nodes' are none of its business.
	in.IPv6NextHop = false
	in.BGPAdvertisements = append(in.BGPAdvertisements, bgpAd("six-not-programmed", "fd00:225:53::7", "node-a"))
	d = Compute(in).BGP
	if want := wantPrefixes[:2]; !slices.Equal(d.Announce, want) {
		t.Errorf("announce without an IPv6 next hop %v, want %v", d.Announce, want)
	}
	if want := []netip.Prefix{netip.MustParsePrefix("fd00:225:53::6/128"), netip.MustParsePrefix("fd00:225:53::7/128")}; !slices.Equal(d.NoIPv6NextHop, want) {
		t.Errorf("NoIPv6NextHop %v, want %v", d.NoIPv6NextHop, want)
	}
	// An IPv4-only Node without a next hop needs none.
	in.BGPAdvertisements = in.BGPAdvertisements[:4]
	if d := Compute(in).BGP; len(d.NoIPv6NextHop) != 0 || len(d.Announce) != 2 {
		t.Errorf("IPv4 only, no IPv6 next hop: announce %v, NoIPv6NextHop %v", d.Announce, d.NoIPv6NextHop)
	}

	// A Node the cache does not know yet is selected by nobody.
	in.Nodes = nil
	if d := Compute(in).BGP; len(d.Peers) != 0 {
		t.Errorf("peers of an unknown Node: %v", d.Peers)
	}
}

func TestAnnouncedCondition(t *testing.T) {
	ad := bgpAd("eip-a", "10.225.53.5", "node-a")
	established := bgp.PeerStatus{Name: "tor-a", State: v1alpha1.BGPSessionEstablished, PrefixesAnnounced: 1}
	wrong := bgp.PeerStatus{Name: "tor-b", State: v1alpha1.BGPSessionWrongASN}
	sent := []netip.Prefix{netip.MustParsePrefix("10.225.53.5/32")}
	for _, tc := range []struct {
		name   string
		served bool
		st     bgp.Status
		status metav1.ConditionStatus
		reason string
		says   string
	}{
		{"announced", true, bgp.Status{Peers: []bgp.PeerStatus{established, wrong}, Announced: sent}, metav1.ConditionTrue, v1alpha1.ReasonAnnounced,
			`10.225.53.5/32 announced by Node "node-a" to 1 of its 2 BGP peers`},
		{"not programmed", false, bgp.Status{Peers: []bgp.PeerStatus{established}}, metav1.ConditionFalse, v1alpha1.ReasonNotProgrammed,
			"traffic to 10.225.53.5 is not programmed"},
		{"no peer", true, bgp.Status{Announced: sent}, metav1.ConditionFalse, v1alpha1.ReasonNoPeer, `no BGPPeer selects Node "node-a"`},
		{"no Established peer", true, bgp.Status{Peers: []bgp.PeerStatus{wrong}, Announced: sent}, metav1.ConditionFalse, v1alpha1.ReasonNoEstablishedPeer,
			`no BGP session of Node "node-a" is Established: "tor-b" is WrongASN`},
		{"IPv6 taken by no session", true, bgp.Status{Peers: []bgp.PeerStatus{established}, Announced: []netip.Prefix{netip.MustParsePrefix("fd00:225:53::5/128")}},
			metav1.ConditionFalse, v1alpha1.ReasonNoEstablishedPeer, "fd00:225:53::5/128 not yet sent in the 1 Established BGP sessions of Node \"node-a\": IPv6 goes only to routers that take ipv6-unicast"},
		{"IPv6 without a next hop", false, bgp.Status{Peers: []bgp.PeerStatus{established}},
			metav1.ConditionFalse, v1alpha1.ReasonNoIPv6NextHop, `the node agent of Node "node-a" has no IPv6 next hop for fd00:225:53::5/128`},
		{"IPv4 without an IPv6 next hop", true, bgp.Status{Peers: []bgp.PeerStatus{established, wrong}, Announced: sent}, metav1.ConditionTrue, v1alpha1.ReasonAnnounced,
			`10.225.53.5/32 announced`},
		{"Established, not sent yet", true, bgp.Status{Peers: []bgp.PeerStatus{{Name: "tor-a", State: v1alpha1.BGPSessionEstablished}}, Announced: sent},
			metav1.ConditionFalse, v1alpha1.ReasonNoEstablishedPeer, "not yet sent in the 1 Established BGP sessions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := ad
			if strings.HasPrefix(tc.name, "IPv6") {
				a = bgpAd("eip-six", "fd00:225:53::5", "node-a")
			}
			nextHop6 := !strings.Contains(tc.name, "without")
			c := announcedCondition("node-a", a, tc.served, nextHop6, tc.st)
			if c.Status != tc.status || c.Reason != tc.reason || !strings.Contains(c.Message, tc.says) || c.ObservedGeneration != 1 {
				t.Errorf("%s/%s %q (generation %d), want %s/%s with %q", c.Status, c.Reason, c.Message, c.ObservedGeneration, tc.status, tc.reason, tc.says)
			}
		})
	}
}

// fakeSpeaker records what the agent asks of the BGP speaker and reports a status the
// test sets.
type fakeSpeaker struct {
	mu       sync.Mutex
	peerSets [][]bgp.Peer
	prefixes []netip.Prefix
	// attributes of the last SetAnnouncements.
	attributes map[netip.Prefix]bgp.PathAttributes
	status     bgp.Status
	changed    chan struct{}
	nextHop6   netip.Addr
}

func (s *fakeSpeaker) SetPeers(p []bgp.Peer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.peerSets = append(s.peerSets, p)
	// As the real speaker: a new peer is Connecting until its session says otherwise.
	var peers []bgp.PeerStatus
	for _, peer := range p {
		st := bgp.PeerStatus{Name: peer.Name, Address: peer.Address, State: v1alpha1.BGPSessionConnecting}
		if i := slices.IndexFunc(s.status.Peers, func(q bgp.PeerStatus) bool { return q.Name == peer.Name }); i >= 0 {
			st = s.status.Peers[i]
		}
		peers = append(peers, st)
	}
	s.status.Peers = peers
}

func (s *fakeSpeaker) SetAnnouncements(p []netip.Prefix, with map[netip.Prefix]bgp.PathAttributes) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prefixes, s.attributes = p, with
	return nil
}

func (s *fakeSpeaker) Status() bgp.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

func (s *fakeSpeaker) Changed() <-chan struct{} { return s.changed }

func (s *fakeSpeaker) NextHop6() netip.Addr { return s.nextHop6 }

// The first set of peers waits for the password Secrets; then the BGPNodeStatus (owned
// by the Node) and the Announced conditions follow the speaker's status, written only
// when they change.
func TestApplyBGP(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ad := bgpAd("eip-a", "10.225.53.5", "node-a")
	client := fake.NewClientset(ad)
	sp := &fakeSpeaker{changed: make(chan struct{})}
	a := New(Config{NodeName: "node-a", ExternalInterface: "ext0", Clock: clk}, Clients{Juneau: client}, Listers{},
		&fakeNAT{syncs: make(chan nft.DesiredState, 10)}, fakeARP{}, nil, nil, nil)
	a.UseBGP(sp, nil)
	_, ctx := ktesting.NewTestContext(t)
	in := Inputs{NodeName: "node-a", ExternalInterface: "ext0", Nodes: []*corev1.Node{nodeObject("node-a", nil)},
		BGPPeers:    []*v1alpha1.BGPPeer{bgpPeer("tor-a", "10.225.51.1", nil, "juneau-bgp-passwords")},
		Attachments: []*v1alpha1.ElasticIPAttachment{attachment("a", "node-a", "10.225.53.5", "10.244.1.5", v1alpha1.AttachmentAttached, true)},
		Password:    passwords(map[string]error{"juneau-bgp-passwords": ErrPasswordPending}),
	}
	apply := func() {
		t.Helper()
		cur, err := client.JuneauV1alpha1().BGPAdvertisements().Get(ctx, "eip-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		in.BGPAdvertisements = []*v1alpha1.BGPAdvertisement{cur}
		if _, err := a.applyBGP(ctx, in, Compute(in)); err != nil {
			t.Fatal(err)
		}
	}
	apply()
	if len(sp.peerSets) != 0 {
		t.Fatalf("peers set %v while the password Secret is being read", sp.peerSets)
	}
	in.Password = passwords(nil)
	apply()
	if len(sp.peerSets) != 1 || len(sp.peerSets[0]) != 1 || sp.peerSets[0][0].Password != "pw-tor-a" {
		t.Fatalf("peer sets %v, want tor-a with its password", sp.peerSets)
	}
	if !slices.Equal(sp.prefixes, []netip.Prefix{netip.MustParsePrefix("10.225.53.5/32")}) {
		t.Errorf("announcements %v", sp.prefixes)
	}
	ns, err := client.JuneauV1alpha1().BGPNodeStatuses().Get(ctx, "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Status.PeersConfigured != 1 || ns.Status.PeersEstablished != 0 || len(ns.Status.Peers) != 1 ||
		ns.Status.Peers[0].State != v1alpha1.BGPSessionConnecting ||
		len(ns.OwnerReferences) != 1 || ns.OwnerReferences[0].Kind != "Node" || ns.OwnerReferences[0].UID != "uid-node-a" {
		t.Errorf("BGPNodeStatus %+v %+v, want tor-a Connecting, owned by Node node-a", ns.Status, ns.OwnerReferences)
	}
	got, _ := client.JuneauV1alpha1().BGPAdvertisements().Get(ctx, "eip-a", metav1.GetOptions{})
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionAnnounced); c == nil || c.Reason != v1alpha1.ReasonNoEstablishedPeer {
		t.Errorf("Announced %+v, want False/NoEstablishedPeer while tor-a connects", c)
	}

	since := clk.Now()
	sp.status = bgp.Status{Peers: []bgp.PeerStatus{{Name: "tor-a", Address: netip.MustParseAddr("10.225.51.1"),
		State: v1alpha1.BGPSessionEstablished, Since: since, PrefixesAnnounced: 1, BFD: v1alpha1.BFDUp}},
		Announced: []netip.Prefix{netip.MustParsePrefix("10.225.53.5/32")}}
	client.ClearActions()
	apply()
	ns, _ = client.JuneauV1alpha1().BGPNodeStatuses().Get(ctx, "node-a", metav1.GetOptions{})
	if ns.Status.PeersConfigured != 1 || ns.Status.PeersEstablished != 1 || len(ns.Status.Peers) != 1 ||
		ns.Status.Peers[0].State != v1alpha1.BGPSessionEstablished || ns.Status.Peers[0].PeerAddress != "10.225.51.1" ||
		ns.Status.Peers[0].StateBFD != v1alpha1.BFDUp {
		t.Errorf("BGPNodeStatus %+v", ns.Status)
	}
	got, _ = client.JuneauV1alpha1().BGPAdvertisements().Get(ctx, "eip-a", metav1.GetOptions{})
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionAnnounced); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != 1 {
		t.Errorf("Announced %+v, want True for generation 1", c)
	}
	client.ClearActions()
	apply()
	for _, act := range client.Actions() {
		if act.GetVerb() == "patch" {
			t.Errorf("an unchanged status was written again: %v %s", act.GetVerb(), act.GetResource().Resource)
		}
	}
	// A change of the BFD state alone is written.
	sp.status.Peers[0].BFD = v1alpha1.BFDDown
	apply()
	ns, _ = client.JuneauV1alpha1().BGPNodeStatuses().Get(ctx, "node-a", metav1.GetOptions{})
	if len(ns.Status.Peers) != 1 || ns.Status.Peers[0].StateBFD != v1alpha1.BFDDown {
		t.Errorf("BGPNodeStatus after BFD went down: %+v", ns.Status)
	}
}

// A Node without an IPv6 next hop announces its IPv4 addresses, leaves its IPv6 ones out
// (the speaker is not even asked), says why on their advertisements, and logs it once,
// at info level, when the first one appears: not at start, and not on a Node that has
// none to announce.
func TestApplyBGPWithoutIPv6NextHop(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	four, six := bgpAd("eip-four", "10.225.53.5", "node-a"), bgpAd("eip-six", "fd00:225:53::6", "node-a")
	client := fake.NewClientset(four, six)
	sp := &fakeSpeaker{changed: make(chan struct{})}
	a := New(Config{NodeName: "node-a", ExternalInterface: "ext0", Clock: clk}, Clients{Juneau: client}, Listers{},
		&fakeNAT{syncs: make(chan nft.DesiredState, 10)}, fakeARP{}, nil, nil, nil)
	a.UseBGP(sp, nil)
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx := klog.NewContext(context.Background(), logger)
	logs := logger.GetSink().(ktesting.Underlier).GetBuffer()
	in := Inputs{NodeName: "node-a", ExternalInterface: "ext0", Nodes: []*corev1.Node{nodeObject("node-a", nil)},
		BGPPeers: []*v1alpha1.BGPPeer{bgpPeer("tor-a", "10.225.51.1", nil, "")},
		Attachments: []*v1alpha1.ElasticIPAttachment{
			attachment("four", "node-a", "10.225.53.5", "10.244.1.5", v1alpha1.AttachmentAttached, true),
			attachment("six", "node-a", "fd00:225:53::6", "fd00:244:1::6", v1alpha1.AttachmentAttached, true),
		},
		BGPAdvertisements: []*v1alpha1.BGPAdvertisement{four},
	}
	const told = "no IPv6 next hop"
	apply := func() {
		t.Helper()
		in.IPv6NextHop = sp.NextHop6().IsValid()
		if _, err := a.applyBGP(ctx, in, Compute(in)); err != nil {
			t.Fatal(err)
		}
	}
	apply()
	if strings.Contains(logs.String(), told) {
		t.Errorf("logged a missing IPv6 next hop while the Node has no IPv6 address to announce:\n%s", logs.String())
	}
	in.BGPAdvertisements = []*v1alpha1.BGPAdvertisement{four, six}
	apply()
	apply()
	if !slices.Equal(sp.prefixes, []netip.Prefix{netip.MustParsePrefix("10.225.53.5/32")}) {
		t.Errorf("announcements %v, want the IPv4 /32 only", sp.prefixes)
	}
	got, err := client.JuneauV1alpha1().BGPAdvertisements().Get(ctx, "eip-six", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionAnnounced); c == nil || c.Status != metav1.ConditionFalse ||
		c.Reason != v1alpha1.ReasonNoIPv6NextHop || !strings.Contains(c.Message, "--bgp-ipv6-next-hop") {
		t.Errorf("Announced of the IPv6 advertisement %+v, want False/NoIPv6NextHop naming the flag", c)
	}
	if n := strings.Count(logs.String(), told); n != 1 {
		t.Errorf("the missing IPv6 next hop logged %d times, want once:\n%s", n, logs.String())
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.HasPrefix(line, "E") {
			t.Errorf("an error-level line: %s", line)
		}
	}
}

// movedAt: the advertisement was created an hour ago and moved generation-1 times.
func movedAt(ad *v1alpha1.BGPAdvertisement, generation int64) *v1alpha1.BGPAdvertisement {
	ad.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	ad.Generation = generation
	return ad
}

func withCommunities(ad *v1alpha1.BGPAdvertisement, c ...string) *v1alpha1.BGPAdvertisement {
	ad.Spec.Communities = c
	return ad
}
