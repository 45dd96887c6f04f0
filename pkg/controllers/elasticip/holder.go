package elasticip

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/loutres/juneau/pkg/apis/juneau/holder"
	"github.com/loutres/juneau/pkg/apis/juneau/messages"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// AttachmentInfo is what the holder decision needs of an ElasticIPAttachment naming the
// ElasticIP. A deleting attachment is not active: it neither uses the address nor stands
// in anyone's way (NAT is programmed from status.attachment, so taking the address away
// from it is immediate). Only active attachments count in the rules below.
type AttachmentInfo struct {
	Name     string
	UID      types.UID
	Deleting bool
	NodeName string // status.nodeName
}

// NICInfo is what the holder decision needs of a NetworkInterface whose spec.elasticIP
// names the ElasticIP. A deleting NIC still counts: its Pod may still carry the address.
// A NIC made after its Pod's network was set up (spec.createdAfterPodNetwork) was never
// plumbed and is no user at all: the caller leaves it out.
type NICInfo struct {
	Name     string
	UID      types.UID
	Created  time.Time
	Deleting bool
	NodeName string // spec.nodeName
}

// HolderInput is everything that decides who uses one ElasticIP.
type HolderInput struct {
	// Name of the ElasticIP, for the messages of those that wait.
	Name        string
	EIPDeleting bool
	// PreviousHolder is status.attachment as last recorded (nil: nobody, or unknown
	// after an Error). It names one object: a user of the same kind and name but
	// another UID is not it (holder.Is).
	PreviousHolder *v1alpha1.AttachmentReference
	Attachments    []AttachmentInfo
	NICs           []NICInfo
}

// HolderDecision says who uses the ElasticIP and what everyone else waits for.
type HolderDecision struct {
	// Holder is the new status.attachment; nil while nobody uses the address.
	Holder *v1alpha1.AttachmentReference
	// NodeName is the holder's node (an attachment's status.nodeName, a NIC's spec.nodeName).
	NodeName string
	// Reason and Message are for the ElasticIP's Attached condition, which is True
	// exactly when Holder is set.
	Reason  string
	Message string
	// Conflict: NAT and direct use at once, or several attachments; the phase is Error.
	Conflict bool
}

// What everyone but the holder waits for is not part of the decision: it follows from
// the decision once published in the ElasticIP's status, and every reader words it
// with holder.WaitingFor.

// DecideHolder applies docs/reference.md#holder in order:
//  1. more than one active attachment: Conflict;
//  2. an active attachment and any NIC (even a deleting one): Conflict;
//  3. one active attachment: it holds the address;
//  4. NICs only: (a) the recorded NIC holder (the very object, by UID) keeps it while
//     it exists, even deleting;
//     (b) otherwise any deleting NIC blocks everyone (WaitingForHandover), because
//     without a record of the holder it may still carry the address; (c) otherwise the
//     oldest NIC, ties broken by name;
//  5. a deleting ElasticIP hands its address to nobody new; the recorded holder keeps it.
//
// When the recorded holder is an attachment that is gone (or deleting), no NIC can carry
// the address, so the NICs are decided afresh without waiting for a handover; a NIC
// being deleted is then never picked.
func DecideHolder(in HolderInput) HolderDecision {
	var active []AttachmentInfo
	for _, a := range in.Attachments {
		if !a.Deleting {
			active = append(active, a)
		}
	}
	slices.SortFunc(active, func(a, b AttachmentInfo) int { return strings.Compare(a.Name, b.Name) })
	nics := slices.Clone(in.NICs)
	slices.SortFunc(nics, func(a, b NICInfo) int {
		return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.Name, b.Name))
	})
	d := decider{in: in, active: active, nics: nics}

	switch {
	case len(active) > 1:
		return d.conflict(fmt.Sprintf("more than one ElasticIPAttachment uses this ElasticIP: %s", messages.Names(attachmentNames(active))) +
			d.alsoNamedByNICs())
	case len(active) == 1 && len(nics) > 0:
		return d.conflict(fmt.Sprintf("both %s and %s use this ElasticIP; NAT and direct use exclude each other",
			messages.Kinds("ElasticIPAttachment", attachmentNames(active)), messages.Kinds("NetworkInterface", nicNames(nics))))
	case len(active) == 1:
		a := active[0]
		ref := attachmentRef(a)
		if in.EIPDeleting && !d.wasHolder(ref) {
			return nobody(v1alpha1.ReasonUnused, deletingMessage)
		}
		return d.holder(ref, a.NodeName)
	case len(nics) == 0:
		return nobody(v1alpha1.ReasonUnused, "no ElasticIPAttachment or NetworkInterface uses this ElasticIP")
	}
	return d.decideNICs()
}

const deletingMessage = "this ElasticIP is being deleted and is handed to no new user"

// decideNICs is rule 4 (and 5) once no active attachment is left.
func (d decider) decideNICs() HolderDecision {
	prev := d.in.PreviousHolder
	if i := slices.IndexFunc(d.nics, func(n NICInfo) bool { return holder.Is(prev, nicRef(n)) }); i >= 0 {
		return d.holder(*prev, d.nics[i].NodeName) // 4(a)
	}
	if d.in.EIPDeleting { // 5
		return nobody(v1alpha1.ReasonUnused, deletingMessage)
	}
	var deleting, live []NICInfo
	for _, n := range d.nics {
		if n.Deleting {
			deleting = append(deleting, n)
		} else {
			live = append(live, n)
		}
	}
	prevWasAttachment := prev != nil && prev.Kind == v1alpha1.AttachmentKindElasticIPAttachment
	if len(deleting) > 0 && !prevWasAttachment { // 4(b)
		return nobody(v1alpha1.ReasonWaitingForHandover, fmt.Sprintf("waiting for the deleting %s to be gone before handing the address over",
			messages.Kinds("NetworkInterface", nicNames(deleting))))
	}
	if len(live) == 0 {
		return nobody(v1alpha1.ReasonUnused, fmt.Sprintf("every NetworkInterface naming this ElasticIP is being deleted: %s", messages.Names(nicNames(deleting))))
	}
	return d.holder(nicRef(live[0]), live[0].NodeName) // 4(c): oldest, then by name
}

// decider holds the sorted views of one input.
type decider struct {
	in     HolderInput
	active []AttachmentInfo // sorted by name
	nics   []NICInfo        // oldest first, ties by name
}

func (d decider) wasHolder(ref v1alpha1.AttachmentReference) bool {
	return holder.Is(d.in.PreviousHolder, ref)
}

func (d decider) holder(ref v1alpha1.AttachmentReference, node string) HolderDecision {
	out := HolderDecision{
		Holder:   &ref,
		NodeName: node,
		Reason:   v1alpha1.ReasonAttached,
		Message:  fmt.Sprintf("used by %s %q", ref.Kind, ref.Name),
	}
	// Whoever else is left here is a NIC: a held attachment excludes every NIC (rule 2)
	// and every other active attachment (rule 1).
	var losers []string
	for _, n := range d.nics {
		if nicRef(n) != ref {
			losers = append(losers, n.Name)
		}
	}
	if len(losers) > 0 {
		slices.Sort(losers)
		out.Message += fmt.Sprintf(" (also named by %s)", messages.Kinds("NetworkInterface", losers))
	}
	return out
}

func nobody(reason, msg string) HolderDecision {
	return HolderDecision{Reason: reason, Message: msg}
}

func (d decider) conflict(msg string) HolderDecision {
	return HolderDecision{Reason: v1alpha1.ReasonConflict, Message: msg, Conflict: true}
}

func (d decider) alsoNamedByNICs() string {
	if len(d.nics) == 0 {
		return ""
	}
	return fmt.Sprintf("; it is also named by %s", messages.Kinds("NetworkInterface", nicNames(d.nics)))
}

func attachmentRef(a AttachmentInfo) v1alpha1.AttachmentReference {
	return holder.Ref(v1alpha1.AttachmentKindElasticIPAttachment, a.Name, a.UID)
}

func nicRef(n NICInfo) v1alpha1.AttachmentReference {
	return holder.Ref(v1alpha1.AttachmentKindNetworkInterface, n.Name, n.UID)
}

func attachmentNames(as []AttachmentInfo) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Name
	}
	slices.Sort(out)
	return out
}

func nicNames(ns []NICInfo) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Name
	}
	slices.Sort(out)
	return out
}
