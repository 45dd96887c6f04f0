// Package holder reads the decision the ElasticIP controller publishes in an
// ElasticIP's status: who uses its address (status.attachment) and, for every other
// ElasticIPAttachment or NetworkInterface naming it, what that one waits for. The
// ElasticIP controller alone decides (docs/design.md#who-decides); the attachment and
// NetworkInterface status writers, the tests and the docs read the decision through
// this package, so its explanation is worded in one place.
package holder

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// Ref is the reference to one user of an ElasticIP: its kind, name and UID.
func Ref(kind v1alpha1.AttachmentKind, name string, uid types.UID) v1alpha1.AttachmentReference {
	return v1alpha1.AttachmentReference{Kind: kind, Name: name, UID: uid}
}

// Is reports whether the recorded holder is that very user: same kind, name and UID. A
// Pod re-created under the same name has a NetworkInterface of the same name and another
// UID, which is not the recorded holder; a record without a UID (written before holders
// carried one) names nobody, so the holder is decided afresh (docs/reference.md#holder).
func Is(recorded *v1alpha1.AttachmentReference, user v1alpha1.AttachmentReference) bool {
	return recorded != nil && recorded.UID != "" && *recorded == user
}

// WaitingFor says what user, an ElasticIPAttachment or NetworkInterface naming the
// ElasticIP, waits for: "" when it holds the address; otherwise a sentence naming the
// ElasticIP and what stands in the way, read from the published status:
//   - no address yet (with the Allocated condition's message);
//   - another user recorded in status.attachment (also an earlier object of the user's
//     kind and name);
//   - a conflict, or a handover from a deleting NIC (with the Attached message);
//   - the ElasticIP is being deleted;
//   - otherwise the ElasticIP has not picked user yet (its controller has not seen it).
func WaitingFor(eip *v1alpha1.ElasticIP, user v1alpha1.AttachmentReference) string {
	switch att := eip.Status.Attachment; {
	case eip.Status.Address == "":
		msg := fmt.Sprintf("ElasticIP %q has no address yet", eip.Name)
		if c := meta.FindStatusCondition(eip.Status.Conditions, v1alpha1.ConditionAllocated); c != nil && c.Message != "" {
			msg += ": " + c.Message
		}
		return msg
	case Is(att, user):
		return ""
	case att != nil && att.Kind == user.Kind && att.Name == user.Name:
		which := fmt.Sprintf("UID %q", att.UID)
		if att.UID == "" {
			which = "recorded without a UID"
		}
		return fmt.Sprintf("ElasticIP %q is used by an earlier %s of the same name %q (%s), not by this one",
			eip.Name, att.Kind, att.Name, which)
	case att != nil:
		return fmt.Sprintf("ElasticIP %q is used by %s %q", eip.Name, att.Kind, att.Name)
	}
	if c := meta.FindStatusCondition(eip.Status.Conditions, v1alpha1.ConditionAttached); c != nil {
		switch c.Reason {
		case v1alpha1.ReasonConflict:
			return fmt.Sprintf("ElasticIP %q is in conflict: %s", eip.Name, c.Message)
		case v1alpha1.ReasonWaitingForHandover:
			return fmt.Sprintf("ElasticIP %q waits for a handover: %s", eip.Name, c.Message)
		}
	}
	if eip.DeletionTimestamp != nil {
		return fmt.Sprintf("ElasticIP %q is being deleted", eip.Name)
	}
	return fmt.Sprintf("ElasticIP %q has not picked this %s yet", eip.Name, user.Kind)
}
