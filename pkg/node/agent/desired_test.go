package agent

import (
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/node/nft"
)

func attachment(name, node, eip, pod string, phase v1alpha1.AttachmentPhase, ready bool) *v1alpha1.ElasticIPAttachment {
	status := metav1.ConditionFalse
	if ready {
		status = metav1.ConditionTrue
	}
	return &v1alpha1.ElasticIPAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Status: v1alpha1.ElasticIPAttachmentStatus{Phase: phase, ElasticIP: eip, PodIP: pod, NodeName: node,
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: status}}},
	}
}

func TestCompute(t *testing.T) {
	deleting := attachment("deleting", "node-a", "10.225.51.9", "10.244.1.9", v1alpha1.AttachmentAttached, true)
	deleting.DeletionTimestamp = &metav1.Time{}
	in := Inputs{
		NodeName: "node-a", ExternalInterface: "ext0",
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
		Attachments: []*v1alpha1.ElasticIPAttachment{
			attachment("b", "node-a", "10.225.51.6", "10.244.1.6", v1alpha1.AttachmentAttached, true),
			attachment("a", "node-a", "10.225.51.5", "10.244.1.5", v1alpha1.AttachmentAttached, true),
			attachment("pending", "node-a", "10.225.51.7", "10.244.1.7", v1alpha1.AttachmentPending, false),
			attachment("elsewhere", "node-b", "10.225.51.8", "10.244.2.8", v1alpha1.AttachmentAttached, true),
			attachment("elsewhere-pending", "node-b", "10.225.51.12", "10.244.2.12", v1alpha1.AttachmentPending, false),
			attachment("no-node", "", "10.225.51.13", "10.244.2.13", v1alpha1.AttachmentAttached, true),
			attachment("not-ready", "node-a", "10.225.51.10", "10.244.1.10", v1alpha1.AttachmentAttached, false),
			attachment("no-pod-ip", "node-a", "10.225.51.11", "", v1alpha1.AttachmentAttached, true),
			deleting,
		},
		Advertisements: []*v1alpha1.ARPAdvertisement{
			{ObjectMeta: metav1.ObjectMeta{Name: "eip-default-b"}, Spec: v1alpha1.ARPAdvertisementSpec{ExternalNetwork: "announced", Address: "10.225.51.6", NodeName: "node-a"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "eip-default-a"}, Spec: v1alpha1.ARPAdvertisementSpec{ExternalNetwork: "quiet", Address: "10.225.51.5", NodeName: "node-a"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "eip-default-x"}, Spec: v1alpha1.ARPAdvertisementSpec{ExternalNetwork: "announced", Address: "10.225.51.8", NodeName: "node-b"}},
			// Named here but not deliverable yet (its attachment is Pending): no answer.
			{ObjectMeta: metav1.ObjectMeta{Name: "eip-default-pending"}, Spec: v1alpha1.ARPAdvertisementSpec{Address: "10.225.51.7", NodeName: "node-a"}},
		},
		Nodes: []*corev1.Node{{
			ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
			Spec:       corev1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24"}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "10.225.51.2"}, {Type: corev1.NodeHostName, Address: "node-a"},
			}},
		}},
		ServiceCIDRs: []*networkingv1.ServiceCIDR{{Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/12", "fd00::/108"}}}},
	}
	limit := int32(5)
	in.ElasticIPs = ElasticIPMap{"default/limited": {Spec: v1alpha1.ElasticIPSpec{BandwidthMbps: &limit}}}
	in.Attachments[1].Spec.ElasticIPRef.Name = "limited" // attachment "a" → 10.225.51.5
	in.Networks = map[string]*v1alpha1.ExternalNetwork{
		"announced": {Spec: v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseARP, GratuitousARP: true}},
		"quiet":     {Spec: v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseARP}},
	}
	d := Compute(in)
	wantMappings := []nft.Mapping{
		{ElasticIP: netip.MustParseAddr("10.225.51.5"), PodIP: netip.MustParseAddr("10.244.1.5"), BandwidthMbps: 5},
		{ElasticIP: netip.MustParseAddr("10.225.51.6"), PodIP: netip.MustParseAddr("10.244.1.6")},
	}
	if !slices.Equal(d.NAT.Mappings, wantMappings) {
		t.Errorf("mappings = %v, want %v", d.NAT.Mappings, wantMappings)
	}
	wantCIDRs := []netip.Prefix{
		netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("10.225.51.2/32"),
		netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00::/108"),
	}
	if !slices.Equal(d.NAT.ClusterCIDRs, wantCIDRs) {
		t.Errorf("cluster CIDRs = %v, want %v", d.NAT.ClusterCIDRs, wantCIDRs)
	}
	if d.NAT.ExternalInterface != "ext0" {
		t.Errorf("interface = %q", d.NAT.ExternalInterface)
	}
	// In-cluster clients: every Node's Attached and Ready mappings, no bandwidth.
	wantInCluster := []nft.Mapping{
		{ElasticIP: netip.MustParseAddr("10.225.51.5"), PodIP: netip.MustParseAddr("10.244.1.5")},
		{ElasticIP: netip.MustParseAddr("10.225.51.6"), PodIP: netip.MustParseAddr("10.244.1.6")},
		{ElasticIP: netip.MustParseAddr("10.225.51.8"), PodIP: netip.MustParseAddr("10.244.2.8")},
	}
	if !slices.Equal(d.NAT.InCluster, wantInCluster) {
		t.Errorf("in-cluster mappings = %v, want %v", d.NAT.InCluster, wantInCluster)
	}
	wantARP := []netip.Addr{netip.MustParseAddr("10.225.51.5"), netip.MustParseAddr("10.225.51.6")}
	if !slices.Equal(d.ARP, wantARP) {
		t.Errorf("ARP = %v, want %v", d.ARP, wantARP)
	}
	if !slices.Equal(d.Answering(), []string{"eip-default-a", "eip-default-b"}) {
		t.Errorf("answering = %v", d.Answering())
	}
	// Gratuitous ARP only for what this Node answers on a network asking for it.
	if want := []netip.Addr{netip.MustParseAddr("10.225.51.6")}; !slices.Equal(d.Gratuitous, want) {
		t.Errorf("gratuitous = %v, want %v", d.Gratuitous, want)
	}
}

func TestComputeEmpty(t *testing.T) {
	d := Compute(Inputs{NodeName: "node-a", ExternalInterface: "ext0"})
	if len(d.NAT.Mappings) != 0 || len(d.NAT.InCluster) != 0 || len(d.ARP) != 0 || len(d.Answering()) != 0 {
		t.Errorf("empty inputs gave %+v", d)
	}
}

func TestComputeDirectNICs(t *testing.T) {
	nic := func(name, node, addr string, phase v1alpha1.NetworkInterfacePhase) *v1alpha1.NetworkInterface {
		return &v1alpha1.NetworkInterface{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec:       v1alpha1.NetworkInterfaceSpec{ElasticIP: "e-" + name, NodeName: node},
			Status:     v1alpha1.NetworkInterfaceStatus{Address: addr, Phase: phase},
		}
	}
	vpc := nic("vpc.eth0", "node-a", "10.244.1.5/32", v1alpha1.NetworkInterfaceReady)
	vpc.Spec.ElasticIP = ""
	in := Inputs{NodeName: "node-a", ExternalInterface: "ext0",
		NICs: []*v1alpha1.NetworkInterface{
			nic("b.eth0", "node-a", "10.225.51.7/32", v1alpha1.NetworkInterfaceReady),
			nic("a.ext0", "node-a", "10.225.51.6/32", v1alpha1.NetworkInterfaceReady),
			nic("waiting.eth0", "node-a", "", v1alpha1.NetworkInterfacePending),
			nic("elsewhere.eth0", "node-b", "10.225.51.8/32", v1alpha1.NetworkInterfaceReady),
			nic("unrouted.eth0", "node-a", "10.225.51.9/32", v1alpha1.NetworkInterfaceReady),
			vpc,
		},
		HostInterface: func(a netip.Addr) (string, bool) {
			switch a.String() {
			case "10.225.51.6":
				return "jnaaaa", true
			case "10.225.51.7":
				return "veth-b", true
			}
			return "", false
		},
	}
	want := []nft.DirectNIC{
		{HostInterface: "jnaaaa", Address: netip.MustParseAddr("10.225.51.6")},
		{HostInterface: "veth-b", Address: netip.MustParseAddr("10.225.51.7")},
	}
	if got := Compute(in).NAT.Direct; !slices.Equal(got, want) {
		t.Errorf("direct = %v, want %v", got, want)
	}
}

// TestTrimAttachment: the cached attachment keeps what Compute reads and loses the rest;
// trimming is idempotent and leaves other objects alone.
func TestTrimAttachment(t *testing.T) {
	a := attachment("a", "node-b", "10.225.51.8", "10.244.2.8", v1alpha1.AttachmentAttached, true)
	a.UID, a.ResourceVersion, a.Generation = "uid-a", "42", 3
	a.DeletionTimestamp = &metav1.Time{}
	a.Spec.ElasticIPRef.Name = "eip"
	a.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"}
	a.Labels = map[string]string{"app": "web"}
	a.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	a.Finalizers = []string{"x"}
	want := a.DeepCopy()
	want.ObjectMeta = metav1.ObjectMeta{Name: "a", Namespace: "default", UID: "uid-a", ResourceVersion: "42", Generation: 3, DeletionTimestamp: a.DeletionTimestamp}
	for range 2 {
		got, err := TrimAttachment(a)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("TrimAttachment = %+v, %v; want %+v", got, err, want)
		}
	}
	live := attachment("b", "node-b", "10.225.51.8", "10.244.2.8", v1alpha1.AttachmentAttached, true)
	live.Annotations = map[string]string{"x": "y"}
	trimmed, _ := TrimAttachment(live.DeepCopy())
	if a, b := Compute(Inputs{NodeName: "node-b", Attachments: []*v1alpha1.ElasticIPAttachment{live}}),
		Compute(Inputs{NodeName: "node-b", Attachments: []*v1alpha1.ElasticIPAttachment{trimmed.(*v1alpha1.ElasticIPAttachment)}}); !reflect.DeepEqual(a, b) {
		t.Errorf("trimming changed the desired state: %+v, then %+v", a, b)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "b"}}}
	if got, err := TrimAttachment(node); err != nil || got != node || node.Labels["a"] != "b" {
		t.Errorf("TrimAttachment changed a Node")
	}
}

// BenchmarkComputeClusterWide: the desired state of a Node in a cluster of 10,000 NAT
// attachments, 100 of them on this Node: every agent computes it on every change.
func BenchmarkComputeClusterWide(b *testing.B) {
	in := Inputs{NodeName: "node-0", ExternalInterface: "ext0"}
	for i := range 10000 {
		node := "node-" + strconv.Itoa(i%100)
		in.Attachments = append(in.Attachments, attachment("a"+strconv.Itoa(i), node,
			netip.AddrFrom4([4]byte{10, 225, byte(i >> 8), byte(i)}).String(),
			netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)}).String(), v1alpha1.AttachmentAttached, true))
	}
	b.ReportAllocs()
	for b.Loop() {
		d := Compute(in)
		if len(d.NAT.InCluster) != 10000 || len(d.NAT.Mappings) != 100 {
			b.Fatalf("%d in-cluster, %d local mappings", len(d.NAT.InCluster), len(d.NAT.Mappings))
		}
	}
}

// BenchmarkComputeOwn100k: the desired state of a Node holding 100,000 NAT attachments
// answered by ARP (every one also an in-cluster mapping), with the agent's nft.Checker
// warm: what every sync computes, whatever changed (docs/performance.md#scale).
func BenchmarkComputeOwn100k(b *testing.B) {
	var checker nft.Checker
	in := Inputs{NodeName: "node-0", ExternalInterface: "ext0", Check: checker.Check}
	for i := range 100000 {
		eip := netip.AddrFrom4([4]byte{10, byte(230 + i>>16), byte(i >> 8), byte(i)}).String()
		name := "a" + strconv.Itoa(i)
		in.Attachments = append(in.Attachments, attachment(name, "node-0", eip,
			netip.AddrFrom4([4]byte{10, byte(236 + i>>16), byte(i >> 8), byte(i)}).String(), v1alpha1.AttachmentAttached, true))
		in.Advertisements = append(in.Advertisements, &v1alpha1.ARPAdvertisement{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.ARPAdvertisementSpec{Address: eip, NodeName: "node-0"}})
	}
	Compute(in)
	b.ReportAllocs()
	for b.Loop() {
		if d := Compute(in); len(d.ARP) != 100000 || len(d.NAT.InCluster) != 100000 {
			b.Fatalf("%d answered, %d in-cluster mappings", len(d.ARP), len(d.NAT.InCluster))
		}
	}
}

// TestComputeRefusesSubnetReservedAddresses: an advertisement of the external subnet's
// network or broadcast address (IPv4), or of its Subnet-Router anycast address (IPv6),
// is not answered, and says why; the neighbours are.
func TestComputeRefusesSubnetReservedAddresses(t *testing.T) {
	in := Inputs{NodeName: "node-a", ExternalInterface: "ext0",
		ExternalSubnets: []netip.Prefix{netip.MustParsePrefix("10.225.51.2/24"), netip.MustParsePrefix("192.0.2.1/32"), netip.MustParsePrefix("fd00:225:51::2/64")}}
	for i, eip := range []string{"10.225.51.0", "10.225.51.255", "10.225.51.254", "10.225.51.1", "fd00:225:51::", "fd00:225:51::ffff:ffff:ffff:ffff"} {
		name := "eip-default-" + strconv.Itoa(i)
		podIP := "10.244.1." + strconv.Itoa(10+i)
		if strings.Contains(eip, ":") {
			podIP = "fd00:244:1::" + strconv.Itoa(10+i)
		}
		in.Attachments = append(in.Attachments, attachment(name, "node-a", eip, podIP, v1alpha1.AttachmentAttached, true))
		in.Advertisements = append(in.Advertisements, &v1alpha1.ARPAdvertisement{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.ARPAdvertisementSpec{Address: eip, NodeName: "node-a"}})
	}
	d := Compute(in)
	want := []netip.Addr{netip.MustParseAddr("10.225.51.1"), netip.MustParseAddr("10.225.51.254")}
	if !slices.Equal(d.ARP, want) {
		t.Errorf("answering %v, want %v", d.ARP, want)
	}
	if want6 := []netip.Addr{netip.MustParseAddr("fd00:225:51::ffff:ffff:ffff:ffff")}; !slices.Equal(d.NDP, want6) {
		t.Errorf("answering by NDP %v, want %v", d.NDP, want6)
	}
	if len(d.Refused) != 3 ||
		d.Refused["eip-default-0"] != "10.225.51.0 is the network address of 10.225.51.0/24 on interface ext0: no Node answers ARP for it" ||
		d.Refused["eip-default-1"] != "10.225.51.255 is the broadcast address of 10.225.51.0/24 on interface ext0: no Node answers ARP for it" ||
		d.Refused["eip-default-4"] != "fd00:225:51:: is the Subnet-Router anycast address of fd00:225:51::/64 on interface ext0: no Node answers NDP for it" {
		t.Errorf("refused %v", d.Refused)
	}
	// The NAT mappings stay: only ARP and NDP answers are refused.
	if len(d.NAT.Mappings) != 6 {
		t.Errorf("%d mappings, want 6", len(d.NAT.Mappings))
	}
}

// TestComputeIPv6: IPv6 attachments become IPv6 mappings beside IPv4 ones (a Pod with
// both), advertisements of IPv6 addresses go to the NDP responder, an attachment
// whose families differ is handed on (nft refuses it) but never answered for, and
// the cluster ranges keep both families.
func TestComputeIPv6(t *testing.T) {
	in := Inputs{
		NodeName: "node-a", ExternalInterface: "ext0",
		Attachments: []*v1alpha1.ElasticIPAttachment{
			attachment("v4", "node-a", "10.225.51.5", "10.244.1.5", v1alpha1.AttachmentAttached, true),
			attachment("v6", "node-a", "2001:db8::5", "fd00:10:244:1::5", v1alpha1.AttachmentAttached, true),
			attachment("mixed", "node-a", "2001:db8::6", "10.244.1.6", v1alpha1.AttachmentAttached, true),
			attachment("v6-elsewhere", "node-b", "2001:db8::8", "fd00:10:244:2::8", v1alpha1.AttachmentAttached, true),
		},
		Advertisements: []*v1alpha1.ARPAdvertisement{
			{ObjectMeta: metav1.ObjectMeta{Name: "eip-default-v4"}, Spec: v1alpha1.ARPAdvertisementSpec{Address: "10.225.51.5", NodeName: "node-a"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "eip-default-v6"}, Spec: v1alpha1.ARPAdvertisementSpec{Address: "2001:db8::5", NodeName: "node-a"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "eip-default-mixed"}, Spec: v1alpha1.ARPAdvertisementSpec{Address: "2001:db8::6", NodeName: "node-a"}},
		},
		Nodes: []*corev1.Node{{
			ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
			Spec:       corev1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24", "fd00:10:244:1::/64"}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "10.225.51.2"}, {Type: corev1.NodeInternalIP, Address: "2001:db8::2"},
			}},
		}},
	}
	d := Compute(in)
	a := netip.MustParseAddr
	wantMappings := []nft.Mapping{
		{ElasticIP: a("10.225.51.5"), PodIP: a("10.244.1.5")},
		{ElasticIP: a("2001:db8::5"), PodIP: a("fd00:10:244:1::5")},
		{ElasticIP: a("2001:db8::6"), PodIP: a("10.244.1.6")},
	}
	if !slices.Equal(d.NAT.Mappings, wantMappings) {
		t.Errorf("mappings = %v, want %v", d.NAT.Mappings, wantMappings)
	}
	if len(d.NAT.InCluster) != 4 {
		t.Errorf("in-cluster mappings = %v, want all four", d.NAT.InCluster)
	}
	if !slices.Equal(d.ARP, []netip.Addr{a("10.225.51.5")}) || !slices.Equal(d.NDP, []netip.Addr{a("2001:db8::5")}) {
		t.Errorf("ARP = %v, NDP = %v", d.ARP, d.NDP)
	}
	if !slices.Equal(d.Answering(), []string{"eip-default-v4", "eip-default-v6"}) {
		t.Errorf("answering = %v", d.Answering())
	}
	if !d.Answers(a("2001:db8::5")) || d.Answers(a("2001:db8::6")) || !d.Answers(a("10.225.51.5")) {
		t.Error("Answers disagrees with ARP and NDP")
	}
	wantCIDRs := []netip.Prefix{
		netip.MustParsePrefix("10.225.51.2/32"), netip.MustParsePrefix("10.244.1.0/24"),
		netip.MustParsePrefix("2001:db8::2/128"), netip.MustParsePrefix("fd00:10:244:1::/64"),
	}
	if !slices.Equal(d.NAT.ClusterCIDRs, wantCIDRs) {
		t.Errorf("cluster CIDRs = %v, want %v", d.NAT.ClusterCIDRs, wantCIDRs)
	}
	if c := answeringConditions("ext0", "02:00:00:00:00:01")(a("2001:db8::5"), 3); c.Message != "answering NDP on interface ext0 with 02:00:00:00:00:01" {
		t.Errorf("IPv6 Answering message %q", c.Message)
	}
	if c := answeringConditions("ext0", "02:00:00:00:00:01")(a("10.225.51.5"), 3); c.Message != "answering ARP on interface ext0 with 02:00:00:00:00:01" {
		t.Errorf("IPv4 Answering message %q", c.Message)
	}
}
