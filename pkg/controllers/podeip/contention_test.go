package podeip

import (
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clienttesting "k8s.io/client-go/testing"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/status"
)

// attachmentsOf lists the attachments of the ElasticIP in the fake API server.
func (f *fixture) attachmentsOf(eip string) []string {
	f.t.Helper()
	list, err := f.client.JuneauV1alpha1().ElasticIPAttachments(testNS).List(f.ctx, metav1.ListOptions{})
	f.check(err)
	var out []string
	for _, a := range list.Items {
		if a.Spec.ElasticIPRef.Name == eip {
			out = append(out, a.Name)
		}
	}
	slices.Sort(out)
	return out
}

// Two Pods naming one free ElasticIP, synced before the cache shows either attachment:
// the first gets it, the second creates nothing and, once the cache shows the first's
// attachment, is told who uses the ElasticIP. When the first Pod goes, the second takes
// the ElasticIP over.
func TestTwoPodsOneElasticIP(t *testing.T) {
	a := newPod("a", auto(v1alpha1.AnnotationPodEIPName, "shared"))
	b := newPod("b", auto(v1alpha1.AnnotationPodEIPName, "shared"))
	f := newFixture(t, nil, a, b, nicOf(a), nicOf(b), userEIP("shared", address("10.225.51.9")))

	f.sync(testNS + "/a")
	f.expectWrites("create elasticipattachments")
	f.sync(testNS + "/b") // the cache does not show a's attachment yet: this process's memory does
	f.expectWrites("patch pods/status")
	f.expectCondition("b", corev1.ConditionFalse, v1alpha1.ReasonElasticIPInUse,
		`ElasticIP "shared" is used by Pod "a" (its ElasticIPAttachment is being created)`)
	if got := f.attachmentsOf("shared"); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("attachments of the ElasticIP = %q, want a's alone", got)
	}

	f.refresh()
	f.sync(testNS + "/a")
	f.sync(testNS + "/b")
	f.expectWrites("patch pods/status")
	f.expectCondition("b", corev1.ConditionFalse, v1alpha1.ReasonElasticIPInUse,
		`ElasticIP "shared" is used by Pod "a" (through ElasticIPAttachment "a"): an ElasticIP serves one Pod at a time, so this Pod waits and takes it over once that use ends; to have an address now, name another ElasticIP in metadata.annotations[juneau.loutres.me/pod-eip-name]`)
	evs := f.events()
	if !slices.ContainsFunc(evs, func(e string) bool {
		return strings.HasPrefix(e, "Warning "+v1alpha1.ReasonElasticIPInUse+` ElasticIP "shared" is used by Pod "a"`)
	}) {
		t.Errorf("events %q: want a Warning on b naming Pod a", evs)
	}
	if got := f.c.podsNaming(testNS, "shared"); !slices.Equal(slices.Sorted(slices.Values(got)), []string{testNS + "/a", testNS + "/b"}) {
		t.Errorf("Pods woken by the ElasticIP's attachments = %q", got)
	}

	f.check(f.kube.CoreV1().Pods(testNS).Delete(f.ctx, "a", metav1.DeleteOptions{}))
	f.refresh()
	f.sync(testNS + "/a")
	f.expectWrites("delete elasticipattachments")
	f.refresh()
	f.sync(testNS + "/b")
	f.expectWrites("create elasticipattachments", "patch pods/status")
	if got := f.attachmentsOf("shared"); !slices.Equal(got, []string{"b"}) {
		t.Errorf("attachments of the ElasticIP = %q, want b's alone", got)
	}
}

// Many workers syncing many Pods that name one ElasticIP at once create one attachment.
func TestRacingPodsOneAttachment(t *testing.T) {
	objs := []any{userEIP("shared", address("10.225.51.9"))}
	var keys []string
	for _, n := range []string{"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"} {
		p := newPod(n, auto(v1alpha1.AnnotationPodEIPName, "shared"))
		objs = append(objs, p, nicOf(p))
		keys = append(keys, testNS+"/"+n)
	}
	f := newFixture(t, nil, runtimeObjects(objs)...)
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Go(func() { _, _ = f.c.reconcile(f.ctx, k) })
	}
	wg.Wait()
	if got := f.attachmentsOf("shared"); len(got) != 1 {
		t.Errorf("attachments of the ElasticIP = %q, want exactly one", got)
	}
}

// Before writing an address on the Pod that holds it, the controller takes it off every
// other Pod carrying it, so no two Pods carry one address at any time.
func TestAddressTakenOffOthersFirst(t *testing.T) {
	stale := newPod("old", auto(v1alpha1.AnnotationPodEIPName, "other",
		v1alpha1.AnnotationAllocatedEIPName, "shared", v1alpha1.AnnotationAllocatedEIPAddr, "10.225.51.9"))
	b := newPod("b", auto(v1alpha1.AnnotationPodEIPName, "shared"))
	att := ownAttachment(b, "shared")
	f := newFixture(t, nil, stale, b, nicOf(b), att, userEIP("shared", address("10.225.51.9"), heldBy(att)))
	f.sync(testNS + "/b")
	var patched []string
	for _, a := range f.kube.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && p.GetSubresource() == "" {
			patched = append(patched, p.GetName())
		}
	}
	if !slices.Equal(patched, []string{"old", "b"}) {
		t.Fatalf("Pods patched in order %q, want the old carrier first, then b", patched)
	}
	for name, want := range map[string]string{"old": "", "b": "10.225.51.9"} {
		p, err := f.kube.CoreV1().Pods(testNS).Get(f.ctx, name, metav1.GetOptions{})
		f.check(err)
		if got := p.Annotations[v1alpha1.AnnotationAllocatedEIPAddr]; got != want {
			t.Errorf("Pod %s carries %q, want %q", name, got, want)
		}
	}
}

func runtimeObjects(objs []any) []runtime.Object {
	out := make([]runtime.Object, len(objs))
	for i, o := range objs {
		out[i] = o.(runtime.Object)
	}
	return out
}

// A patch whose metadata.uid names an earlier Pod of the name lost a race; a webhook's
// denial or another invalid change is a refusal.
func TestAnotherObjectIsARaceNotARefusal(t *testing.T) {
	gk := schema.GroupKind{Kind: "Pod"}
	uid := apierrors.NewInvalid(gk, "db-0", field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), "new", "field is immutable")})
	other := apierrors.NewInvalid(gk, "db-0", field.ErrorList{field.Invalid(field.NewPath("spec", "x"), "y", "bad")})
	denied := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "db-0", errString("denied by the webhook"))
	if !benign(uid) || refused(uid) && !status.AnotherObject(uid) {
		t.Error("a patch of an earlier Pod's UID is not a race")
	}
	for _, err := range []error{other, denied} {
		if benign(err) || !refused(err) {
			t.Errorf("%v: benign=%v refused=%v, want a refusal", err, benign(err), refused(err))
		}
	}
}
