package holder

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func TestWaitingFor(t *testing.T) {
	nic := Ref(v1alpha1.AttachmentKindNetworkInterface, "web.eth0", "uid-nic")
	att := Ref(v1alpha1.AttachmentKindElasticIPAttachment, "web.eth0", "uid-att")
	// The NIC of a Pod re-created under the same name: same name, another UID.
	newNIC := Ref(v1alpha1.AttachmentKindNetworkInterface, "web.eth0", "uid-new")
	legacy := v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindNetworkInterface, Name: "web.eth0"}
	eip := func(address string, mods ...func(*v1alpha1.ElasticIP)) *v1alpha1.ElasticIP {
		e := &v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{Name: "e"}, Status: v1alpha1.ElasticIPStatus{Address: address}}
		for _, m := range mods {
			m(e)
		}
		return e
	}
	heldBy := func(r v1alpha1.AttachmentReference) func(*v1alpha1.ElasticIP) {
		return func(e *v1alpha1.ElasticIP) { e.Status.Attachment = &r }
	}
	cond := func(t, reason, msg string) func(*v1alpha1.ElasticIP) {
		return func(e *v1alpha1.ElasticIP) {
			e.Status.Conditions = append(e.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: reason, Message: msg})
		}
	}
	deleting := func(e *v1alpha1.ElasticIP) { e.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)} }
	tests := []struct {
		name string
		eip  *v1alpha1.ElasticIP
		user v1alpha1.AttachmentReference
		want string
	}{
		{"no address", eip(""), nic, `ElasticIP "e" has no address yet`},
		{"no address, with the reason", eip("", cond(v1alpha1.ConditionAllocated, v1alpha1.ReasonNoAddressAvailable, "exhausted")), nic,
			`ElasticIP "e" has no address yet: exhausted`},
		{"a recorded holder without an address has none", eip("", heldBy(nic)), nic, `ElasticIP "e" has no address yet`},
		{"the holder waits for nothing", eip("10.225.51.5", heldBy(nic)), nic, ""},
		{"a new object of the holder's name is not the holder", eip("10.225.51.5", heldBy(nic)), newNIC,
			`ElasticIP "e" is used by an earlier NetworkInterface of the same name "web.eth0" (UID "uid-nic"), not by this one`},
		{"a record without UID names nobody", eip("10.225.51.5", heldBy(legacy)), nic,
			`ElasticIP "e" is used by an earlier NetworkInterface of the same name "web.eth0" (recorded without a UID), not by this one`},
		{"a user of another kind with the holder's name", eip("10.225.51.5", heldBy(nic)), att, `ElasticIP "e" is used by NetworkInterface "web.eth0"`},
		{"conflict", eip("10.225.51.5", cond(v1alpha1.ConditionAttached, v1alpha1.ReasonConflict, "two users")), att,
			`ElasticIP "e" is in conflict: two users`},
		{"handover", eip("10.225.51.5", cond(v1alpha1.ConditionAttached, v1alpha1.ReasonWaitingForHandover, "waiting for x")), nic,
			`ElasticIP "e" waits for a handover: waiting for x`},
		{"being deleted", eip("10.225.51.5", deleting), nic, `ElasticIP "e" is being deleted`},
		{"a deleting ElasticIP still names its holder", eip("10.225.51.5", deleting, heldBy(att)), nic, `ElasticIP "e" is used by ElasticIPAttachment "web.eth0"`},
		{"not decided yet", eip("10.225.51.5", cond(v1alpha1.ConditionAttached, v1alpha1.ReasonUnused, "nobody")), att,
			`ElasticIP "e" has not picked this ElasticIPAttachment yet`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := WaitingFor(tt.eip, tt.user); got != tt.want {
				t.Errorf("WaitingFor = %q, want %q", got, tt.want)
			}
		})
	}
}
