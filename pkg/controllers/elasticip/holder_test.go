package elasticip

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loutres/juneau/pkg/apis/juneau/holder"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Users in these tests have the UID "uid-<name>" unless a case gives another one
// (withUIDs fills it in).
func att(name string) v1alpha1.AttachmentReference {
	return holder.Ref(v1alpha1.AttachmentKindElasticIPAttachment, name, types.UID("uid-"+name))
}

func nic(name string) v1alpha1.AttachmentReference { return nicUID(name, types.UID("uid-"+name)) }

func nicUID(name string, uid types.UID) v1alpha1.AttachmentReference {
	return holder.Ref(v1alpha1.AttachmentKindNetworkInterface, name, uid)
}

func withUIDs(in HolderInput) HolderInput {
	in.Attachments = slices.Clone(in.Attachments)
	for i := range in.Attachments {
		if in.Attachments[i].UID == "" {
			in.Attachments[i].UID = types.UID("uid-" + in.Attachments[i].Name)
		}
	}
	in.NICs = slices.Clone(in.NICs)
	for i := range in.NICs {
		if in.NICs[i].UID == "" {
			in.NICs[i].UID = types.UID("uid-" + in.NICs[i].Name)
		}
	}
	return in
}

func ptr(r v1alpha1.AttachmentReference) *v1alpha1.AttachmentReference { return &r }

type waits = map[v1alpha1.AttachmentReference]string

func TestDecideHolder(t *testing.T) {
	const (
		conflictAB   = `more than one ElasticIPAttachment uses this ElasticIP: "a", "b"`
		conflictANIC = `both ElasticIPAttachment "a" and NetworkInterface "web.eth0" use this ElasticIP; NAT and direct use exclude each other`
	)
	tests := []struct {
		name    string
		in      HolderInput
		want    HolderDecision
		waiting waits // what every user but the holder reads from the published status
	}{{
		name: "no users: unused",
		in:   HolderInput{Name: "eip"},
		want: HolderDecision{Reason: v1alpha1.ReasonUnused, Message: "no ElasticIPAttachment or NetworkInterface uses this ElasticIP"},
	}, {
		name: "rule 3: one attachment holds it on its node",
		in:   HolderInput{Name: "eip", Attachments: []AttachmentInfo{{Name: "a", NodeName: "n1"}}},
		want: HolderDecision{Holder: ptr(att("a")), NodeName: "n1", Reason: v1alpha1.ReasonAttached, Message: `used by ElasticIPAttachment "a"`},
	}, {
		name: "a deleting attachment is not active: the other one holds, the deleting one waits for nothing",
		in: HolderInput{Name: "eip", PreviousHolder: ptr(att("old")),
			Attachments: []AttachmentInfo{{Name: "old", Deleting: true, NodeName: "n1"}, {Name: "a", NodeName: "n2"}}},
		want: HolderDecision{Holder: ptr(att("a")), NodeName: "n2", Reason: v1alpha1.ReasonAttached, Message: `used by ElasticIPAttachment "a"`},
	}, {
		name: "only a deleting attachment: unused",
		in:   HolderInput{Name: "eip", PreviousHolder: ptr(att("a")), Attachments: []AttachmentInfo{{Name: "a", Deleting: true}}},
		want: HolderDecision{Reason: v1alpha1.ReasonUnused, Message: "no ElasticIPAttachment or NetworkInterface uses this ElasticIP"},
	}, {
		name: "rule 1: two attachments conflict, even the recorded holder loses it",
		in:   HolderInput{Name: "eip", PreviousHolder: ptr(att("a")), Attachments: []AttachmentInfo{{Name: "b"}, {Name: "a"}}},
		want: HolderDecision{Reason: v1alpha1.ReasonConflict, Conflict: true, Message: conflictAB},
		waiting: waits{
			att("a"): `ElasticIP "eip" is in conflict: ` + conflictAB,
			att("b"): `ElasticIP "eip" is in conflict: ` + conflictAB,
		},
	}, {
		name: "rule 1 with a NIC too: the message names the NIC, which waits as well",
		in: HolderInput{Name: "eip", Attachments: []AttachmentInfo{{Name: "a"}, {Name: "b"}, {Name: "c", Deleting: true}},
			NICs: []NICInfo{{Name: "web.eth0", Created: t0}}},
		want: HolderDecision{Reason: v1alpha1.ReasonConflict, Conflict: true,
			Message: conflictAB + `; it is also named by NetworkInterface "web.eth0"`},
		waiting: waits{
			att("a"):        `ElasticIP "eip" is in conflict: ` + conflictAB + `; it is also named by NetworkInterface "web.eth0"`,
			att("b"):        `ElasticIP "eip" is in conflict: ` + conflictAB + `; it is also named by NetworkInterface "web.eth0"`,
			nic("web.eth0"): `ElasticIP "eip" is in conflict: ` + conflictAB + `; it is also named by NetworkInterface "web.eth0"`,
		},
	}, {
		name: "rule 2: attachment and NIC conflict; both wait, each message naming the other",
		in: HolderInput{Name: "eip", Attachments: []AttachmentInfo{{Name: "a", NodeName: "n1"}},
			NICs: []NICInfo{{Name: "web.eth0", Created: t0, NodeName: "n2"}}},
		want: HolderDecision{Reason: v1alpha1.ReasonConflict, Conflict: true, Message: conflictANIC},
		waiting: waits{
			att("a"):        `ElasticIP "eip" is in conflict: ` + conflictANIC,
			nic("web.eth0"): `ElasticIP "eip" is in conflict: ` + conflictANIC,
		},
	}, {
		name: "rule 2: a deleting NIC conflicts too, even as the recorded holder",
		in: HolderInput{Name: "eip", PreviousHolder: ptr(nic("web.eth0")), Attachments: []AttachmentInfo{{Name: "a"}},
			NICs: []NICInfo{{Name: "web.eth0", Created: t0, Deleting: true}}},
		want: HolderDecision{Reason: v1alpha1.ReasonConflict, Conflict: true, Message: conflictANIC},
		waiting: waits{
			att("a"):        `ElasticIP "eip" is in conflict: ` + conflictANIC,
			nic("web.eth0"): `ElasticIP "eip" is in conflict: ` + conflictANIC,
		},
	}, {
		name: "rule 2 with several NICs: sorted list",
		in: HolderInput{Name: "eip", Attachments: []AttachmentInfo{{Name: "a"}},
			NICs: []NICInfo{{Name: "z.eth0", Created: t0}, {Name: "b.eth0", Created: t0.Add(time.Hour)}}},
		want: HolderDecision{Reason: v1alpha1.ReasonConflict, Conflict: true,
			Message: `both ElasticIPAttachment "a" and NetworkInterfaces "b.eth0", "z.eth0" use this ElasticIP; NAT and direct use exclude each other`},
		waiting: waits{
			att("a"):      `ElasticIP "eip" is in conflict: both ElasticIPAttachment "a" and NetworkInterfaces "b.eth0", "z.eth0" use this ElasticIP; NAT and direct use exclude each other`,
			nic("b.eth0"): `ElasticIP "eip" is in conflict: both ElasticIPAttachment "a" and NetworkInterfaces "b.eth0", "z.eth0" use this ElasticIP; NAT and direct use exclude each other`,
			nic("z.eth0"): `ElasticIP "eip" is in conflict: both ElasticIPAttachment "a" and NetworkInterfaces "b.eth0", "z.eth0" use this ElasticIP; NAT and direct use exclude each other`,
		},
	}, {
		name: "the attachment of a conflict is being deleted: the NIC takes the address at once",
		in: HolderInput{Name: "eip", Attachments: []AttachmentInfo{{Name: "a", Deleting: true}},
			NICs: []NICInfo{{Name: "web.eth0", Created: t0, NodeName: "n2"}}},
		want: HolderDecision{Holder: ptr(nic("web.eth0")), NodeName: "n2", Reason: v1alpha1.ReasonAttached, Message: `used by NetworkInterface "web.eth0"`},
	}, {
		name: "one NIC holds it",
		in:   HolderInput{Name: "eip", NICs: []NICInfo{{Name: "web.eth0", Created: t0, NodeName: "n1"}}},
		want: HolderDecision{Holder: ptr(nic("web.eth0")), NodeName: "n1", Reason: v1alpha1.ReasonAttached, Message: `used by NetworkInterface "web.eth0"`},
	}, {
		name: "rule 4a: the recorded NIC keeps it while deleting; the new NIC waits naming it",
		in: HolderInput{Name: "eip", PreviousHolder: ptr(nic("old.eth0")), NICs: []NICInfo{
			{Name: "new.eth0", Created: t0.Add(-time.Hour), NodeName: "n2"}, // older, yet the holder stays
			{Name: "old.eth0", Created: t0, Deleting: true, NodeName: "n1"},
		}},
		want: HolderDecision{Holder: ptr(nic("old.eth0")), NodeName: "n1", Reason: v1alpha1.ReasonAttached,
			Message: `used by NetworkInterface "old.eth0" (also named by NetworkInterface "new.eth0")`},
		waiting: waits{nic("new.eth0"): `ElasticIP "eip" is used by NetworkInterface "old.eth0"`},
	}, {
		name: "rule 4a is by UID: a Pod re-created under the holder's name has a new NIC, which is not the holder",
		in: HolderInput{Name: "eip", PreviousHolder: ptr(nic("web.eth0")), NICs: []NICInfo{
			{Name: "web.eth0", UID: "uid-new", Created: t0.Add(time.Hour), NodeName: "n2"},
			{Name: "aaa.eth0", Created: t0, NodeName: "n1"},
		}},
		// The recorded NIC is gone: 4(c) picks the oldest, not the namesake.
		want: HolderDecision{Holder: ptr(nic("aaa.eth0")), NodeName: "n1", Reason: v1alpha1.ReasonAttached,
			Message: `used by NetworkInterface "aaa.eth0" (also named by NetworkInterface "web.eth0")`},
		waiting: waits{nicUID("web.eth0", "uid-new"): `ElasticIP "eip" is used by NetworkInterface "aaa.eth0"`},
	}, {
		name: "a record without a UID names nobody: decided afresh",
		in: HolderInput{Name: "eip", PreviousHolder: &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindNetworkInterface, Name: "old.eth0"},
			NICs: []NICInfo{{Name: "new.eth0", Created: t0.Add(-time.Hour), NodeName: "n2"}, {Name: "old.eth0", Created: t0, NodeName: "n1"}}},
		want: HolderDecision{Holder: ptr(nic("new.eth0")), NodeName: "n2", Reason: v1alpha1.ReasonAttached,
			Message: `used by NetworkInterface "new.eth0" (also named by NetworkInterface "old.eth0")`},
		waiting: waits{nic("old.eth0"): `ElasticIP "eip" is used by NetworkInterface "new.eth0"`},
	}, {
		name: "rule 4b: without a record, a deleting non-holder blocks everyone",
		in: HolderInput{Name: "eip", NICs: []NICInfo{
			{Name: "new.eth0", Created: t0.Add(time.Hour)},
			{Name: "old.eth0", Created: t0, Deleting: true},
		}},
		want: HolderDecision{Reason: v1alpha1.ReasonWaitingForHandover,
			Message: `waiting for the deleting NetworkInterface "old.eth0" to be gone before handing the address over`},
		waiting: waits{
			nic("new.eth0"): `ElasticIP "eip" waits for a handover: waiting for the deleting NetworkInterface "old.eth0" to be gone before handing the address over`,
			nic("old.eth0"): `ElasticIP "eip" waits for a handover: waiting for the deleting NetworkInterface "old.eth0" to be gone before handing the address over`,
		},
	}, {
		name: "rule 4b: the recorded NIC is gone and others are deleting: handover, sorted names",
		in: HolderInput{Name: "eip", PreviousHolder: ptr(nic("gone.eth0")), NICs: []NICInfo{
			{Name: "y.eth0", Created: t0, Deleting: true},
			{Name: "new.eth0", Created: t0.Add(time.Hour)},
			{Name: "x.eth0", Created: t0.Add(time.Minute), Deleting: true},
		}},
		want: HolderDecision{Reason: v1alpha1.ReasonWaitingForHandover,
			Message: `waiting for the deleting NetworkInterfaces "x.eth0", "y.eth0" to be gone before handing the address over`},
		waiting: waits{
			nic("new.eth0"): `ElasticIP "eip" waits for a handover: waiting for the deleting NetworkInterfaces "x.eth0", "y.eth0" to be gone before handing the address over`,
			nic("x.eth0"):   `ElasticIP "eip" waits for a handover: waiting for the deleting NetworkInterfaces "x.eth0", "y.eth0" to be gone before handing the address over`,
			nic("y.eth0"):   `ElasticIP "eip" waits for a handover: waiting for the deleting NetworkInterfaces "x.eth0", "y.eth0" to be gone before handing the address over`,
		},
	}, {
		name: "rule 4c: the oldest NIC wins; the others wait naming it",
		in: HolderInput{Name: "eip", NICs: []NICInfo{
			{Name: "c.eth0", Created: t0.Add(2 * time.Minute)},
			{Name: "a.eth0", Created: t0.Add(time.Minute)},
			{Name: "b.eth0", Created: t0, NodeName: "n3"},
		}},
		want: HolderDecision{Holder: ptr(nic("b.eth0")), NodeName: "n3", Reason: v1alpha1.ReasonAttached,
			Message: `used by NetworkInterface "b.eth0" (also named by NetworkInterfaces "a.eth0", "c.eth0")`},
		waiting: waits{
			nic("a.eth0"): `ElasticIP "eip" is used by NetworkInterface "b.eth0"`,
			nic("c.eth0"): `ElasticIP "eip" is used by NetworkInterface "b.eth0"`,
		},
	}, {
		name: "rule 4c: same creation time, name order",
		in: HolderInput{Name: "eip", NICs: []NICInfo{
			{Name: "web-b.eth0", Created: t0},
			{Name: "web-a.eth0", Created: t0, NodeName: "n1"},
		}},
		want: HolderDecision{Holder: ptr(nic("web-a.eth0")), NodeName: "n1", Reason: v1alpha1.ReasonAttached,
			Message: `used by NetworkInterface "web-a.eth0" (also named by NetworkInterface "web-b.eth0")`},
		waiting: waits{nic("web-b.eth0"): `ElasticIP "eip" is used by NetworkInterface "web-a.eth0"`},
	}, {
		name: "the recorded holder was an attachment now gone: NICs decided afresh, no handover wait",
		in: HolderInput{Name: "eip", PreviousHolder: ptr(att("a")), NICs: []NICInfo{
			{Name: "old.eth0", Created: t0, Deleting: true},
			{Name: "new.eth0", Created: t0.Add(time.Hour), NodeName: "n2"},
		}},
		want: HolderDecision{Holder: ptr(nic("new.eth0")), NodeName: "n2", Reason: v1alpha1.ReasonAttached,
			Message: `used by NetworkInterface "new.eth0" (also named by NetworkInterface "old.eth0")`},
		waiting: waits{nic("old.eth0"): `ElasticIP "eip" is used by NetworkInterface "new.eth0"`},
	}, {
		name: "the recorded holder was an attachment now gone, only deleting NICs: nobody",
		in: HolderInput{Name: "eip", PreviousHolder: ptr(att("a")), NICs: []NICInfo{
			{Name: "y.eth0", Created: t0, Deleting: true},
			{Name: "x.eth0", Created: t0, Deleting: true},
		}},
		want: HolderDecision{Reason: v1alpha1.ReasonUnused,
			Message: `every NetworkInterface naming this ElasticIP is being deleted: "x.eth0", "y.eth0"`},
		waiting: waits{
			nic("x.eth0"): `ElasticIP "eip" has not picked this NetworkInterface yet`,
			nic("y.eth0"): `ElasticIP "eip" has not picked this NetworkInterface yet`,
		},
	}, {
		name: "rule 5: a deleting ElasticIP keeps its recorded NIC holder",
		in: HolderInput{Name: "eip", EIPDeleting: true, PreviousHolder: ptr(nic("web.eth0")), NICs: []NICInfo{
			{Name: "web.eth0", Created: t0.Add(time.Hour), NodeName: "n1"},
			{Name: "aaa.eth0", Created: t0},
		}},
		want: HolderDecision{Holder: ptr(nic("web.eth0")), NodeName: "n1", Reason: v1alpha1.ReasonAttached,
			Message: `used by NetworkInterface "web.eth0" (also named by NetworkInterface "aaa.eth0")`},
		waiting: waits{nic("aaa.eth0"): `ElasticIP "eip" is used by NetworkInterface "web.eth0"`},
	}, {
		name: "rule 5: a deleting ElasticIP gives nothing to a new NIC",
		in: HolderInput{Name: "eip", EIPDeleting: true, PreviousHolder: ptr(nic("gone.eth0")),
			NICs: []NICInfo{{Name: "web.eth0", Created: t0}}},
		want:    HolderDecision{Reason: v1alpha1.ReasonUnused, Message: "this ElasticIP is being deleted and is handed to no new user"},
		waiting: waits{nic("web.eth0"): `ElasticIP "eip" is being deleted`},
	}, {
		name: "rule 5 is by UID: a deleting ElasticIP gives nothing to the new NIC of a Pod re-created under the holder's name",
		in: HolderInput{Name: "eip", EIPDeleting: true, PreviousHolder: ptr(nic("web.eth0")),
			NICs: []NICInfo{{Name: "web.eth0", UID: "uid-new", Created: t0.Add(time.Hour), NodeName: "n2"}}},
		want:    HolderDecision{Reason: v1alpha1.ReasonUnused, Message: "this ElasticIP is being deleted and is handed to no new user"},
		waiting: waits{nicUID("web.eth0", "uid-new"): `ElasticIP "eip" is being deleted`},
	}, {
		name: "rule 5: a deleting ElasticIP keeps its recorded attachment holder",
		in: HolderInput{Name: "eip", EIPDeleting: true, PreviousHolder: ptr(att("a")),
			Attachments: []AttachmentInfo{{Name: "a", NodeName: "n1"}}},
		want: HolderDecision{Holder: ptr(att("a")), NodeName: "n1", Reason: v1alpha1.ReasonAttached, Message: `used by ElasticIPAttachment "a"`},
	}, {
		name:    "rule 5: a deleting ElasticIP gives nothing to a new attachment",
		in:      HolderInput{Name: "eip", EIPDeleting: true, Attachments: []AttachmentInfo{{Name: "a", NodeName: "n1"}}},
		want:    HolderDecision{Reason: v1alpha1.ReasonUnused, Message: "this ElasticIP is being deleted and is handed to no new user"},
		waiting: waits{att("a"): `ElasticIP "eip" is being deleted`},
	}, {
		name: "rule 5: a deleting ElasticIP without users is just unused",
		in:   HolderInput{Name: "eip", EIPDeleting: true, PreviousHolder: ptr(nic("gone.eth0"))},
		want: HolderDecision{Reason: v1alpha1.ReasonUnused, Message: "no ElasticIPAttachment or NetworkInterface uses this ElasticIP"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.in = withUIDs(tc.in)
			got := DecideHolder(tc.in)
			assertDecision(t, got, tc.want)
			assertWaiting(t, tc.in, got, tc.waiting)
			// The order of the input lists never matters.
			rng := rand.New(rand.NewPCG(uint64(len(tc.name)), 1))
			for range 5 {
				in := tc.in
				in.Attachments = shuffled(rng, tc.in.Attachments)
				in.NICs = shuffled(rng, tc.in.NICs)
				assertDecision(t, DecideHolder(in), tc.want)
			}
		})
	}
}

func assertDecision(t *testing.T, got, want HolderDecision) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DecideHolder:\n got %s\nwant %s", describe(got), describe(want))
	}
	if (got.Holder != nil) != (got.Reason == v1alpha1.ReasonAttached) {
		t.Fatalf("Holder %v does not agree with reason %q", got.Holder, got.Reason)
	}
}

// assertWaiting publishes the decision in an ElasticIP's status, as the controller
// does, and checks what every active attachment and every NIC reads there
// (holder.WaitingFor): nothing for the holder, want for each of the others.
func assertWaiting(t *testing.T, in HolderInput, d HolderDecision, want waits) {
	t.Helper()
	eip := &v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{Name: in.Name}}
	if in.EIPDeleting {
		eip.DeletionTimestamp = &metav1.Time{Time: t0}
	}
	eip.Status = desiredStatus(statusInput{eip: eip, decision: d,
		alloc: allocation{claim: &v1alpha1.AllocationClaim{ObjectMeta: metav1.ObjectMeta{Name: "10.225.51.5"}, Spec: v1alpha1.AllocationClaimSpec{Address: "10.225.51.5"}}}})
	users := map[v1alpha1.AttachmentReference]bool{}
	for _, a := range in.Attachments {
		if !a.Deleting {
			users[attachmentRef(a)] = true
		}
	}
	for _, n := range in.NICs {
		users[nicRef(n)] = true
	}
	for u := range want {
		if !users[u] {
			t.Errorf("%s %q waits but does not name the ElasticIP", u.Kind, u.Name)
		}
	}
	for u := range users {
		w, ok := want[u]
		if d.Holder != nil && *d.Holder == u {
			w, ok = "", !ok
		}
		if !ok {
			t.Errorf("%s %q: no expectation (a waiting message, or being the holder)", u.Kind, u.Name)
		}
		if got := holder.WaitingFor(eip, u); got != w {
			t.Errorf("%s %q waits for %q, want %q", u.Kind, u.Name, got, w)
		}
	}
}

func describe(d HolderDecision) string {
	h := "<nil>"
	if d.Holder != nil {
		h = string(d.Holder.Kind) + "/" + d.Holder.Name
	}
	// fmt prints map keys sorted, so the output is stable.
	return fmt.Sprintf("holder=%s node=%q reason=%s conflict=%v\n  message=%s",
		h, d.NodeName, d.Reason, d.Conflict, d.Message)
}

func shuffled[T any](rng *rand.Rand, in []T) []T {
	out := append([]T(nil), in...)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// DecideHolder must not modify what it is given (the caller's slices come from a cache).
func TestDecideHolderDoesNotModifyInput(t *testing.T) {
	nics := []NICInfo{{Name: "b.eth0", Created: t0.Add(time.Hour)}, {Name: "a.eth0", Created: t0}}
	atts := []AttachmentInfo{{Name: "z", Deleting: true}, {Name: "y", Deleting: true}}
	prev := ptr(nic("gone.eth0"))
	DecideHolder(HolderInput{Name: "eip", PreviousHolder: prev, Attachments: atts, NICs: nics})
	if nics[0].Name != "b.eth0" || atts[0].Name != "z" || prev.Name != "gone.eth0" {
		t.Fatalf("input modified: %v %v %v", nics, atts, prev)
	}
}
