package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// EventuallyTimeout is how long Eventually waits: generous, since the machines that run
// the tests are often loaded.
const EventuallyTimeout = 30 * time.Second

// Eventually polls cond every 100ms until it reports done, and fails the test after
// EventuallyTimeout with what and the state cond described last. Each component in
// watch ends the wait at once when it exits; the failure shows the end of its log.
func Eventually(t testing.TB, what string, cond func(ctx context.Context) (done bool, state string), watch ...*Component) {
	t.Helper()
	EventuallyWithin(t, EventuallyTimeout, what, cond, watch...)
}

// EventuallyWithin is Eventually with a timeout of its own, for waits that take longer
// than most (the end-to-end tests, where a whole simulated cluster shares the machine).
func EventuallyWithin(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (done bool, state string), watch ...*Component) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true,
		func(ctx context.Context) (bool, error) {
			for _, c := range watch {
				if done, _ := c.Exited(); done {
					return false, fmt.Errorf("%s exited", c.Name)
				}
			}
			done, state := cond(ctx)
			if ctx.Err() == nil { // a call cut short by the deadline describes nothing
				last = state
			}
			return done, nil
		})
	if err == nil {
		return
	}
	var logs strings.Builder
	for _, c := range watch {
		fmt.Fprintf(&logs, "\n%s log:\n%s", c.Name, c.LogTail(40))
	}
	t.Fatalf("%s: %v; last: %s%s", what, err, last, logs.String())
}
