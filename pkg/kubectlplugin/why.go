// Package kubectlplugin is the logic of kubectl-juneau (cmd/kubectl-juneau): it reads
// juneau's objects with client-go (gather.go) and explains them. The explaining is pure:
// Diagnose walks the chain from a Pod to the wire over Facts gathered beforehand and
// names the first link that does not hold (docs/troubleshooting.md#kubectl-juneau).
package kubectlplugin

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// Facts is everything Diagnose looks at, read from the API server by Gather.
type Facts struct {
	// Namespace and Name are what the user asked about.
	Namespace, Name string
	// Pod is the Pod asked about, or the one using the ElasticIP asked about.
	Pod *corev1.Pod
	// Refusal is the message of the latest webhook refusal of a Pod or ElasticIP of
	// that name (from Events), when none exists.
	Refusal string
	// ElasticIPName is the ElasticIP the Pod asks for or uses; empty: none.
	ElasticIPName string
	// PodAttachment is the ElasticIPAttachment that targets the Pod's eth0, if any.
	PodAttachment string
	ElasticIP     *v1alpha1.ElasticIP
	Network       *v1alpha1.ExternalNetwork
	Pools         []*v1alpha1.AddressPool
	// Node is where the address is used: the Pod's Node, else the advertisement's.
	Node  string
	Agent Agent
	// ARP and BGP are the ElasticIP's advertisements (nil: none).
	ARP *v1alpha1.ARPAdvertisement
	BGP *v1alpha1.BGPAdvertisement
	// BGPNode is the Node's BGPNodeStatus (nil: none).
	BGPNode *v1alpha1.BGPNodeStatus
}

// Agent is the node agent of a Node as the API server shows it.
type Agent struct {
	// Pod is the name of the newest agent Pod on the Node; empty: none.
	Pod string
	// Ready: that Pod is Ready.
	Ready bool
	// Heartbeat: its heartbeat Lease is renewed (not expired).
	Heartbeat bool
}

// Link is one step of the chain.
type Link struct {
	// What the link is, in plain words.
	What string
	// OK says whether it holds; Detail what was found.
	OK     bool
	Detail string
	// Fix is what to do, on the broken link.
	Fix string
}

// Diagnosis is the chain as far as it holds, ending with the first broken link.
type Diagnosis struct {
	Links []Link
}

// Broken is the first link that does not hold, or nil.
func (d Diagnosis) Broken() *Link {
	for i := range d.Links {
		if !d.Links[i].OK {
			return &d.Links[i]
		}
	}
	return nil
}

// String renders the chain for a terminal.
func (d Diagnosis) String() string {
	var b strings.Builder
	for _, l := range d.Links {
		mark := "ok  "
		if !l.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(&b, "%s %s: %s\n", mark, l.What, l.Detail)
		if !l.OK && l.Fix != "" {
			fmt.Fprintf(&b, "     what to do: %s\n", l.Fix)
		}
	}
	if br := d.Broken(); br == nil {
		b.WriteString("every link holds\n")
	}
	return b.String()
}

type chain struct{ links []Link }

func (c *chain) ok(what, format string, args ...any) {
	c.links = append(c.links, Link{What: what, OK: true, Detail: fmt.Sprintf(format, args...)})
}

func (c *chain) broken(what, fix, format string, args ...any) Diagnosis {
	c.links = append(c.links, Link{What: what, Detail: fmt.Sprintf(format, args...), Fix: fix})
	return Diagnosis{Links: c.links}
}

// Link names; the tests and the docs use them.
const (
	LinkExists     = "object"
	LinkScheduled  = "scheduled"
	LinkAgent      = "node agent"
	LinkPodIP      = "Pod IP"
	LinkAssigned   = "ElasticIP assigned to the Pod"
	LinkElasticIP  = "ElasticIP"
	LinkAllocated  = "address reserved"
	LinkUser       = "user of the ElasticIP"
	LinkAttached   = "attached"
	LinkAnswered   = "answered on the wire"
	LinkReadiness  = "readiness gate"
	podAgentFixFmt = "the juneau-node DaemonSet must run a Ready agent on Node %s: check its nodeSelector and tolerations (chart values node.nodeSelector, node.tolerations) and `kubectl -n juneau-node get pods -o wide -l app.kubernetes.io/component=node`"
)

// Diagnose walks the chain Pod → Node → agent → Pod IP → ElasticIP → address → user →
// attached → ARP/NDP answer or BGP announcement → readiness gate, and stops at the
// first link that does not hold.
func Diagnose(f Facts) Diagnosis {
	var c chain
	if f.Pod == nil && f.ElasticIP == nil {
		if f.Refusal != "" {
			return c.broken(LinkExists, "change the object as the message says; `kubectl juneau why` then follows it",
				"no Pod or ElasticIP %s/%s: the juneau webhook refused it: %s", f.Namespace, f.Name, f.Refusal)
		}
		return c.broken(LinkExists, "check the name and the namespace (-n)", "no Pod or ElasticIP %s/%s", f.Namespace, f.Name)
	}
	if p := f.Pod; p != nil {
		c.ok(LinkExists, "Pod %s/%s", p.Namespace, p.Name)
		if p.Spec.NodeName == "" {
			return c.broken(LinkScheduled, "`kubectl describe pod` shows why the scheduler has not placed it", "the Pod is not scheduled to a Node yet")
		}
		c.ok(LinkScheduled, "on Node %s", p.Spec.NodeName)
		if d, broken := agentLink(&c, f); broken {
			return d
		}
		if p.Status.PodIP == "" {
			return c.broken(LinkPodIP, "`kubectl describe pod` shows the CNI error of the container runtime (FailedCreatePodSandBox)",
				"the Pod has no IP: its network is not set up (phase %s)", p.Status.Phase)
		}
		c.ok(LinkPodIP, "%s", p.Status.PodIP)
		if cond := podCondition(p, v1alpha1.PodConditionElasticIPAssigned); cond != nil && cond.Status == corev1.ConditionFalse {
			fix := "see the message"
			switch cond.Reason {
			case v1alpha1.ReasonElasticIPInUse:
				return c.broken(LinkAssigned, "delete the Pod that holds the ElasticIP, or have this Pod name another one",
					"another Pod uses the ElasticIP: %s", cond.Message)
			case v1alpha1.ReasonWriteRefused:
				fix = "the API server refused a write the controller needs; fix what the message names"
			}
			return c.broken(LinkAssigned, fix, "%s: %s", cond.Reason, cond.Message)
		}
		if f.ElasticIPName == "" {
			return c.broken(LinkElasticIP, "annotate the Pod (juneau.loutres.me/pod-with-eip, /elastic-ip, /pod-eip-name) or attach an ElasticIP to "+p.Name+".eth0",
				"the Pod asks for no ElasticIP and none is attached to it")
		}
	} else {
		c.ok(LinkExists, "ElasticIP %s/%s", f.ElasticIP.Namespace, f.ElasticIP.Name)
	}
	e := f.ElasticIP
	if e == nil {
		return c.broken(LinkElasticIP, "create it, or fix the name the Pod gives", "ElasticIP %s/%s does not exist", f.Namespace, f.ElasticIPName)
	}
	if f.Pod != nil {
		c.ok(LinkElasticIP, "%s/%s on network %s", e.Namespace, e.Name, e.Spec.ExternalNetwork)
	}
	if al := meta.FindStatusCondition(e.Status.Conditions, v1alpha1.ConditionAllocated); al == nil || al.Status != metav1.ConditionTrue {
		if al != nil && al.Reason == v1alpha1.ReasonNoAddressAvailable {
			return c.broken(LinkAllocated, "release an ElasticIP of the network, or add addresses to one of its AddressPools",
				"pool exhausted: no free address on network %s (%s)", e.Spec.ExternalNetwork, poolSummary(f.Pools))
		}
		if al == nil {
			return c.broken(LinkAllocated, "check that the juneau controller runs (`kubectl -n juneau-system get pods`)", "the controller has not reserved an address yet")
		}
		return c.broken(LinkAllocated, "see the message", "%s: %s", al.Reason, al.Message)
	}
	c.ok(LinkAllocated, "%s", e.Status.Address)
	if e.Status.Attachment == nil {
		return c.broken(LinkUser, "attach it: an ElasticIPAttachment, or a Pod annotation", "nobody uses the ElasticIP (phase %s)", e.Status.Phase)
	}
	user := string(e.Status.Attachment.Kind) + " " + e.Status.Attachment.Name
	if f.Pod != nil && !usedBy(e.Status.Attachment, f.Pod.Name, f.PodAttachment) {
		return c.broken(LinkUser, "delete the other user, or have this Pod name another ElasticIP",
			"another Pod uses the ElasticIP: %s", user)
	}
	c.ok(LinkUser, "%s", user)
	if f.Pod == nil {
		if d, broken := agentLink(&c, f); broken {
			return d
		}
	}
	if at := meta.FindStatusCondition(e.Status.Conditions, v1alpha1.ConditionAttached); at == nil || at.Status != metav1.ConditionTrue {
		if at == nil {
			return c.broken(LinkAttached, "wait, or check the controller", "not attached yet")
		}
		// Held but not on the wire: the advertisement says why (a BGP session down,
		// no agent answering).
		if at.Reason == v1alpha1.ReasonNotAnnounced || at.Reason == v1alpha1.ReasonNotAnswering {
			if d, broken := wireLink(&c, f); broken {
				return d
			}
		}
		fix := "see the message"
		if at.Reason == v1alpha1.ReasonWaitingForPodIP {
			fix = "the Pod has no IP: `kubectl describe pod` shows the CNI error"
		}
		return c.broken(LinkAttached, fix, "%s: %s", at.Reason, at.Message)
	}
	c.ok(LinkAttached, "on Node %s", f.Node)
	if d, broken := wireLink(&c, f); broken {
		return d
	}
	if p := f.Pod; p != nil && len(v1alpha1.GateTypesOf(p)) > 0 {
		cond := podCondition(p, v1alpha1.PodConditionElasticIP)
		if cond == nil || cond.Status != corev1.ConditionTrue {
			msg := "not set yet"
			if cond != nil {
				msg = cond.Reason + ": " + cond.Message
			}
			return c.broken(LinkReadiness, "the node agent sets it once the datapath is programmed; check its log", "%s", msg)
		}
		c.ok(LinkReadiness, "True")
	}
	return Diagnosis{Links: c.links}
}

func agentLink(c *chain, f Facts) (Diagnosis, bool) {
	fix := fmt.Sprintf(podAgentFixFmt, f.Node)
	switch {
	case f.Node == "":
		return Diagnosis{}, false
	case f.Agent.Pod == "":
		return c.broken(LinkAgent, fix, "no juneau agent on Node %s", f.Node), true
	case !f.Agent.Ready || !f.Agent.Heartbeat:
		return c.broken(LinkAgent, fix, "the juneau agent %s on Node %s is not reporting (Ready %t, heartbeat renewed %t)",
			f.Agent.Pod, f.Node, f.Agent.Ready, f.Agent.Heartbeat), true
	}
	c.ok(LinkAgent, "%s on Node %s", f.Agent.Pod, f.Node)
	return Diagnosis{}, false
}

// wireLink checks the ARP answer or the BGP announcement of the address.
func wireLink(c *chain, f Facts) (Diagnosis, bool) {
	if f.Network != nil && f.Network.Spec.Type == v1alpha1.AdvertiseBGP {
		if f.BGP == nil {
			return c.broken(LinkAnswered, "the controller makes it once the ElasticIP is attached", "no BGPAdvertisement for %s", f.ElasticIP.Status.Address), true
		}
		an := meta.FindStatusCondition(f.BGP.Status.Conditions, v1alpha1.ConditionAnnounced)
		if an != nil && an.Status == metav1.ConditionTrue {
			c.ok(LinkAnswered, "Node %s announces %s/32 over BGP", f.BGP.Spec.NodeName, f.BGP.Spec.Address)
			return Diagnosis{}, false
		}
		if down := downSessions(f.BGPNode); len(down) > 0 {
			return c.broken(LinkAnswered, "check the router and the BGPPeer (kubectl get bgpnodestatus "+f.BGP.Spec.NodeName+" -o yaml)",
				"BGP session down on Node %s: %s", f.BGP.Spec.NodeName, strings.Join(down, "; ")), true
		}
		msg := "not announced yet"
		if an != nil {
			msg = an.Reason + ": " + an.Message
		}
		return c.broken(LinkAnswered, "see the message", "%s", msg), true
	}
	if f.ARP == nil {
		return c.broken(LinkAnswered, "the controller makes it once the ElasticIP is attached", "no ARPAdvertisement for %s", f.ElasticIP.Status.Address), true
	}
	ans := meta.FindStatusCondition(f.ARP.Status.Conditions, v1alpha1.ConditionAnswering)
	if ans == nil || ans.Status != metav1.ConditionTrue {
		msg := "no answer reported yet"
		if ans != nil {
			msg = ans.Reason + ": " + ans.Message
		}
		if ans != nil && ans.Reason == v1alpha1.ReasonAgentNotReporting {
			return c.broken(LinkAnswered, fmt.Sprintf(podAgentFixFmt, f.ARP.Spec.NodeName), "no juneau agent answers on Node %s: %s", f.ARP.Spec.NodeName, msg), true
		}
		return c.broken(LinkAnswered, "see the agent's log on Node "+f.ARP.Spec.NodeName, "%s", msg), true
	}
	c.ok(LinkAnswered, "Node %s answers ARP for %s", f.ARP.Spec.NodeName, f.ARP.Spec.Address)
	return Diagnosis{}, false
}

func downSessions(s *v1alpha1.BGPNodeStatus) []string {
	if s == nil {
		return nil
	}
	var out []string
	for _, p := range s.Status.Peers {
		if p.State != v1alpha1.BGPSessionEstablished {
			d := fmt.Sprintf("peer %s (%s) is %s", p.Name, p.PeerAddress, p.State)
			if p.StateMessage != "" {
				d += ": " + p.StateMessage
			}
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out
}

func poolSummary(pools []*v1alpha1.AddressPool) string {
	if len(pools) == 0 {
		return "no pool found"
	}
	var parts []string
	for _, p := range pools {
		parts = append(parts, fmt.Sprintf("pool %s: %d of %d free", p.Name, p.Status.Available, p.Status.Total))
	}
	return strings.Join(parts, ", ")
}

// usedBy reports whether the ElasticIP's user belongs to the Pod: one of its NICs
// (<pod>.<interface>) or the attachment that targets it.
func usedBy(a *v1alpha1.AttachmentReference, pod, attachment string) bool {
	if a.Kind == v1alpha1.AttachmentKindNetworkInterface {
		return strings.HasPrefix(a.Name, pod+".")
	}
	return a.Name == attachment
}

func podCondition(p *corev1.Pod, t string) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if string(p.Status.Conditions[i].Type) == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}
