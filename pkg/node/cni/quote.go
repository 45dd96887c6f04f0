package cni

import (
	"fmt"
	"strconv"
	"strings"
)

// Error messages stay short whatever the runtime hands the plugin: the runtime puts
// them into the Pod's events and its own log.
const (
	// maxQuoted bounds how much of one value a message quotes.
	maxQuoted = 64
	// maxMessage bounds a whole message, for errors of libraries that quote input in
	// full (a CIDR that does not parse, a version string).
	maxMessage = 512
)

// quote is s quoted as %q does, cut after maxQuoted bytes with the full length said.
func quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(s[:maxQuoted]), len(s))
}

// bounded returns err with its message cut after maxMessage bytes; errors.Is and As
// still see what it wraps.
func bounded(err error) error {
	if err == nil || len(err.Error()) <= maxMessage {
		return err
	}
	return boundedError{err}
}

type boundedError struct{ err error }

func (e boundedError) Error() string {
	msg := e.err.Error()
	return fmt.Sprintf("%s… (%d bytes)", strings.ToValidUTF8(msg[:maxMessage], ""), len(msg))
}

func (e boundedError) Unwrap() error { return e.err }
