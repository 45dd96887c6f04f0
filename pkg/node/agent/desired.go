// Package agent is the node agent's control loop: it watches the objects naming this
// Node (and every Attached ElasticIPAttachment, for in-cluster clients), computes the
// whole desired datapath state with a pure function, and applies it (NAT rules, ARP
// answers, Answering conditions) — level-triggered, one coalesced trigger, periodic
// full resync.
package agent

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/apis/juneau/validation"
	"github.com/loutres/juneau/pkg/listdiff"
	"github.com/loutres/juneau/pkg/node/nft"
)

// Inputs is what the desired state is computed from: the caches' content.
type Inputs struct {
	NodeName          string
	ExternalInterface string
	// ClusterCIDRs given on the command line (Pod CIDRs the API does not know).
	ClusterCIDRs []netip.Prefix
	// Attachments of every Node: this Node's are translated here, all of them serve
	// in-cluster clients.
	Attachments    []*v1alpha1.ElasticIPAttachment
	Advertisements []*v1alpha1.ARPAdvertisement
	Nodes          []*corev1.Node
	ServiceCIDRs   []*networkingv1.ServiceCIDR
	// NICs of this Node; those holding an ElasticIP directly get anti-spoofing.
	NICs []*v1alpha1.NetworkInterface
	// Pods of this Node: the eth0 of a dual-stack Pod carrying an ElasticIP directly
	// keeps its Pod address of the other family, which it may send from.
	Pods []*corev1.Pod
	// HostInterface names the Node interface routing addr to a Pod (the direct NIC's
	// host end), if any.
	HostInterface func(addr netip.Addr) (string, bool)
	// ElasticIPs by "<namespace>/<name>", for their bandwidth limits; may be nil.
	ElasticIPs ElasticIPSource
	// Networks by name, for their spec.gratuitousARP.
	Networks map[string]*v1alpha1.ExternalNetwork
	// BGPPeers of the cluster (those selecting this Node are peered with) and the
	// BGPAdvertisements naming this Node.
	BGPPeers          []*v1alpha1.BGPPeer
	BGPAdvertisements []*v1alpha1.BGPAdvertisement
	// IPv6NextHop tells whether the BGP speaker has a next hop for IPv6 /128s
	// (--bgp-ipv6-next-hop, or a global IPv6 address of the external interface).
	IPv6NextHop bool
	// Password returns the TCP-MD5 password a BGPPeer names, ErrPasswordPending while
	// its Secret is being read; nil: no Secret can be read.
	Password func(ref v1alpha1.SecretKeyReference) (string, error)
	// ExternalSubnets are the IPv4 prefixes of the external interface's addresses: their
	// network and broadcast addresses are never answered for.
	ExternalSubnets []netip.Prefix
	// Check is how Compute learns what the NAT programmer keeps: nft.Check when nil,
	// or the agent's nft.Checker, which answers the same from the change since the
	// last sync (a whole check of 100,000 mappings takes seconds).
	Check func(nft.DesiredState) (nft.Programmed, error)
	// derived is what the agent's views derived of Attachments and Advertisements;
	// nil: Compute derives it from them.
	derived *derived
	// listers, set with derived, list Attachments and Advertisements for what reads
	// them whole (AllAttachments, AllAdvertisements), which Inputs then leaves nil.
	listers *Listers
	// answers are the agent's answers of its last Compute, which this one patches
	// where the views changed (answerState); nil: Compute computes its own.
	answers *answerState
}

// AllAttachments are Attachments, listed from the caches when Inputs was made without.
func (in *Inputs) AllAttachments() ([]*v1alpha1.ElasticIPAttachment, error) {
	if in.listers == nil {
		return in.Attachments, nil
	}
	return listOnce(&in.Attachments, in.listers.Attachments.List)
}

// listOnce fills *have from list unless it holds something already.
func listOnce[T any](have *[]T, list func(labels.Selector) ([]T, error)) ([]T, error) {
	if *have != nil {
		return *have, nil
	}
	var err error
	*have, err = list(labels.Everything())
	return *have, err
}

// attachment is the attachment namespace/name of Attachments (read from the cache when
// Inputs was made without them), nil when there is none.
func (in *Inputs) attachment(namespace, name string) *v1alpha1.ElasticIPAttachment {
	if in.Attachments == nil && in.listers != nil {
		a, err := in.listers.Attachments.ElasticIPAttachments(namespace).Get(name)
		if err != nil {
			return nil
		}
		return a
	}
	for _, a := range in.Attachments {
		if a.Namespace == namespace && a.Name == name {
			return a
		}
	}
	return nil
}

// AllAdvertisements are Advertisements, listed from the caches when Inputs was made without.
func (in *Inputs) AllAdvertisements() ([]*v1alpha1.ARPAdvertisement, error) {
	if in.listers == nil {
		return in.Advertisements, nil
	}
	return listOnce(&in.Advertisements, in.listers.Advertisements.List)
}

// derived is what Compute derives of the attachments and advertisements, as the views
// keep it (views).
type derived struct {
	// inCluster: the attached attachments' mappings; own: this Node's, with their
	// limits; each sorted by byMapping.
	inCluster, own []nft.Mapping
	// inClusterChange, ownChange: where each list differs from its version before.
	inClusterChange, ownChange listdiff.Change
	// ads: the advertisements naming this Node with a usable address, sorted by
	// address then name; adsChange: where it differs from its version before.
	ads       []answeredAd
	adsChange listdiff.Change
}

// Desired is the whole datapath state of this Node.
type Desired struct {
	// NAT's mappings are the views' lists when Compute was given them (Inputs.derived):
	// valid until the views' next update, and never to be written.
	NAT nft.DesiredState
	// Programmed is what the NAT programmer keeps of NAT (nft.Check): every side of a
	// conflict (one ElasticIP attached to two Pods on this Node, say) is left out, and
	// NATRejected says what and why (nil when nothing was).
	Programmed  nft.Programmed
	NATRejected error
	// ARP are the IPv4 addresses the ARP replier answers for, NDP the IPv6 ones the
	// NDP responder answers for, each sorted.
	ARP, NDP []netip.Addr
	// answered are the advertisements this Node answers for with their addresses,
	// sorted by address, then name (Answering): what marking them and logging what
	// changed walk, without looking each up again.
	answered []answeredAd
	// Gratuitous are the addresses of ARP on networks with spec.gratuitousARP: the
	// responder announces each when it starts answering for it. Sorted.
	Gratuitous []netip.Addr
	// ARPChange and NDPChange tell where ARP and NDP differ from the agent's last
	// lists (the zero Change: unknown); answeredSince where answered does, and
	// answeredGone what that window held before (readable until the next Compute).
	ARPChange, NDPChange listdiff.Change
	answeredSince        listdiff.Window
	answeredGone         []answeredAd
	// BGP is what the BGP speaker announces, and to whom.
	BGP BGPDesired
	// Refused are the advertisements (by name) this Node will not answer for, with why:
	// their address is the network or broadcast address of the external subnet.
	Refused map[string]string
}

// Answering are the advertisements (by name) this Node answers for, sorted by address,
// then name.
func (d Desired) Answering() []string {
	var out []string
	for _, x := range d.answered {
		out = append(out, x.ad.Name)
	}
	return out
}

// Answers reports whether this Node answers ARP or NDP for addr.
func (d Desired) Answers(addr netip.Addr) bool {
	if addr.Is4() {
		_, ok := slices.BinarySearchFunc(d.ARP, addr, netip.Addr.Compare)
		return ok
	}
	_, ok := slices.BinarySearchFunc(d.NDP, addr, netip.Addr.Compare)
	return ok
}

// Compute is the node agent's one decision, a pure function of its inputs:
//   - NAT for every ElasticIPAttachment that is Attached and Ready on this Node (the
//     ElasticIP controller alone decided it uses the address);
//   - for in-cluster clients, the mapping of every such attachment on any Node
//     (docs/datapath.md, "In-cluster clients");
//   - answers for every ARPAdvertisement naming this Node whose address it serves
//     (translates or routes to a direct NIC, as the NAT programmer keeps them): by ARP
//     for an IPv4 address, announced with gratuitous ARP when its network asks for it,
//     by NDP for an IPv6 one (never unsolicited);
//   - BGP announcements of the /32 of every BGPAdvertisement naming this Node whose
//     address it serves, to every BGPPeer selecting this Node (docs/bgp.md);
//   - never translated: Pod CIDRs (flags and Node spec.podCIDRs), ServiceCIDRs and
//     every Node address, of both families.
//
// An attachment whose ElasticIP and Pod IP are of different families (an IPv6
// ElasticIP on a Pod without an IPv6 address) is handed to the NAT programmer, which
// refuses it and says why (NATRejected), and is not answered for.
func Compute(in Inputs) Desired {
	d := Desired{NAT: nft.DesiredState{Config: nft.Config{
		ExternalInterface: in.ExternalInterface,
		ClusterCIDRs:      clusterCIDRs(in),
	}}}
	// Every attached attachment is an in-cluster mapping; this Node's are its own
	// mappings too, with their bandwidth limits. Both lists are sorted on every field,
	// so that the caches' order (which they do not keep) never shows. The agent's views
	// keep both sorted, patched from the change since the last sync, and hand them over
	// as they are: copying 100,000 of each took a fifth of a sync (views).
	d.NAT.InCluster, d.NAT.Mappings = in.mappings()
	if in.derived != nil {
		// Where they changed, so that neither the programmer nor its check compares
		// 100,000 mappings with the last (listdiff.Since).
		d.NAT.InClusterChange, d.NAT.MappingsChange = in.derived.inClusterChange, in.derived.ownChange
	}
	d.NAT.Direct = directNICs(in)
	// Answer ARP only for addresses this Node can deliver now (a NAT mapping or a direct
	// NIC's host route the programmer keeps): answering earlier, or for an address whose
	// mapping is left out as a conflict, would draw traffic into a black hole.
	// In-cluster mappings decide nothing about this Node's own (the programmer judges
	// them apart) and are ten times the work: they are left out of this check.
	check := in.Check
	if check == nil {
		check = nft.Check
	}
	d.Programmed, d.NATRejected = check(nft.DesiredState{Config: d.NAT.Config, Mappings: d.NAT.Mappings, Direct: d.NAT.Direct, MappingsChange: d.NAT.MappingsChange})
	served := func(a netip.Addr) bool {
		_, nat := d.Programmed.Mappings[a]
		_, direct := d.Programmed.Direct[a]
		return nat || direct
	}
	// The candidates come sorted by address then name, which orders the answers of
	// both families and the gratuitous ones too: a sort per list took a sixth of a sync
	// at 100,000. The agent's answers follow the views' changes (answerState).
	st := in.answers
	if st == nil {
		st = &answerState{}
	}
	st.answers(in, &d, in.adCandidates())
	if in.answers == nil {
		d.ARPChange, d.NDPChange = listdiff.Change{}, listdiff.Change{}
	}
	d.BGP = computeBGP(in, served)
	return d
}

// reservedAddress is an address of a subnet of the external interface that the subnet
// keeps for itself, with why no Node answers for it.
type reservedAddress struct {
	addr netip.Addr
	why  string
}

// reservedAddresses are the addresses that must not be answered for on the external
// segment, subnet by subnet: what iprange leaves out of automatic allocation — the
// network and broadcast addresses of an IPv4 subnet (answering would claim the whole
// segment's broadcast, or an address hosts treat as the network itself), the
// Subnet-Router anycast address of an IPv6 one (answering would take the routers'
// address). Found once per Compute, not once per advertisement.
func reservedAddresses(in Inputs) []reservedAddress {
	var out []reservedAddress
	for _, p := range in.ExternalSubnets {
		whole := iprange.FromPrefix(p.Masked())
		auto, _ := whole.Auto()
		for _, addr := range []netip.Addr{whole.First, whole.Last} {
			if !whole.Contains(addr) || auto.Contains(addr) {
				continue
			}
			what := "broadcast address"
			switch {
			case addr.Is6():
				what = "Subnet-Router anycast address"
			case addr == whole.First:
				what = "network address"
			}
			out = append(out, reservedAddress{addr: addr, why: fmt.Sprintf("%s is the %s of %s on interface %s: no Node answers %s for it",
				addr, what, p.Masked(), in.ExternalInterface, advertisement.Protocol(addr))})
		}
	}
	return out
}

// whyReserved says why addr is one of reserved, or "" when it is none.
func whyReserved(reserved []reservedAddress, addr netip.Addr) string {
	for _, r := range reserved {
		if r.addr == addr {
			return r.why
		}
	}
	return ""
}

// mapping is the NAT pair of an attachment translated on node, if any.
func mapping(node string, a *v1alpha1.ElasticIPAttachment) (nft.Mapping, bool) {
	if a.Status.NodeName != node {
		return nft.Mapping{}, false
	}
	return attached(a)
}

// attached is the NAT pair of an attachment that is Attached and Ready, on any Node.
// The addresses may be of either family, and of different ones (refused by nft).
func attached(a *v1alpha1.ElasticIPAttachment) (nft.Mapping, bool) {
	st := a.Status
	if st.NodeName == "" || st.Phase != v1alpha1.AttachmentAttached || a.DeletionTimestamp != nil ||
		!meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionReady) {
		return nft.Mapping{}, false
	}
	eip, err1 := netip.ParseAddr(st.ElasticIP)
	pod, err2 := netip.ParseAddr(st.PodIP)
	if err1 != nil || err2 != nil || eip.Zone() != "" || pod.Zone() != "" {
		return nft.Mapping{}, false
	}
	return nft.Mapping{ElasticIP: eip.Unmap(), PodIP: pod.Unmap()}, true
}

func clusterCIDRs(in Inputs) []netip.Prefix {
	out := slices.Clone(in.ClusterCIDRs)
	add := func(s string) {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
		}
	}
	for _, n := range in.Nodes {
		for _, c := range n.Spec.PodCIDRs {
			add(c)
		}
		for _, a := range validation.NodeAddresses(n) {
			out = append(out, iprange.HostPrefix(a))
		}
	}
	for _, sc := range in.ServiceCIDRs {
		for _, c := range sc.Spec.CIDRs {
			add(c)
		}
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return slices.Compact(out)
}

// refusedCondition is the Answering condition of an advertisement this agent will not
// answer for.
func refusedCondition(why string, generation int64) metav1.Condition {
	return metav1.Condition{
		Type: v1alpha1.ConditionAnswering, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonReservedAddress,
		Message: why, ObservedGeneration: generation,
	}
}

// answeringConditions makes the Answering conditions this agent writes on the
// advertisements it answers for on one interface, by ARP (IPv4) or NDP (IPv6): they
// differ only in the family of the address and the generation, so the two messages are
// made once, not once per advertisement.
func answeringConditions(iface, mac string) func(addr netip.Addr, generation int64) metav1.Condition {
	message := func(proto string) string { return "answering " + proto + " on interface " + iface + " with " + mac }
	arp, ndp := message("ARP"), message("NDP")
	return func(addr netip.Addr, generation int64) metav1.Condition {
		c := metav1.Condition{
			Type: v1alpha1.ConditionAnswering, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAnswering,
			Message: arp, ObservedGeneration: generation,
		}
		if advertisement.Protocol(addr) == "NDP" {
			c.Message = ndp
		}
		return c
	}
}

// directNICs lists, for every NIC of this Node holding its ElasticIP, the host interface
// its packets enter through and the source addresses allowed there
// (docs/reference.md#direct-nics): its ElasticIP, and for eth0 the Pod's addresses of
// the other family, which the CNI plugin leaves on it (a dual-stack Pod with an IPv4
// ElasticIP keeps its IPv6 Pod IP). The interface is filtered in both families' tables
// (package nft), so any other source of either family is dropped.
func directNICs(in Inputs) []nft.DirectNIC {
	var out []nft.DirectNIC
	for _, nic := range in.NICs {
		if nic.Spec.ElasticIP == "" || nic.Spec.NodeName != in.NodeName || nic.Status.Phase != v1alpha1.NetworkInterfaceReady {
			continue
		}
		p, err := netip.ParsePrefix(nic.Status.Address)
		if err != nil || in.HostInterface == nil {
			continue
		}
		dev, ok := in.HostInterface(p.Addr())
		if !ok {
			continue
		}
		bw := in.bandwidth(nic.Namespace, nic.Spec.ElasticIP)
		out = append(out, nft.DirectNIC{HostInterface: dev, Address: p.Addr(), BandwidthMbps: bw})
		if nic.Spec.PodRef.Interface != v1alpha1.DefaultInterface {
			continue
		}
		for _, a := range otherFamilyPodIPs(in.Pods, nic, p.Addr()) {
			out = append(out, nft.DirectNIC{HostInterface: dev, Address: a})
		}
	}
	slices.SortFunc(out, func(a, b nft.DirectNIC) int {
		return cmp.Or(a.Address.Compare(b.Address), cmp.Compare(a.HostInterface, b.HostInterface), cmp.Compare(a.BandwidthMbps, b.BandwidthMbps))
	})
	return out
}

// otherFamilyPodIPs are the Pod IPs of the NIC's Pod (by UID) of another family than
// the ElasticIP eip.
func otherFamilyPodIPs(pods []*corev1.Pod, nic *v1alpha1.NetworkInterface, eip netip.Addr) []netip.Addr {
	for _, pod := range pods {
		if pod.Namespace != nic.Namespace || pod.Name != nic.Spec.PodRef.Name || string(pod.UID) != nic.Spec.PodRef.UID {
			continue
		}
		var out []netip.Addr
		for _, ip := range pod.Status.PodIPs {
			if a, err := netip.ParseAddr(ip.IP); err == nil && a.Unmap().Is4() != eip.Unmap().Is4() {
				out = append(out, a.Unmap())
			}
		}
		return out
	}
	return nil
}

// bandwidth is the ElasticIP's spec.bandwidthMbps, 0 when unlimited or unknown.
func (in *Inputs) bandwidth(namespace, name string) int32 {
	if eip := elasticIPOf(in.ElasticIPs, namespace+"/"+name); eip != nil && eip.Spec.BandwidthMbps != nil {
		return *eip.Spec.BandwidthMbps
	}
	return 0
}
