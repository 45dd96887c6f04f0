package validation

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loutres/juneau/pkg/apis/juneau/internal/fieldtest"
)

// Shared assertions (pkg/apis/juneau/internal/fieldtest) under the names the tests use.
type wantErr = fieldtest.Want

var (
	invalid      = fieldtest.Invalid
	required     = fieldtest.Required
	duplicated   = fieldtest.Duplicate
	notSupported = fieldtest.NotSupported
	forbidden    = fieldtest.Forbidden
	tooMany      = fieldtest.TooMany
	describe     = fieldtest.Describe
)

func expectErrs(t *testing.T, got field.ErrorList, want ...wantErr) {
	t.Helper()
	fieldtest.Expect(t, got, want...)
}

func expectDetail(t *testing.T, errs field.ErrorList, path string, fragments ...string) {
	t.Helper()
	fieldtest.ExpectDetail(t, errs, path, fragments...)
}
