package annotations

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// Paths of the annotations, as errors print them.
var (
	pathEIP      = "metadata.annotations[" + v1alpha1.AnnotationElasticIP + "]"
	pathNetworks = "metadata.annotations[" + v1alpha1.AnnotationNetworks + "]"
)

func annPath(key string) string { return "metadata.annotations[" + key + "]" }

// wantErr is one expected error: its field path and type.
type wantErr struct {
	path string
	typ  field.ErrorType
}

func invalid(path string) wantErr      { return wantErr{path, field.ErrorTypeInvalid} }
func required(path string) wantErr     { return wantErr{path, field.ErrorTypeRequired} }
func duplicated(path string) wantErr   { return wantErr{path, field.ErrorTypeDuplicate} }
func notSupported(path string) wantErr { return wantErr{path, field.ErrorTypeNotSupported} }
func forbidden(path string) wantErr    { return wantErr{path, field.ErrorTypeForbidden} }

// expectErrs asserts that got holds exactly the wanted errors, in order, each with an
// explanation.
func expectErrs(t *testing.T, got field.ErrorList, want ...wantErr) {
	t.Helper()
	match := len(got) == len(want)
	for i := 0; match && i < len(got); i++ {
		match = got[i].Field == want[i].path && got[i].Type == want[i].typ
	}
	if !match {
		t.Fatalf("errors differ\n got: %s\nwant: %v", describe(got), want)
	}
	for _, e := range got {
		if e.Detail == "" {
			t.Errorf("error without an explanation: %v", e)
		}
	}
}

// expectDetail asserts that some error at path mentions every fragment.
func expectDetail(t *testing.T, errs field.ErrorList, path string, fragments ...string) {
	t.Helper()
	for _, e := range errs {
		ok := e.Field == path
		for _, f := range fragments {
			ok = ok && strings.Contains(e.Error(), f)
		}
		if ok {
			return
		}
	}
	t.Errorf("no error at %s mentions all of %q in %s", path, fragments, describe(errs))
}

func describe(errs field.ErrorList) string {
	if len(errs) == 0 {
		return "(none)"
	}
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "\n  %s [%s]", e.Error(), e.Type)
	}
	return b.String()
}
