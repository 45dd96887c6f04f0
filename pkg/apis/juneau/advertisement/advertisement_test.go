package advertisement

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// takenBy builds the lookup Name needs from existing advertisements.
func takenBy(existing ...metav1.ObjectMeta) func(string) (Owner, bool) {
	return func(name string) (Owner, bool) {
		for _, m := range existing {
			if m.Name == name {
				o, _ := OwnerOf(&m)
				return o, true
			}
		}
		return Owner{}, false
	}
}

func TestNameCollidingOwners(t *testing.T) {
	ab := Owner{Namespace: "a-b", Name: "c", UID: "uid-ab"}
	a := Owner{Namespace: "a", Name: "b-c", UID: "uid-a"}
	if PreferredName(ab.Namespace, ab.Name) != PreferredName(a.Namespace, a.Name) {
		t.Fatal("the two owners were meant to share the preferred name")
	}
	first, ok := Name(ab, takenBy())
	if !ok || first != "eip-a-b-c" {
		t.Fatalf("first owner: %q %v, want the preferred name", first, ok)
	}
	second, ok := Name(a, takenBy(Meta(first, ab)))
	if !ok || second != HashedName("a", "b-c") || second == first {
		t.Fatalf("second owner: %q %v, want the hashed name %q", second, ok, HashedName("a", "b-c"))
	}
	// Deterministic: asked again (after a restart, say) the answers are the same.
	if again, _ := Name(a, takenBy(Meta(first, ab))); again != second {
		t.Errorf("second owner asked again: %q, want %q", again, second)
	}
	// The preferred name already being the owner's own is no obstacle.
	if got, _ := Name(ab, takenBy(Meta(first, ab))); got != first {
		t.Errorf("owner of the preferred name: %q, want %q", got, first)
	}
	// Should the hashed name be someone else's too, the UID-hashed one is next.
	other := Owner{Namespace: "x", Name: "y", UID: "uid-x"}
	third, ok := Name(a, takenBy(Meta(first, ab), Meta(second, other)))
	if !ok || third == first || third == second || !strings.HasPrefix(third, "eip-a-b-c-") {
		t.Errorf("with both taken: %q %v", third, ok)
	}
}

func TestNameTooLong(t *testing.T) {
	long := strings.Repeat("n", 248)
	o := Owner{Namespace: "ns-1", Name: long, UID: "u"}
	if p := PreferredName(o.Namespace, o.Name); len(p) != 257 {
		t.Fatalf("preferred name has %d characters", len(p))
	}
	got, ok := Name(o, takenBy())
	if !ok || got != HashedName(o.Namespace, o.Name) {
		t.Fatalf("Name = %q %v, want the hashed name", got, ok)
	}
	if len(got) > MaxNameLength || len(utilvalidation.IsDNS1123Subdomain(got)) > 0 {
		t.Errorf("%q (%d characters) is not a valid object name: %v", got, len(got), utilvalidation.IsDNS1123Subdomain(got))
	}
	// Another name with the same first 240 characters gets another hash.
	if HashedName(o.Namespace, long+"x") == got {
		t.Error("two long names share a hashed name")
	}
}

// Hashed names stay valid object names wherever the cut falls (on "-" or "." too).
func TestHashedNameValid(t *testing.T) {
	for _, name := range []string{
		"web", strings.Repeat("a", 253), strings.Repeat("a-", 126) + "a", strings.Repeat("a.", 126) + "a",
		strings.Repeat("a", 236) + "-." + strings.Repeat("b", 15), strings.Repeat("a", 237) + ".b",
	} {
		got := HashedName("some-namespace", name)
		if errs := utilvalidation.IsDNS1123Subdomain(got); len(errs) > 0 {
			t.Errorf("HashedName(%.20q...) = %q: %v", name, got, errs)
		}
	}
}

func TestOwnership(t *testing.T) {
	o := Owner{Namespace: "ns", Name: "web", UID: "uid-1"}
	m := Meta("eip-ns-web", o)
	if got, ok := OwnerOf(&m); !ok || got != o {
		t.Errorf("OwnerOf = %+v %v, want %+v", got, ok, o)
	}
	if !Belongs(&m, o) || !Labelled(&m, o) {
		t.Error("the owner does not own its advertisement")
	}
	// A new ElasticIP of the same namespace and name is another owner.
	if Belongs(&m, Owner{Namespace: "ns", Name: "web", UID: "uid-2"}) {
		t.Error("an ElasticIP re-created under the same name owns the old advertisement")
	}
	// An advertisement recorded without a UID is adopted by namespace and name, and
	// needs its labels.
	legacy := metav1.ObjectMeta{Name: "eip-ns-web", Annotations: map[string]string{v1alpha1.AnnotationOwner: "ns/web"}}
	if !Belongs(&legacy, o) || Labelled(&legacy, o) {
		t.Error("an advertisement without a UID label: adopted and relabelled")
	}
	if Belongs(&legacy, Owner{Namespace: "ns", Name: "other", UID: "uid-1"}) {
		t.Error("an advertisement of another name was adopted")
	}
	var none metav1.ObjectMeta
	if _, ok := OwnerOf(&none); ok {
		t.Error("an advertisement without owner annotation has an owner")
	}
}
