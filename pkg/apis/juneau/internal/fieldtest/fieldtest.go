// Package fieldtest holds the assertions the validation and annotation tests share about
// field.ErrorList: exact paths and types, in order, each error explaining itself.
package fieldtest

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Want is one expected error: its field path and type.
type Want struct {
	Path string
	Type field.ErrorType
}

func Invalid(path string) Want      { return Want{path, field.ErrorTypeInvalid} }
func Required(path string) Want     { return Want{path, field.ErrorTypeRequired} }
func Duplicate(path string) Want    { return Want{path, field.ErrorTypeDuplicate} }
func NotSupported(path string) Want { return Want{path, field.ErrorTypeNotSupported} }
func Forbidden(path string) Want    { return Want{path, field.ErrorTypeForbidden} }
func TooMany(path string) Want      { return Want{path, field.ErrorTypeTooMany} }

// Expect asserts that got holds exactly the wanted errors, in order, and that every
// error explains itself.
func Expect(t testing.TB, got field.ErrorList, want ...Want) {
	t.Helper()
	match := len(got) == len(want)
	for i := 0; match && i < len(got); i++ {
		match = got[i].Field == want[i].Path && got[i].Type == want[i].Type
	}
	if !match {
		t.Fatalf("errors differ\n got: %s\nwant: %v", Describe(got), want)
	}
	for _, e := range got {
		if e.Detail == "" {
			t.Errorf("error without an explanation: %v", e)
		}
	}
}

// ExpectDetail asserts that some error at path mentions every fragment.
func ExpectDetail(t testing.TB, errs field.ErrorList, path string, fragments ...string) {
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
	t.Errorf("no error at %s mentions all of %q in %s", path, fragments, Describe(errs))
}

// Describe lists errors one per line for failure messages.
func Describe(errs field.ErrorList) string {
	if len(errs) == 0 {
		return "(none)"
	}
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "\n  %s [%s]", e.Error(), e.Type)
	}
	return b.String()
}
