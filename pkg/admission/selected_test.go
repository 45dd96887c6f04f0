package admission

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	juneaufake "github.com/loutres/juneau/pkg/generated/clientset/versioned/fake"
)

// TestLiveReChecksSelectByField: a live re-check lists only the objects in the way, by
// one of the CRD's selectableFields, in the namespace when the kind has one, and never
// a whole kind; what the server answers is filtered again.
func TestLiveReChecksSelectByField(t *testing.T) {
	om := func(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }
	juneau := juneaufake.NewClientset(
		&v1alpha1.ElasticIP{ObjectMeta: om("shop", "web"), Spec: v1alpha1.ElasticIPSpec{ExternalNetwork: "ext"}},
		&v1alpha1.ElasticIP{ObjectMeta: om("shop", "db"), Spec: v1alpha1.ElasticIPSpec{ExternalNetwork: "other"}},
		&v1alpha1.ARPAdvertisement{ObjectMeta: om("", "a"), Spec: v1alpha1.ARPAdvertisementSpec{Address: "10.225.51.7"}},
		&v1alpha1.ARPAdvertisement{ObjectMeta: om("", "b"), Spec: v1alpha1.ARPAdvertisementSpec{Address: "10.225.51.8"}},
		&v1alpha1.BGPAdvertisement{ObjectMeta: om("", "c"), Spec: v1alpha1.BGPAdvertisementSpec{Address: "10.225.51.9"}},
		&v1alpha1.BGPPeer{ObjectMeta: om("", "tor"), Spec: v1alpha1.BGPPeerSpec{PeerAddress: "10.225.51.1"}},
		&v1alpha1.NetworkInterface{ObjectMeta: om("shop", "web.eth0"), Spec: v1alpha1.NetworkInterfaceSpec{ElasticIP: "web"}},
		&v1alpha1.NetworkInterface{ObjectMeta: om("shop", "db.eth0")},
		&v1alpha1.ElasticIPAttachment{ObjectMeta: om("shop", "att"), Spec: v1alpha1.ElasticIPAttachmentSpec{
			ElasticIPRef: v1alpha1.ElasticIPReference{Name: "web"}, TargetRef: v1alpha1.AttachmentTarget{NetworkInterfaceName: "web.eth0"}}},
	)
	r := &reader{juneau: juneau, live: newLiveReads()}
	ctx := context.Background()
	juneau.ClearActions()
	for _, tc := range []struct {
		what                 string
		list                 func() (int, error)
		resource, ns, fields string
	}{
		{"ElasticIPs on ext", func() (int, error) { return len2(r.elasticIPsOn(ctx, "ext", true)) }, "elasticips", "", "spec.externalNetwork=ext"},
		{"ARPAdvertisements at 10.225.51.7", func() (int, error) { return len2(r.advertisementsAt(ctx, "10.225.51.7", true)) }, "arpadvertisements", "", "spec.address=10.225.51.7"},
		{"BGPAdvertisements at 10.225.51.9", func() (int, error) { return len2(r.bgpAdvertisementsAt(ctx, "10.225.51.9", true)) }, "bgpadvertisements", "", "spec.address=10.225.51.9"},
		{"BGPPeers at 10.225.51.1", func() (int, error) { return len2(r.peersAt(ctx, "10.225.51.1", true)) }, "bgppeers", "", "spec.peerAddress=10.225.51.1"},
		{"NetworkInterfaces naming web", func() (int, error) { return len2(r.nicsNaming(ctx, "shop", "web", true)) }, "networkinterfaces", "shop", "spec.elasticIP=web"},
		{"attachments of web", func() (int, error) { return len2(r.attachmentsOf(ctx, "shop", "web", false, true)) }, "elasticipattachments", "shop", "spec.elasticIPRef.name=web"},
		{"attachments of web.eth0", func() (int, error) { return len2(r.attachmentsOf(ctx, "shop", "web.eth0", true, true)) }, "elasticipattachments", "shop", "spec.targetRef.networkInterfaceName=web.eth0"},
	} {
		if got, err := tc.list(); err != nil || got != 1 {
			t.Errorf("%s: %d found (%v), want 1", tc.what, got, err)
		}
		actions := juneau.Actions()
		if len(actions) == 0 {
			t.Fatalf("%s: no list", tc.what)
		}
		l, ok := actions[0].(k8stesting.ListAction)
		if !ok || l.GetResource().Resource != tc.resource || l.GetNamespace() != tc.ns || l.GetListRestrictions().Fields.String() != tc.fields {
			t.Errorf("%s: listed %+v, want %s in %q with the field selector %s", tc.what, actions[0], tc.resource, tc.ns, tc.fields)
		}
		juneau.ClearActions()
	}
}

// len2 is the length of a list and its error.
func len2[T any](items []T, err error) (int, error) { return len(items), err }
