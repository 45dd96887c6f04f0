package validation

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func nic(mutate ...func(*v1alpha1.NetworkInterface)) *v1alpha1.NetworkInterface {
	n := &v1alpha1.NetworkInterface{
		ObjectMeta: metav1.ObjectMeta{Name: "web.eth0", Namespace: "default"},
		Spec: v1alpha1.NetworkInterfaceSpec{
			PodRef: v1alpha1.PodReference{Name: "web", UID: "pod-uid", Interface: "eth0"},
		},
	}
	for _, m := range mutate {
		m(n)
	}
	return n
}

func TestValidateNetworkInterface(t *testing.T) {
	tests := []struct {
		name string
		nic  *v1alpha1.NetworkInterface
		want []wantErr
	}{
		{name: "Vpc NIC", nic: nic()},
		{name: "direct NIC on a node", nic: nic(func(n *v1alpha1.NetworkInterface) {
			n.Spec.NodeName, n.Spec.ElasticIP, n.Spec.AllocationIdentity = "node-1", "web-eip", "vmi.vm1"
		})},
		{name: "15-character interface", nic: nic(func(n *v1alpha1.NetworkInterface) {
			n.Name, n.Spec.PodRef.Interface = "web.abcdefghijklmno", "abcdefghijklmno"
		})},
		{name: "name mismatch", nic: nic(func(n *v1alpha1.NetworkInterface) { n.Name = "web.ext0" }),
			want: []wantErr{invalid("metadata.name")}},
		{name: "podRef empty", nic: nic(func(n *v1alpha1.NetworkInterface) { n.Spec.PodRef = v1alpha1.PodReference{} }),
			want: []wantErr{required("spec.podRef.name"), required("spec.podRef.uid"), required("spec.podRef.interface")}},
		{name: "interface too long", nic: nic(func(n *v1alpha1.NetworkInterface) {
			n.Name, n.Spec.PodRef.Interface = "web.abcdefghijklmnop", "abcdefghijklmnop"
		}), want: []wantErr{invalid("spec.podRef.interface")}},
		{name: "interface not a label", nic: nic(func(n *v1alpha1.NetworkInterface) {
			n.Name, n.Spec.PodRef.Interface = "web.Eth0", "Eth0"
		}), want: []wantErr{invalid("spec.podRef.interface")}},
		{name: "namespaced ElasticIP", nic: nic(func(n *v1alpha1.NetworkInterface) { n.Spec.ElasticIP = "ns/eip" }),
			want: []wantErr{invalid("spec.elasticIP")}},
		{name: "node name invalid", nic: nic(func(n *v1alpha1.NetworkInterface) { n.Spec.NodeName = "Node 1" }),
			want: []wantErr{invalid("spec.nodeName")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expectErrs(t, ValidateNetworkInterface(tt.nic), tt.want...)
		})
	}
	expectDetail(t, ValidateNetworkInterface(nic(func(n *v1alpha1.NetworkInterface) { n.Name = "web.ext0" })),
		"metadata.name", `"web.ext0"`, `must be "web.eth0"`)
	expectDetail(t, ValidateNetworkInterface(nic(func(n *v1alpha1.NetworkInterface) {
		n.Name, n.Spec.PodRef.Interface = "web.abcdefghijklmnop", "abcdefghijklmnop"
	})), "spec.podRef.interface", "at most 15 characters")
}

func TestValidateNetworkInterfaceUpdate(t *testing.T) {
	onNode := func(node string) func(*v1alpha1.NetworkInterface) {
		return func(n *v1alpha1.NetworkInterface) { n.Spec.NodeName = node }
	}
	withEIP := func(name string) func(*v1alpha1.NetworkInterface) {
		return func(n *v1alpha1.NetworkInterface) { n.Spec.ElasticIP = name }
	}
	tests := []struct {
		name     string
		new, old *v1alpha1.NetworkInterface
		want     []wantErr
	}{
		{name: "node set once", new: nic(onNode("node-1")), old: nic()},
		{name: "node kept", new: nic(onNode("node-1")), old: nic(onNode("node-1"))},
		{name: "identity changed", new: nic(func(n *v1alpha1.NetworkInterface) { n.Spec.AllocationIdentity = "vmi.x" }), old: nic()},
		{name: "node moved", new: nic(onNode("node-2")), old: nic(onNode("node-1")),
			want: []wantErr{invalid("spec.nodeName")}},
		{name: "node cleared", new: nic(), old: nic(onNode("node-1")),
			want: []wantErr{invalid("spec.nodeName")}},
		{name: "pod uid changed", new: nic(func(n *v1alpha1.NetworkInterface) { n.Spec.PodRef.UID = "other" }), old: nic(),
			want: []wantErr{invalid("spec.podRef.uid")}},
		{name: "pod renamed", new: nic(func(n *v1alpha1.NetworkInterface) { n.Name, n.Spec.PodRef.Name = "api.eth0", "api" }), old: nic(),
			want: []wantErr{invalid("spec.podRef.name")}},
		{name: "elasticIP added", new: nic(withEIP("e1")), old: nic(),
			want: []wantErr{invalid("spec.elasticIP")}},
		{name: "elasticIP changed", new: nic(withEIP("e2")), old: nic(withEIP("e1")),
			want: []wantErr{invalid("spec.elasticIP")}},
		{name: "elasticIP removed", new: nic(), old: nic(withEIP("e1")),
			want: []wantErr{invalid("spec.elasticIP")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expectErrs(t, ValidateNetworkInterfaceUpdate(tt.new, tt.old), tt.want...)
		})
	}
	expectDetail(t, ValidateNetworkInterfaceUpdate(nic(onNode("node-2")), nic(onNode("node-1"))), "spec.nodeName", `already "node-1"`)
}

func arpAd(network, address, node string) *v1alpha1.ARPAdvertisement {
	return &v1alpha1.ARPAdvertisement{
		ObjectMeta: metav1.ObjectMeta{Name: "eip-default-web"},
		Spec:       v1alpha1.ARPAdvertisementSpec{ExternalNetwork: network, Address: address, NodeName: node},
	}
}

func TestValidateARPAdvertisement(t *testing.T) {
	expectErrs(t, ValidateARPAdvertisement(arpAd("ext-net", "10.225.51.5", "node-1")))
	expectErrs(t, ValidateARPAdvertisement(arpAd("", "", "")),
		required("spec.externalNetwork"), required("spec.address"), required("spec.nodeName"))
	expectErrs(t, ValidateARPAdvertisement(arpAd("ext_net", "10.225.51.5", "node-1")), invalid("spec.externalNetwork"))
	expectErrs(t, ValidateARPAdvertisement(arpAd("ext-net", "10.225.51.005", "node-1")), invalid("spec.address"))
	expectErrs(t, ValidateARPAdvertisement(arpAd("ext-net", "10.225.51.5", "Node_1")), invalid("spec.nodeName"))
	// An IPv6 address is answered by Neighbor Discovery; it is the same kind.
	expectErrs(t, ValidateARPAdvertisement(arpAd("ext-net", "fd00:225:51::5", "node-1")))
	expectErrs(t, ValidateARPAdvertisement(arpAd("ext-net", "fd00:225:51:0::5", "node-1")), invalid("spec.address"))
}

func TestValidateARPAdvertisementUpdate(t *testing.T) {
	old := arpAd("ext-net", "10.225.51.5", "node-1")
	expectErrs(t, ValidateARPAdvertisementUpdate(arpAd("ext-net", "10.225.51.5", "node-2"), old))
	expectErrs(t, ValidateARPAdvertisementUpdate(arpAd("ext-net", "10.225.51.6", "node-1"), old), invalid("spec.address"))
	expectErrs(t, ValidateARPAdvertisementUpdate(arpAd("ext-2", "10.225.51.5", "node-1"), old), invalid("spec.externalNetwork"))
	expectErrs(t, ValidateARPAdvertisementUpdate(arpAd("ext-net", "10.225.51.5", ""), old), required("spec.nodeName"))
}
