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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
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
	setupNetwork(t, c)
	return c, ns
}

// setupNetwork creates the AddressPool and ExternalNetwork every test uses.
func setupNetwork(t *testing.T, c *harness.Cluster) {
	t.Helper()
	ctx := context.Background()
	j := c.CP.Juneau.JuneauV1alpha1()
	if _, err := j.AddressPools().Create(ctx, &v1alpha1.AddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: "ext-pool"},
		Spec:       v1alpha1.AddressPoolSpec{AdvertiseMode: v1alpha1.AdvertiseARP, Addresses: []string{"10.225.51.5-10.225.51.99"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.ExternalNetworks().Create(ctx, &v1alpha1.ExternalNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: "ext-net"},
		Spec:       v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseARP, AddressPools: []string{"ext-pool"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
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
