package elasticip

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/messages"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/controllers/indexes"
	"github.com/loutres/juneau/pkg/controllers/ipam"
	"github.com/loutres/juneau/pkg/status"
)

// statusInput is everything the ElasticIP status is derived from.
type statusInput struct {
	eip  *v1alpha1.ElasticIP
	deps *conditionError // network or pools unusable, and no address reserved before
	// outside says why the reserved address lies in no usable pool any more (it stays
	// reserved; keepReservation); "" normally.
	outside string
	// notAdmitted says why the network does not admit the ElasticIP's namespace any more
	// (tenancy.go); an address reserved before stays. "" normally.
	notAdmitted string
	alloc       allocation
	decision    HolderDecision
	// waitingFor lists the NICs a deleting ElasticIP waits for (sorted); nil otherwise.
	waitingFor []string
	// blocked says why the holder cannot carry traffic yet (trafficBlocked); nil when it
	// can or when nobody holds the address.
	blocked *conditionError
	// now stamps the conditions whose status flips.
	now metav1.Time
}

// desiredStatus is docs/reference.md#elasticip as a pure function. Conditions keep their transition time
// unless their status flips (status.Merge).
func desiredStatus(in statusInput) v1alpha1.ElasticIPStatus {
	st := computeStatus(in)
	st.Conditions = status.Merge(in.eip.Status.Conditions, st.Conditions, in.now)
	return st
}

// computeStatus is the status without the recorded conditions merged in.
func computeStatus(in statusInput) v1alpha1.ElasticIPStatus {
	eip := in.eip
	var st v1alpha1.ElasticIPStatus
	setCond := func(t string, ok bool, reason, msg string) {
		cs := metav1.ConditionFalse
		if ok {
			cs = metav1.ConditionTrue
		}
		st.Conditions = append(st.Conditions, metav1.Condition{Type: t, Status: cs, Reason: reason, Message: msg, ObservedGeneration: eip.Generation})
	}
	claim := in.alloc.claim
	switch {
	case in.deps != nil:
		// The dependencies are broken and no reservation could stand on them
		// (keepReservation): the address and holder recorded are kept, nothing is
		// decided. A reservation that exists is still reported as one.
		st.Phase = v1alpha1.ElasticIPError
		st.Address = eip.Status.Address
		st.Attachment = eip.Status.Attachment
		if claim != nil {
			st.Address = claim.Spec.Address
			setCond(v1alpha1.ConditionAllocated, true, v1alpha1.ReasonAllocated, fmt.Sprintf("address %q reserved from AddressPool %q; %s",
				claim.Spec.Address, claim.Spec.AddressPool, in.deps.message))
		} else {
			setCond(v1alpha1.ConditionAllocated, false, in.deps.reason, in.deps.message)
		}
		setCond(v1alpha1.ConditionAttached, false, in.deps.reason, in.deps.message)
		return st
	case claim == nil:
		st.Phase = v1alpha1.ElasticIPPending
		reason, msg := v1alpha1.ReasonNoAddressAvailable, "no address reserved yet"
		if in.alloc.err != nil {
			reason, msg = in.alloc.err.reason, in.alloc.err.message
			if reason == v1alpha1.ReasonInvalidAddressPool {
				st.Phase = v1alpha1.ElasticIPError
			}
		}
		setCond(v1alpha1.ConditionAllocated, false, reason, msg)
		setCond(v1alpha1.ConditionAttached, false, v1alpha1.ReasonNotAllocated, "no address is reserved, so nobody can use this ElasticIP yet")
		return st
	}
	st.Address = claim.Spec.Address
	if in.waitingFor != nil {
		setCond(v1alpha1.ConditionAllocated, true, v1alpha1.ReasonWaitingForNetworkInterfaces,
			fmt.Sprintf("being deleted; address %q stays reserved until these NetworkInterfaces are gone: %s", claim.Spec.Address, messages.Names(in.waitingFor)))
	} else {
		msg := fmt.Sprintf("address %q reserved from AddressPool %q", claim.Spec.Address, claim.Spec.AddressPool)
		if in.outside != "" {
			msg += ", " + in.outside
		}
		if in.notAdmitted != "" {
			msg += "; " + keptDespite(in.notAdmitted)
		}
		setCond(v1alpha1.ConditionAllocated, true, v1alpha1.ReasonAllocated, msg)
	}
	d := in.decision
	switch {
	case d.Holder != nil && in.blocked != nil:
		// Used, so the phase is Attached, but no traffic reaches the user yet: the
		// condition (kubectl get's ATTACHED) says so.
		setCond(v1alpha1.ConditionAttached, false, in.blocked.reason, in.blocked.message)
	default:
		setCond(v1alpha1.ConditionAttached, d.Holder != nil, d.Reason, d.Message)
	}
	switch {
	case d.Conflict:
		st.Phase = v1alpha1.ElasticIPError
	case d.Holder != nil:
		st.Phase = v1alpha1.ElasticIPAttached
		h := *d.Holder
		st.Attachment = &h
	default:
		st.Phase = v1alpha1.ElasticIPAvailable
	}
	return st
}

// writeStatus writes status when it differs and emits Events on transitions.
//
// Unlike the other status writers, which apply their fields with server-side apply,
// it replaces the status with UpdateStatus: status.attachment is the decision of who
// uses the address, and the resourceVersion of the update makes that decision
// conditional on the ElasticIP it was computed from. A second writer (a leader that has
// not yet noticed its successor) then gets a Conflict and decides again from the newer
// object, instead of overwriting a holder it never saw.
func (c *Controller) writeStatus(ctx context.Context, eip *v1alpha1.ElasticIP, st v1alpha1.ElasticIPStatus) error {
	if equality.Semantic.DeepEqual(eip.Status, st) {
		return nil
	}
	updated := eip.DeepCopy()
	updated.Status = st
	// The watch event of this write brings back the object this sync just derived its
	// status from, so it need not wake the ElasticIP (echo.go). Not when the holder
	// changed: the holder decision reads the recorded holder, so the next sync must see
	// the new one.
	quiet := sameHolder(eip.Status.Attachment, st.Attachment)
	_, err := c.written(indexes.Key(eip.Namespace, eip.Name), statusWrite, func() (string, string, bool, error) {
		written, err := c.client.JuneauV1alpha1().ElasticIPs(eip.Namespace).UpdateStatus(ctx, updated,
			metav1.UpdateOptions{FieldManager: v1alpha1.FieldManagerController})
		if err != nil {
			return "", "", false, err
		}
		return written.Name, written.ResourceVersion, quiet, nil
	})
	if apierrors.IsConflict(err) {
		return err // retried with the newer version
	}
	if err != nil {
		return fmt.Errorf("writing status of ElasticIP %s/%s: %w", eip.Namespace, eip.Name, err)
	}
	if !meta.IsStatusConditionTrue(eip.Status.Conditions, v1alpha1.ConditionAttached) && meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionAttached) {
		c.metrics.attached(c.clock.Since(eip.CreationTimestamp.Time))
	}
	for t, policy := range conditionEvents {
		status.Announce(c.recorder, eip, policy,
			meta.FindStatusCondition(eip.Status.Conditions, t), meta.FindStatusCondition(st.Conditions, t))
	}
	if !meta.IsStatusConditionTrue(eip.Status.Conditions, v1alpha1.ConditionAllocated) &&
		meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionAllocated) {
		c.metrics.allocatedAfter(c.clock.Since(eip.CreationTimestamp.Time))
	}
	if l := klog.FromContext(ctx).V(2); l.Enabled() {
		l.Info("Updated status", "elasticIP", klog.KObj(eip), "phase", st.Phase, "address", st.Address, "attachment", st.Attachment)
	}
	return nil
}

// conditionEvents announces every change of Allocated and Attached with the severity
// of its reason, but not the routine start of a new ElasticIP: an address reserved at
// once (Allocated True) and nobody using it yet (Attached False). Those are counted by
// the metric juneau_elasticip_allocations_total instead; a first status that is a
// Warning (no address available, an invalid pool) is announced, and so is every later
// change (an address found after waiting, a user, a conflict).
var conditionEvents = map[string]status.Policy{
	v1alpha1.ConditionAllocated: {Quiet: metav1.ConditionTrue},
	v1alpha1.ConditionAttached:  {Quiet: metav1.ConditionFalse},
}

// Small formatting helpers (docs/reference.md#messages).

func joinSorted(items []string) string {
	s := slices.Clone(items)
	slices.Sort(s)
	return strings.Join(s, ", ")
}

func poolNames(pools []ipam.Pool) string {
	names := make([]string, len(pools))
	for i, p := range pools {
		names[i] = p.Name
	}
	return messages.Names(names)
}

func compareAddr(a, b string) int {
	x, errX := netip.ParseAddr(a)
	y, errY := netip.ParseAddr(b)
	if errX != nil || errY != nil {
		return strings.Compare(a, b)
	}
	return x.Compare(y)
}

func jsonList(items []string) string {
	b, _ := json.Marshal(items)
	return string(b)
}
