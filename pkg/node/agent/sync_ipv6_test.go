package agent

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/node/nft"
)

// TestSyncHandsAddressesByFamily: one sync gives the IPv4 addresses to the ARP
// replier and the IPv6 ones to the NDP responder, marks each advertisement Answering
// with the protocol that answers it, and leaves out (and reports) an IPv6 ElasticIP
// attached to an IPv4 Pod IP.
func TestSyncHandsAddressesByFamily(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	var ads []*v1alpha1.ARPAdvertisement
	for name, address := range map[string]string{"eip-default-v4": "10.225.51.5", "eip-default-v6": "2001:db8::5", "eip-default-mixed": "2001:db8::6"} {
		ads = append(ads, &v1alpha1.ARPAdvertisement{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ARPAdvertisementSpec{Address: address, NodeName: "node-a"}})
	}
	client, ls := syncFixture(t, ctx, ads,
		attachment("v4", "node-a", "10.225.51.5", "10.244.1.5", v1alpha1.AttachmentAttached, true),
		attachment("v6", "node-a", "2001:db8::5", "fd00:10:244:1::5", v1alpha1.AttachmentAttached, true),
		attachment("mixed", "node-a", "2001:db8::6", "10.244.1.6", v1alpha1.AttachmentAttached, true),
	)
	arp, ndp := &recordingARP{}, &recordingARP{}
	a := New(Config{NodeName: "node-a", ExternalInterface: "ext0", ExternalMAC: "02:00:00:00:00:01"}, Clients{Juneau: client}, ls,
		checkingNAT{}, arp, ndp, nil, nil)

	if err := a.sync(ctx); !errors.Is(err, nft.ErrInvalidMapping) || !strings.Contains(err.Error(), "different families") {
		t.Fatalf("sync: %v, want the mixed-family mapping reported", err)
	}
	if want := []netip.Addr{netip.MustParseAddr("10.225.51.5")}; !slices.Equal(arp.addrs, want) {
		t.Errorf("ARP answers %v, want %v", arp.addrs, want)
	}
	if want := []netip.Addr{netip.MustParseAddr("2001:db8::5")}; !slices.Equal(ndp.addrs, want) {
		t.Errorf("NDP answers %v, want %v", ndp.addrs, want)
	}
	for name, want := range map[string]string{"eip-default-v4": "answering ARP", "eip-default-v6": "answering NDP", "eip-default-mixed": ""} {
		got, err := client.JuneauV1alpha1().ARPAdvertisements().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionAnswering)
		switch {
		case want == "" && c != nil:
			t.Errorf("%s: Answering %+v, want none", name, c)
		case want != "" && (c == nil || !strings.HasPrefix(c.Message, want)):
			t.Errorf("%s: Answering %+v, want a message starting %q", name, c, want)
		}
	}
}
