package admission

import (
	"fmt"
	"net"
	"sync"
)

// slots bounds the reviews read or judged at once, in all and per client address. The
// bound in all caps the memory and work anyone who reaches the webhook can cause; the
// share per address keeps one client (a Pod sending reviews of its own, which the
// webhook cannot tell from the API server's without client authentication) from taking
// every slot, so the API server's reviews still find room while it floods
// (docs/operations.md#the-webhook-under-load).
type slots struct {
	mu        sync.Mutex
	max       int
	perSource int
	used      int
	bySource  map[string]int
}

// newSlots holds n slots in all, half of them at most for one address.
func newSlots(n int) *slots {
	return &slots{max: n, perSource: max(1, n/2), bySource: map[string]int{}}
}

// take takes a slot for the client at remoteAddr (host:port). It returns the release
// function, or the reason of a refusal (the metric's label) and its message.
func (s *slots) take(remoteAddr string) (release func(), reason, message string) {
	source := remoteAddr
	if host, _, err := net.SplitHostPort(remoteAddr); err == nil {
		source = host
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.used >= s.max:
		return nil, "too_many_in_flight", fmt.Sprintf("the webhook is judging %d reviews already; retry", s.max)
	case s.bySource[source] >= s.perSource:
		return nil, "too_many_from_source", fmt.Sprintf("the webhook is judging %d reviews from %s already, its share; retry", s.perSource, source)
	}
	s.used++
	s.bySource[source]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.used--
		if s.bySource[source]--; s.bySource[source] == 0 {
			delete(s.bySource, source)
		}
	}, "", ""
}

// inUse is the number of slots taken.
func (s *slots) inUse() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}
