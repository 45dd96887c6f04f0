package agent

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/node/nft"
)

// fuzzNode is the Node the fuzzed agent runs on.
const fuzzNode = "node-a"

// choices reads the fuzzer's bytes as a sequence of small choices; past the end every
// choice is the first option.
type choices struct {
	data  []byte
	extra string
}

func (c *choices) next() int {
	if len(c.data) == 0 {
		return 0
	}
	b := c.data[0]
	c.data = c.data[1:]
	return int(b)
}

func (c *choices) pick(options ...string) string {
	i := c.next() % (len(options) + 1)
	if i == len(options) {
		return c.extra // the fuzzer's own string, anywhere a value is read
	}
	return options[i]
}

func (c *choices) flag() bool { return c.next()%2 == 1 }

// A few addresses to collide on, and some that are no usable address at all.
func (c *choices) addr() string {
	return c.pick("10.225.51.5", "10.225.51.6", "10.225.51.7", "10.244.1.5", "10.244.1.6", "10.225.51.2",
		"0.0.0.0", "255.255.255.255", "224.0.0.1", "::ffff:10.225.51.5", "fd00::5", "", "10.225.51.05", " 10.225.51.5", "10.225.51.255", "10.225.51.0")
}

func (c *choices) node() string { return c.pick(fuzzNode, "node-b", "", "Node-A") }

func (c *choices) deleting() *metav1.Time {
	if c.next()%4 == 3 {
		return &metav1.Time{}
	}
	return nil
}

// inputs builds what the agent's listers could hold: objects of this and other Nodes,
// addresses that collide, and status values no controller writes.
func (c *choices) inputs() Inputs {
	in := Inputs{NodeName: fuzzNode, ExternalInterface: "ext0", ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
		ElasticIPs: ElasticIPMap{}, ExternalSubnets: []netip.Prefix{netip.MustParsePrefix("10.225.51.2/24")}}
	for i := range c.next() % 8 {
		a := &v1alpha1.ElasticIPAttachment{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("att-%d", i), Namespace: c.pick("default", "other"), DeletionTimestamp: c.deleting()},
			Spec: v1alpha1.ElasticIPAttachmentSpec{ElasticIPRef: v1alpha1.ElasticIPReference{Name: c.pick("e1", "e2", "limited")},
				TargetRef: v1alpha1.AttachmentTarget{NetworkInterfaceName: c.pick("web.eth0", "api.eth0")}},
			Status: v1alpha1.ElasticIPAttachmentStatus{Phase: v1alpha1.AttachmentPhase(c.pick("Attached", "Pending", "Error")),
				ElasticIP: c.addr(), PodIP: c.addr(), NodeName: c.node()},
		}
		if s := c.pick("True", "False"); s != "" {
			a.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionStatus(s)}}
		}
		in.Attachments = append(in.Attachments, a)
	}
	for i := range c.next() % 6 {
		in.Advertisements = append(in.Advertisements, &v1alpha1.ARPAdvertisement{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ad-%d", i), DeletionTimestamp: c.deleting()},
			Spec:       v1alpha1.ARPAdvertisementSpec{ExternalNetwork: "ext-net", Address: c.addr(), NodeName: c.node()},
		})
	}
	for i := range c.next() % 5 {
		address := c.addr()
		if c.flag() {
			address += "/32"
		}
		in.NICs = append(in.NICs, &v1alpha1.NetworkInterface{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("nic-%d.eth0", i), Namespace: c.pick("default", "other")},
			Spec:       v1alpha1.NetworkInterfaceSpec{NodeName: c.node(), ElasticIP: c.pick("", "e1", "e2", "limited")},
			Status:     v1alpha1.NetworkInterfaceStatus{Phase: v1alpha1.NetworkInterfacePhase(c.pick("Ready", "Pending")), Address: address},
		})
	}
	for i := range c.next() % 3 {
		in.Nodes = append(in.Nodes, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i)},
			Spec:       corev1.NodeSpec{PodCIDRs: []string{c.pick("10.244.1.0/24", "10.244.2.0/24", "fd00::/64", "10.244.1.5/24", "bad")}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeAddressType(c.pick("InternalIP", "ExternalIP", "Hostname")),
				Address: c.addr()}}},
		})
	}
	if c.flag() {
		in.ServiceCIDRs = []*networkingv1.ServiceCIDR{{Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{c.pick("10.96.0.0/12", "fd00::/108", "x")}}}}
	}
	// The API server's schema bounds bandwidthMbps; any bound value may be set.
	for _, ns := range []string{"default", "other"} {
		if c.flag() {
			in.ElasticIPs.(ElasticIPMap)[ns+"/limited"] = &v1alpha1.ElasticIP{Spec: v1alpha1.ElasticIPSpec{BandwidthMbps: ptr.To(int32(1 + c.next()%2*(nft.MaxBandwidthMbps-1)))}}
		}
	}
	// The host end of a direct NIC: every address whose last byte is odd is routed to a
	// Pod, through one of two interfaces.
	in.HostInterface = func(a netip.Addr) (string, bool) {
		if !a.Is4() || a.As4()[3]%2 == 0 {
			return "", false
		}
		return fmt.Sprintf("veth%d", a.As4()[3]%3), true
	}
	return in
}

// reversed is in with every list in the opposite order, as listers may return it.
func reversed(in Inputs) Inputs {
	out := in
	out.Attachments = slices.Clone(in.Attachments)
	slices.Reverse(out.Attachments)
	out.Advertisements = slices.Clone(in.Advertisements)
	slices.Reverse(out.Advertisements)
	out.NICs = slices.Clone(in.NICs)
	slices.Reverse(out.NICs)
	out.Nodes = slices.Clone(in.Nodes)
	slices.Reverse(out.Nodes)
	return out
}

// FuzzCompute builds random listers' content and checks what the agent would program:
// Compute never panics, does not depend on the order of the lists, takes only this
// Node's objects, and agrees with the NAT programmer: what the programmer keeps maps no
// address twice, what it leaves out is reported, ARP is answered exactly for what it
// delivers, and a Pod's readiness gate waits exactly for the mappings it leaves out.
func FuzzCompute(f *testing.F) {
	f.Add([]byte{}, "")
	// Two attachments of this Node (10.225.51.5 → 10.244.1.5, 10.225.51.6 → 10.244.1.6),
	// an advertisement for each.
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 1, 1, 0, 1, 4, 0, 0, 2, 0, 0, 0, 0, 1, 0}, "")
	// One ElasticIP attached on this Node to two Pods, advertised.
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 1, 1, 0, 0, 4, 0, 0, 1, 0, 0, 0}, "")
	// A direct NIC of this Node carrying 10.225.51.7, advertised.
	f.Add([]byte{0, 1, 0, 2, 0, 1, 2, 1, 0, 0, 1, 0}, "")
	f.Fuzz(func(t *testing.T, data []byte, extra string) {
		in := (&choices{data: data, extra: extra}).inputs()
		d := Compute(in)
		if again := Compute(reversed(in)); !reflect.DeepEqual(d, again) {
			t.Fatalf("Compute depends on the order of its inputs:\n%+v\n%+v", d, again)
		}
		checkOwnNode(t, in, d)
		// What the programmer keeps of the whole state, in-cluster mappings included.
		prog, rejected := nft.Check(d.NAT)
		if !reflect.DeepEqual(d.Programmed, prog) || (rejected == nil && d.NATRejected != nil) {
			t.Fatalf("Compute says the programmer keeps %+v (%v); it keeps %+v (%v)", d.Programmed, d.NATRejected, prog, rejected)
		}
		checkNothingTwice(t, d)
		checkARP(t, in, d)
		checkReadiness(t, in, d)
	})
}

// checkOwnNode: every mapping, direct NIC and answered advertisement comes from an object
// of this Node that says so.
func checkOwnNode(t *testing.T, in Inputs, d Desired) {
	t.Helper()
	for _, m := range d.NAT.Mappings {
		if !slices.ContainsFunc(in.Attachments, func(a *v1alpha1.ElasticIPAttachment) bool {
			got, ok := mapping(fuzzNode, a)
			return ok && a.Status.NodeName == fuzzNode && got.ElasticIP == m.ElasticIP && got.PodIP == m.PodIP
		}) {
			t.Fatalf("mapping %v comes from no Attached, Ready attachment of %s", m, fuzzNode)
		}
	}
	for _, n := range d.NAT.Direct {
		if !slices.ContainsFunc(in.NICs, func(nic *v1alpha1.NetworkInterface) bool {
			p, err := netip.ParsePrefix(nic.Status.Address)
			return err == nil && p.Addr() == n.Address && nic.Spec.NodeName == fuzzNode && nic.Spec.ElasticIP != "" &&
				nic.Status.Phase == v1alpha1.NetworkInterfaceReady
		}) {
			t.Fatalf("direct NIC %v comes from no Ready NetworkInterface of %s holding an ElasticIP", n, fuzzNode)
		}
	}
	for _, name := range d.Answering() {
		i := slices.IndexFunc(in.Advertisements, func(ad *v1alpha1.ARPAdvertisement) bool { return ad.Name == name })
		if i < 0 || in.Advertisements[i].Spec.NodeName != fuzzNode || in.Advertisements[i].DeletionTimestamp != nil {
			t.Fatalf("answering advertisement %q, which is not a live one of %s", name, fuzzNode)
		}
	}
}

// checkNothingTwice: of what is programmed, one Pod per ElasticIP (a map), one ElasticIP
// per Pod, no address both an ElasticIP and a Pod IP, each mapping one that Compute
// asked for; whatever Compute asked for and is not programmed is reported.
func checkNothingTwice(t *testing.T, d Desired) {
	t.Helper()
	eipOf := map[netip.Addr]netip.Addr{}
	for eip, pod := range d.Programmed.Mappings {
		if other, ok := eipOf[pod]; ok {
			t.Fatalf("Pod IP %v translated from both %v and %v", pod, eip, other)
		}
		eipOf[pod] = eip
		if !slices.ContainsFunc(d.NAT.Mappings, func(m nft.Mapping) bool { return m.ElasticIP == eip && m.PodIP == pod }) {
			t.Fatalf("programmed %v → %v, which Compute did not ask for", eip, pod)
		}
	}
	for eip := range d.Programmed.Mappings {
		if _, ok := eipOf[eip]; ok {
			t.Fatalf("%v is both an ElasticIP and a Pod IP: %v", eip, d.Programmed.Mappings)
		}
	}
	for _, m := range d.NAT.Mappings {
		if d.Programmed.Mappings[m.ElasticIP] != m.PodIP && d.NATRejected == nil {
			t.Fatalf("mapping %v left out without a word", m)
		}
	}
	for _, n := range d.NAT.Direct {
		if d.Programmed.Direct[n.Address] != n.HostInterface && d.NATRejected == nil {
			t.Fatalf("direct NIC %v left out without a word", n)
		}
	}
}

// checkARP: answers exactly for the addresses programmed here (translated, or routed to
// a direct NIC) that a live advertisement of this Node names, sorted, once each.
func checkARP(t *testing.T, in Inputs, d Desired) {
	t.Helper()
	var answered []servedAd
	var wantARP []netip.Addr
	for _, ad := range in.Advertisements {
		a, err := netip.ParseAddr(ad.Spec.Address)
		a = a.Unmap() // an IPv4-mapped spelling stands for the IPv4 address the NAT delivers
		_, nat := d.Programmed.Mappings[a]
		_, direct := d.Programmed.Direct[a]
		if ad.Spec.NodeName == fuzzNode && ad.DeletionTimestamp == nil && err == nil && (nat || direct) && whyReserved(reservedAddresses(in), a) == "" {
			answered = append(answered, servedAd{Name: ad.Name, Address: a})
			wantARP = append(wantARP, a)
		}
	}
	// By address, then name.
	slices.SortFunc(answered, compareServed)
	var want []string
	for _, ad := range answered {
		want = append(want, ad.Name)
	}
	slices.SortFunc(wantARP, netip.Addr.Compare)
	wantARP = slices.Compact(wantARP)
	if !slices.Equal(d.Answering(), want) || !slices.Equal(d.ARP, wantARP) {
		t.Fatalf("answering %v for %v, want %v for %v (programmed: %+v)", d.Answering(), d.ARP, want, wantARP, d.Programmed)
	}
}

// checkReadiness: the gate of a Pod waits for the NAT of one of its attachments on this
// Node exactly when the programmer does not translate that attachment's ElasticIP to its
// Pod IP.
func checkReadiness(t *testing.T, in Inputs, d Desired) {
	t.Helper()
	var pods []*corev1.Pod
	var nics []*v1alpha1.NetworkInterface // each Pod's own eth0, which its attachments target
	for _, ns := range []string{"default", "other"} {
		for _, name := range []string{"web", "api"} {
			p := gatedPod(name)
			p.Namespace = ns
			pods = append(pods, p)
			nics = append(nics, &v1alpha1.NetworkInterface{
				ObjectMeta: metav1.ObjectMeta{Name: name + ".eth0", Namespace: ns},
				Spec:       v1alpha1.NetworkInterfaceSpec{PodRef: v1alpha1.PodReference{Name: name, UID: string(p.UID), Interface: "eth0"}, NodeName: fuzzNode},
			})
		}
	}
	for _, r := range ComputeReadiness(in, d, ReadinessInputs{Pods: pods, NICs: nics, ElasticIPs: in.ElasticIPs, Networks: map[string]*v1alpha1.ExternalNetwork{}}) {
		for _, a := range in.Attachments {
			if a.Status.NodeName != fuzzNode || a.Namespace != r.Pod.Namespace || a.Spec.TargetRef.NetworkInterfaceName != r.Pod.Name+".eth0" {
				continue // another Node's attachment serves in-cluster clients only
			}
			m, ok := mapping(fuzzNode, a)
			programmed := ok && d.Programmed.Mappings[m.ElasticIP] == m.PodIP
			// The gate names the attachment while it waits for it: for its NAT, or, not
			// Attached yet, for what its Ready condition says.
			waits := strings.Contains(r.Message, fmt.Sprintf("ElasticIPAttachment %q", a.Name))
			if programmed == waits {
				t.Fatalf("Pod %s/%s: programmed %v, yet the gate says %q (attachment %s: %+v; programmed %v)",
					r.Pod.Namespace, r.Pod.Name, programmed, r.Message, a.Name, a.Status, d.Programmed.Mappings)
			}
		}
	}
}
