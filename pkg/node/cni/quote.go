package cni

import (
	"strconv"

	"github.com/loutres/juneau/pkg/apis/juneau/messages"
)

// Error messages stay short whatever the runtime hands the plugin: the runtime puts
// them into the Pod's events and its own log. They are cut as every juneau message is
// (messages.Cut), to the plugin's own sizes: a runtime's event carries less than a
// webhook response.
const (
	// maxQuoted bounds how much of one value a message quotes.
	maxQuoted = 64
	// maxMessage bounds a whole message, for errors of libraries that quote input in
	// full (a CIDR that does not parse, a version string).
	maxMessage = messages.MaxDetail
)

// quote is s quoted as %q does, cut after maxQuoted bytes saying how much was left out.
func quote(s string) string {
	return strconv.Quote(messages.Cut(s, maxQuoted))
}

// boundedErr returns err with its message cut after maxMessage bytes; errors.Is and As
// still see what it wraps.
func boundedErr(err error) error {
	if err == nil || len(err.Error()) <= maxMessage {
		return err
	}
	return boundedError{err}
}

type boundedError struct{ err error }

func (e boundedError) Error() string { return messages.Cut(e.err.Error(), maxMessage) }

func (e boundedError) Unwrap() error { return e.err }
