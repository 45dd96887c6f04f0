// Package e2e runs the whole system: control plane, controller, webhook, a node agent
// per simulated Node, and Pods plumbed through the real CNI chain (see harness).
package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/loutres/juneau/test/e2e/harness"
	"github.com/loutres/juneau/test/framework"
	"github.com/loutres/juneau/test/netns"
)

func TestMain(m *testing.M) { framework.Main(m) }

// setup starts a cluster and the README example's network: pool 10.225.51.0/24 minus the
// segment's own hosts, arp, behind ext-net.
func setup(t *testing.T) (*harness.Cluster, string) {
	t.Helper()
	return setupWith(t, harness.Options{})
}

func setupWith(t *testing.T, opts harness.Options) (*harness.Cluster, string) {
	t.Helper()
	cp := framework.Shared(t)
	c := harness.New(t, cp, opts)
	ns := cp.NewNamespace(t, "e2e")
	c.CreateExternalNetwork()
	return c, ns
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func parseARP(f netns.Frame) (*netns.ARP, bool) { return netns.ParseARP(f.Data) }

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
