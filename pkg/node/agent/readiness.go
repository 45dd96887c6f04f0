package agent

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/status"
)

// ReadinessInputs adds to Inputs what the readiness gate needs.
type ReadinessInputs struct {
	Pods       []*corev1.Pod                // Pods of this Node
	NICs       []*v1alpha1.NetworkInterface // NetworkInterfaces of this Node
	ElasticIPs ElasticIPSource
	Networks   map[string]*v1alpha1.ExternalNetwork
	// Routed reports whether the Node routes addr to a Pod (the direct NIC's host route).
	Routed func(addr netip.Addr) bool
	// Announced reports whether this Node's BGP speaker announces addr/32 to at least
	// one Established peer.
	Announced func(addr netip.Addr) bool
}

// Readiness is the gate condition one Pod should have, under each of the condition
// types it lists.
type Readiness struct {
	Pod *corev1.Pod
	// Types are the readiness-gate condition types of v1alpha1.PodConditionTypes that the
	// Pod lists: juneau's own and the managed-cloud name, which mean the same.
	Types   []string
	Ready   bool
	Reason  string
	Message string
}

// ComputeReadiness decides the gate of every Pod of this Node that lists it (docs/reference.md#readiness-gate):
// True only when each ElasticIP the Pod uses is programmed here — NAT mapping applied or
// direct host route present — and, on an arp network, answered by this Node's ARP; on a
// bgp network, announced by this Node to at least one Established BGP peer.
// What the Pod uses is found by UID: an attachment whose target NetworkInterface belongs
// to this Pod (not to an earlier Pod of the same name), a direct NetworkInterface of
// this Pod that its ElasticIP names as holder.
func ComputeReadiness(in Inputs, d Desired, r ReadinessInputs) []Readiness {
	var out []Readiness
	var own map[string][]*v1alpha1.ElasticIPAttachment
	for _, p := range r.Pods {
		types := v1alpha1.GateTypesOf(p)
		if len(types) == 0 || p.DeletionTimestamp != nil {
			continue
		}
		if own == nil {
			own = ownAttachments(in)
		}
		pr := podReadiness(in, d, r, p, own)
		pr.Types = types
		out = append(out, pr)
	}
	return out
}

// ownAttachments are this Node's attachments (those of other Nodes serve in-cluster
// clients only) by "<namespace>/<NetworkInterface name>": found once per sync, where a
// walk of every attachment of the cluster for each gated Pod grew with their product.
func ownAttachments(in Inputs) map[string][]*v1alpha1.ElasticIPAttachment {
	out := map[string][]*v1alpha1.ElasticIPAttachment{}
	all, _ := in.AllAttachments() // a list of the cache fails only for a bad selector
	for _, a := range all {
		if a.Status.NodeName == in.NodeName {
			k := a.Namespace + "/" + a.Spec.TargetRef.NetworkInterfaceName
			out[k] = append(out[k], a)
		}
	}
	return out
}

// podReadiness is the gate of one Pod; own are ownAttachments(in).
func podReadiness(in Inputs, d Desired, r ReadinessInputs, p *corev1.Pod, own map[string][]*v1alpha1.ElasticIPAttachment) Readiness {
	var used []use
	var missing []string
	var attachments []*v1alpha1.ElasticIPAttachment
	for _, n := range r.NICs {
		if n.Namespace == p.Namespace && n.Spec.PodRef.UID == string(p.UID) {
			attachments = append(attachments, own[n.Namespace+"/"+n.Name]...)
		}
	}
	for _, a := range attachments {
		if a.Status.Phase != v1alpha1.AttachmentAttached || a.Status.ElasticIP == "" {
			// Not the ElasticIP's user (yet): its Ready condition says why, in the words
			// of the controller that decided; it has no address of the Pod's to answer for.
			missing = append(missing, attachmentWait(a))
			continue
		}
		u := use{eip: a.Spec.ElasticIPRef.Name, addr: a.Status.ElasticIP}
		m, ok := mapping(in.NodeName, a)
		if !ok || d.Programmed.Mappings[m.ElasticIP] != m.PodIP {
			missing = append(missing, fmt.Sprintf("NAT of ElasticIPAttachment %q", a.Name))
		}
		used = append(used, u)
	}
	for _, nic := range r.NICs {
		if nic.Namespace != p.Namespace || nic.Spec.PodRef.UID != string(p.UID) || nic.Spec.ElasticIP == "" {
			continue
		}
		addr, _, _ := strings.Cut(nic.Status.Address, "/")
		a, err := netip.ParseAddr(addr)
		switch {
		case !holdsDirectly(nic, elasticIPOf(r.ElasticIPs, nic.Namespace+"/"+nic.Spec.ElasticIP)):
			missing = append(missing, fmt.Sprintf("ElasticIP %q to name NetworkInterface %q as its holder", nic.Spec.ElasticIP, nic.Name))
		case err != nil || r.Routed == nil || !r.Routed(a):
			missing = append(missing, fmt.Sprintf("route of NetworkInterface %q", nic.Name))
		}
		used = append(used, use{eip: nic.Spec.ElasticIP, addr: addr})
	}
	if len(used) == 0 && len(missing) == 0 {
		return Readiness{Pod: p, Reason: v1alpha1.ReasonNotProgrammed, Message: nothingAttached(p)}
	}
	var names []string
	for _, u := range used {
		names = append(names, fmt.Sprintf("%s (%s)", u.eip, u.addr))
		if eip := elasticIPOf(r.ElasticIPs, p.Namespace+"/"+u.eip); eip != nil {
			a, err := netip.ParseAddr(u.addr)
			switch net := r.Networks[eip.Spec.ExternalNetwork]; {
			case net == nil:
			case net.Spec.Type == v1alpha1.AdvertiseARP:
				if err != nil || !d.Answers(a) {
					missing = append(missing, fmt.Sprintf("%s answer for %q", advertisement.Protocol(a), u.addr))
				}
			case net.Spec.Type == v1alpha1.AdvertiseBGP:
				if err != nil || r.Announced == nil || !r.Announced(a) {
					missing = append(missing, fmt.Sprintf("BGP announcement of %q to an Established peer", u.addr))
				}
			}
		} else {
			missing = append(missing, fmt.Sprintf("ElasticIP %q", u.eip))
		}
	}
	slices.Sort(names)
	if len(missing) > 0 {
		slices.Sort(missing)
		return Readiness{Pod: p, Reason: v1alpha1.ReasonNotProgrammed, Message: "waiting for " + strings.Join(missing, ", ")}
	}
	return Readiness{Pod: p, Ready: true, Reason: v1alpha1.ReasonProgrammed,
		Message: fmt.Sprintf("ElasticIP traffic programmed on Node %q: %s", in.NodeName, strings.Join(names, ", "))}
}

type use struct{ eip, addr string }

// attachmentWait says what an attachment of the Pod that is not Attached waits for: its
// Ready condition's message (another user of the ElasticIP, no address yet, …).
func attachmentWait(a *v1alpha1.ElasticIPAttachment) string {
	why := "it is not attached yet"
	for _, c := range a.Status.Conditions {
		if c.Type == v1alpha1.ConditionReady && c.Message != "" {
			why = c.Message
		}
	}
	return fmt.Sprintf("ElasticIPAttachment %q (%s)", a.Name, why)
}

// nothingAttached is the gate's message for a Pod nothing is attached to on this Node:
// while the controller tells the Pod why it has no automatic ElasticIP (the Pod's
// condition juneau.loutres.me/elastic-ip-assigned, False), that reason.
func nothingAttached(p *corev1.Pod) string {
	if c := status.PodCondition(p, v1alpha1.PodConditionElasticIPAssigned); c != nil && c.Status == corev1.ConditionFalse && c.Message != "" {
		return "no ElasticIP is attached to this Pod yet: " + c.Message
	}
	return "no ElasticIP is attached to this Pod on this Node yet"
}

// changed reports whether one of the Pod's gate conditions differs from r.
func (r Readiness) changed() bool {
	want := corev1.ConditionFalse
	if r.Ready {
		want = corev1.ConditionTrue
	}
	for _, t := range r.Types {
		c := status.PodCondition(r.Pod, t)
		if c == nil || c.Status != want || c.Reason != r.Reason || c.Message != r.Message {
			return true
		}
	}
	return false
}
