package elasticip

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func withVersion[T interface{ SetResourceVersion(string) }](obj T, rv string) T {
	obj.SetResourceVersion(rv)
	return obj
}

// wakes says whether step queued the ElasticIP (its key must not be queued before).
func wakes(f *fixture, step func()) bool {
	before := f.ctrl.eipLoop.Len()
	step()
	return f.ctrl.eipLoop.Len() > before
}

// write simulates a write of the ElasticIP at key through Controller.written: during
// it, the events of during are delivered (as the watch may deliver them before the
// answer); it returns the version given and whether the write woke the ElasticIP.
func write(f *fixture, key string, kind writeKind, name, version string, quiet bool, fail bool, during func()) bool {
	return wakes(f, func() {
		_, _ = f.ctrl.written(key, kind, func() (string, string, bool, error) {
			if during != nil {
				during()
			}
			if fail {
				return "", "", false, errors.New("the API server is gone")
			}
			return name, version, quiet, nil
		})
	})
}

// The watch event of the controller's own status write does not wake the ElasticIP,
// whether it comes after the answer to the write or before it; every other version
// does: a write by someone else, an older version from a lagging cache, a resync (same
// version), an event during a write that failed. A write is matched once.
func TestStatusEchoWakesNobody(t *testing.T) {
	f := newFixture(t, poolAndNetwork("10.225.51.0/24"))
	h := f.ctrl.eipHandler()
	eip := func(name, rv string) *v1alpha1.ElasticIP {
		return withVersion(elasticIP(name, types.UID("uid-"+name)), rv)
	}

	if write(f, "default/a", statusWrite, "a", "5", true, false, nil) {
		t.Error("a write with no event during it woke the ElasticIP")
	}
	if wakes(f, func() { h.OnUpdate(eip("a", "4"), eip("a", "5")) }) {
		t.Error("the echo of our own write woke the ElasticIP")
	}
	if !wakes(f, func() { h.OnUpdate(eip("a", "4"), eip("a", "5")) }) {
		t.Error("a second event of that version (matched already) did not wake it")
	}

	if write(f, "default/b", statusWrite, "b", "5", true, false, func() { h.OnUpdate(eip("b", "4"), eip("b", "5")) }) {
		t.Error("the echo delivered before the answer to our write woke the ElasticIP")
	}
	if !write(f, "default/c", statusWrite, "c", "7", true, false, func() { h.OnUpdate(eip("c", "4"), eip("c", "6")) }) {
		t.Error("someone else's version delivered during our write did not wake the ElasticIP")
	}
	if !write(f, "default/d", statusWrite, "d", "", true, true, func() { h.OnUpdate(eip("d", "4"), eip("d", "5")) }) {
		t.Error("an event during a write that failed did not wake the ElasticIP")
	}
	if !write(f, "default/e", statusWrite, "e", "5", false, false, func() { h.OnUpdate(eip("e", "4"), eip("e", "5")) }) {
		t.Error("the echo of a write that must be seen again (holder changed) did not wake the ElasticIP")
	}

	write(f, "default/g", statusWrite, "g", "8", true, false, nil)
	if !wakes(f, func() { h.OnUpdate(eip("g", "6"), eip("g", "7")) }) {
		t.Error("someone else's version did not wake it")
	}
	// Once a version we did not write is shown, ours is forgotten: the watch shows the
	// versions of an object in order, so ours is not coming any more.
	if _, ok := f.ctrl.echoes.expect["default/g"]; ok {
		t.Error("our write is still remembered after a later foreign version")
	}

	write(f, "default/h", statusWrite, "h", "9", true, false, nil)
	if !wakes(f, func() { h.OnUpdate(eip("h", "9"), eip("h", "9")) }) {
		t.Error("a resync did not wake it")
	}
	write(f, "default/i", statusWrite, "i", "9", true, false, nil)
	if !wakes(f, func() { h.OnDelete(eip("i", "9")) }) {
		t.Error("a deletion did not wake it")
	}
	if _, ok := f.ctrl.echoes.expect["default/i"]; ok {
		t.Error("the write of a deleted ElasticIP is still remembered")
	}
}

// The claim the controller created wakes nobody when the informer shows it, before or
// after the answer to the create, also during the status write that follows; a claim
// the cache shows in another version, or one created by someone else, wakes its
// consumer. Either way the orphan check sees it.
func TestCreatedClaimEchoWakesNobody(t *testing.T) {
	f := newFixture(t, poolAndNetwork("10.225.51.0/24"))
	h := f.ctrl.claimHandler()
	a, b, c := elasticIP("a", "uid-a"), elasticIP("b", "uid-b"), elasticIP("c", "uid-c")

	write(f, "default/a", claimWrite, "10.225.51.1", "3", true, false, nil)
	if wakes(f, func() { h.OnAdd(withVersion(claimFor("10.225.51.1", a), "3"), false) }) {
		t.Error("the echo of our own claim woke its ElasticIP")
	}
	if f.ctrl.claimLoop.Len() != 1 {
		t.Errorf("orphan check queue = %d, want 1", f.ctrl.claimLoop.Len())
	}

	// The claim's echo comes before the create's answer; the status echo before the
	// status write's answer, and the claim's echo of a second sync during its status write.
	if write(f, "default/b", claimWrite, "10.225.51.2", "4", true, false, func() { h.OnAdd(withVersion(claimFor("10.225.51.2", b), "4"), false) }) {
		t.Error("the echo of our claim delivered before the create's answer woke its ElasticIP")
	}
	if len(f.ctrl.echoes.expect) != 0 { // both echoes came: nothing is left to match
		t.Errorf("writes still expected: %v", f.ctrl.echoes.expect)
	}
	write(f, "default/c", claimWrite, "10.225.51.3", "5", true, false, nil)
	if write(f, "default/c", statusWrite, "c", "6", true, false, func() { h.OnAdd(withVersion(claimFor("10.225.51.3", c), "5"), false) }) {
		t.Error("the echo of our claim delivered during the status write woke its ElasticIP")
	}

	write(f, "default/a", claimWrite, "10.225.51.4", "7", true, false, nil)
	if !wakes(f, func() { h.OnAdd(withVersion(claimFor("10.225.51.4", a), "8"), false) }) {
		t.Error("a newer version of our claim did not wake its ElasticIP")
	}
	other := elasticIP("other", "uid-other")
	if !wakes(f, func() { h.OnAdd(withVersion(claimFor("10.225.51.5", other), "9"), false) }) {
		t.Error("someone else's claim did not wake its ElasticIP")
	}
}

// A routine allocation's status write is remembered for its echo with the version the
// API server gave it; a write that changes the holder is not.
func TestSyncRemembersItsStatusWrite(t *testing.T) {
	eip := elasticIP("nginx-eip", "uid-1")
	f := newFixture(t, append(poolAndNetwork("10.225.51.0/24"), eip))
	got := f.sync("default/nginx-eip")
	if got.Status.Phase != v1alpha1.ElasticIPAvailable {
		t.Fatalf("phase = %s, want Available", got.Status.Phase)
	}
	if w, ok := f.ctrl.echoes.expect["default/nginx-eip"][statusWrite]; !ok || w.version != got.ResourceVersion {
		t.Errorf("remembered %+v, want the written version %q", w, got.ResourceVersion)
	}

	held := elasticIP("held", "uid-3")
	att := &v1alpha1.ElasticIPAttachment{}
	att.Name, att.Namespace, att.UID = "att", "default", "att-uid"
	att.Spec.ElasticIPRef.Name = "held"
	f = newFixture(t, append(poolAndNetwork("10.225.51.0/24"), held, claimFor("10.225.51.4", held), att))
	got = f.sync("default/held")
	if got.Status.Attachment == nil {
		t.Fatalf("no holder recorded: %+v", got.Status)
	}
	if w, ok := f.ctrl.echoes.expect["default/held"][statusWrite]; ok {
		t.Errorf("a write that changed the holder was remembered (%+v)", w)
	}
}

// A status write that keeps the holder is remembered for its echo; one that changes the
// holder is not, since the holder decision reads the recorded holder.
func TestSameHolder(t *testing.T) {
	a := &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindElasticIPAttachment, Name: "a", UID: "u1"}
	b := &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindElasticIPAttachment, Name: "a", UID: "u2"}
	for _, tc := range []struct {
		x, y *v1alpha1.AttachmentReference
		want bool
	}{{nil, nil, true}, {a, nil, false}, {nil, a, false}, {a, &v1alpha1.AttachmentReference{Kind: a.Kind, Name: a.Name, UID: a.UID}, true}, {a, b, false}} {
		if got := sameHolder(tc.x, tc.y); got != tc.want {
			t.Errorf("sameHolder(%v, %v) = %v, want %v", tc.x, tc.y, got, tc.want)
		}
	}
}
