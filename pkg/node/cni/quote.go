package cni

import (
	"fmt"
	"strconv"
)

// maxQuoted bounds how much of a value from the runtime an error message quotes: the
// runtime puts the message into the Pod's events and its own log.
const maxQuoted = 64

// quote is s quoted as %q does, cut after maxQuoted bytes with the full length said.
func quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(s[:maxQuoted]), len(s))
}
