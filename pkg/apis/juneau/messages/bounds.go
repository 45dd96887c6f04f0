package messages

import (
	"fmt"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Limits.
const (
	// MaxErrors is how many errors a list keeps.
	MaxErrors = 10
	// MaxValue is how many bytes of a bad value an error quotes.
	MaxValue = 256
	// MaxDetail is how many bytes of an error's explanation are kept.
	MaxDetail = 512
	// MaxMessage is how many bytes of a whole message are kept.
	MaxMessage = 4096
)

// Cut returns s if it has at most limit bytes, else its first bytes (whole UTF-8
// characters) followed by how many bytes were left out.
func Cut(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d more bytes)", s[:cut], len(s)-cut)
}

// Errors returns errs with at most MaxErrors errors, each quoting at most MaxValue bytes
// of its value and MaxDetail of its explanation; when errors are left out, the last one
// kept says how many. errs itself is not changed.
func Errors(errs field.ErrorList) field.ErrorList {
	n := min(len(errs), MaxErrors)
	out := make(field.ErrorList, n)
	for i := range n {
		e := *errs[i]
		if s, ok := e.BadValue.(string); ok {
			e.BadValue = Cut(s, MaxValue)
		}
		e.Detail = Cut(e.Detail, MaxDetail)
		out[i] = &e
	}
	if omitted := len(errs) - n; omitted > 0 {
		last := *out[n-1]
		last.Detail += fmt.Sprintf(" (and %d more errors not shown)", omitted)
		out[n-1] = &last
	}
	return out
}

// OfErrors is the errors of Errors joined with "; ", cut to MaxMessage bytes.
func OfErrors(errs field.ErrorList) string {
	s := ""
	for i, e := range Errors(errs) {
		if i > 0 {
			s += "; "
		}
		s += e.Error()
	}
	return Cut(s, MaxMessage)
}
