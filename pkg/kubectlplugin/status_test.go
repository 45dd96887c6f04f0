package kubectlplugin

import (
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func TestStatusRows(t *testing.T) {
	f := healthy()
	f.ElasticIP.UID = "u1"
	f.ARP.Labels = map[string]string{v1alpha1.LabelOwnerUID: "u1"}
	idle := v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "idle", UID: "u2"},
		Status: v1alpha1.ElasticIPStatus{Phase: v1alpha1.ElasticIPAvailable, Address: "10.225.51.9"}}
	bgpEIP := v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "routed", UID: "u3"},
		Status: v1alpha1.ElasticIPStatus{Address: "10.225.52.1"}}
	bgp := v1alpha1.BGPAdvertisement{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1alpha1.LabelOwnerUID: "u3"}},
		Spec: v1alpha1.BGPAdvertisementSpec{NodeName: "node-b"},
		Status: v1alpha1.BGPAdvertisementStatus{Conditions: []metav1.Condition{
			cond(v1alpha1.ConditionAnnounced, metav1.ConditionFalse, v1alpha1.ReasonNoEstablishedPeer)}}}
	rows := StatusRows([]v1alpha1.ElasticIP{*f.ElasticIP, idle, bgpEIP}, []v1alpha1.ARPAdvertisement{*f.ARP}, []v1alpha1.BGPAdvertisement{bgp})
	var b bytes.Buffer
	if err := WriteStatus(&b, rows); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"NAMESPACE  NAME     ADDRESS      USER                            NODE    WIRE                   ATTACHED",
		"a          idle     10.225.51.9  -                               -       -                      -",
		"shop       routed   10.225.52.1  -                               node-b  BGP NoEstablishedPeer  -",
		"shop       web-eip  10.225.51.5  ElasticIPAttachment/web-attach  node-a  ARP answering          True Attached",
	}
	if got := strings.Split(strings.TrimSpace(b.String()), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), strings.Join(want, "\n"))
	}
}
