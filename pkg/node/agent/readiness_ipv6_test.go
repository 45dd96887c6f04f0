package agent

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	listers "github.com/loutres/juneau/pkg/generated/listers/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/node/bgp"
)

// TestReadinessIPv6: a Pod with an IPv4 and an IPv6 ElasticIP on an arp network is
// ready once both are translated and answered, the IPv6 one by NDP; without the NDP
// answer it waits and says so.
func TestReadinessIPv6(t *testing.T) {
	v4 := attachment("dual-4", "node-a", "10.225.51.5", "10.244.1.5", v1alpha1.AttachmentAttached, true)
	v6 := attachment("dual-6", "node-a", "2001:db8::5", "fd00:10:244:1::5", v1alpha1.AttachmentAttached, true)
	for _, a := range []*v1alpha1.ElasticIPAttachment{v4, v6} {
		a.Spec = v1alpha1.ElasticIPAttachmentSpec{ElasticIPRef: v1alpha1.ElasticIPReference{Name: a.Name},
			TargetRef: v1alpha1.AttachmentTarget{NetworkInterfaceName: "dual.eth0"}}
	}
	in := Inputs{NodeName: "node-a", ExternalInterface: "ext0", Attachments: []*v1alpha1.ElasticIPAttachment{v4, v6},
		Advertisements: []*v1alpha1.ARPAdvertisement{
			{ObjectMeta: metav1.ObjectMeta{Name: "eip-default-dual-4"}, Spec: v1alpha1.ARPAdvertisementSpec{Address: "10.225.51.5", NodeName: "node-a"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "eip-default-dual-6"}, Spec: v1alpha1.ARPAdvertisementSpec{Address: "2001:db8::5", NodeName: "node-a"}},
		}}
	net := &v1alpha1.ExternalNetwork{ObjectMeta: metav1.ObjectMeta{Name: "ext-net"}, Spec: v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseARP}}
	eips := ElasticIPMap{}
	for _, n := range []string{"dual-4", "dual-6"} {
		eips["default/"+n] = &v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "default"}, Spec: v1alpha1.ElasticIPSpec{ExternalNetwork: "ext-net"}}
	}
	nic := &v1alpha1.NetworkInterface{ObjectMeta: metav1.ObjectMeta{Name: "dual.eth0", Namespace: "default"},
		Spec: v1alpha1.NetworkInterfaceSpec{PodRef: v1alpha1.PodReference{Name: "dual", UID: "uid-dual"}, NodeName: "node-a"}}
	r := ReadinessInputs{Pods: []*corev1.Pod{gatedPod("dual")}, NICs: []*v1alpha1.NetworkInterface{nic}, ElasticIPs: eips,
		Networks: map[string]*v1alpha1.ExternalNetwork{"ext-net": net}}

	d := Compute(in)
	if got := ComputeReadiness(in, d, r); len(got) != 1 || !got[0].Ready || !strings.Contains(got[0].Message, "dual-6 (2001:db8::5)") {
		t.Errorf("both programmed: %+v", got)
	}
	d.NDP = nil
	if got := ComputeReadiness(in, d, r); len(got) != 1 || got[0].Ready || !strings.Contains(got[0].Message, `NDP answer for "2001:db8::5"`) {
		t.Errorf("without the NDP answer: %+v", got)
	}
}

// The gate reads "announced" from the speaker's status through readinessInputs, for the
// address's own host prefix: an IPv6 ElasticIP announced as a /128 to an Established
// peer counts, as an IPv4 one announced as a /32 does.
func TestReadinessInputsAnnouncedInBothFamilies(t *testing.T) {
	a := New(Config{NodeName: "node-a", ExternalInterface: "ext0"}, Clients{}, Listers{
		Pods:     corelisters.NewPodLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
		Networks: listers.NewExternalNetworkLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
	}, nil, nil, nil, nil, nil)
	status := bgp.Status{
		Peers:     []bgp.PeerStatus{{Name: "router", State: v1alpha1.BGPSessionEstablished, PrefixesAnnounced: 2, IPv6Announced: 1}},
		Announced: []netip.Prefix{netip.MustParsePrefix("10.225.53.5/32"), netip.MustParsePrefix("fd00:225:53::5/128")},
	}
	r, err := a.readinessInputs(Inputs{}, status)
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]bool{"10.225.53.5": true, "fd00:225:53::5": true, "10.225.53.6": false, "fd00:225:53::6": false} {
		if got := r.Announced(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Announced(%s) = %v, want %v", addr, got, want)
		}
	}
}
