package validation

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

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

// expectErrs asserts that got holds exactly the wanted errors, in order, and that every
// error explains itself.
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

// expectDetail asserts that some error at path mentions every fragment.
func expectDetail(t *testing.T, errs field.ErrorList, path string, fragments ...string) {
	t.Helper()
	for _, e := range errs {
		if e.Field == path && containsAll(e.Error(), fragments) {
			return
		}
	}
	t.Errorf("no error at %s mentions all of %q in %s", path, fragments, describe(errs))
}

func containsAll(s string, fragments []string) bool {
	for _, f := range fragments {
		if !strings.Contains(s, f) {
			return false
		}
	}
	return true
}
