package e2e

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

var pingSummary = regexp.MustCompile(`(\d+) packets transmitted, (\d+) received`)

// TestAgentRestart: a continuous ping through the NAT loses nothing while the node
// agent is killed and restarted; the advertisement says who answers; the rules of a
// deleted attachment disappear within one sync.
func TestAgentRestart(t *testing.T) {
	c, ns := setup(t)
	ctx := testContext(t)
	eip := attachSteady(t, c, ns)

	node := c.Nodes["node-a"]
	mac := node.NS.MAC("ext0").String()
	advert := advertisement.PreferredName(ns, "steady-eip")
	c.WaitGone("Answering on node-a", func(ctx context.Context) bool {
		ad, err := c.CP.Juneau.JuneauV1alpha1().ARPAdvertisements().Get(ctx, advert, metav1.GetOptions{})
		if err != nil {
			return false
		}
		cond := meta.FindStatusCondition(ad.Status.Conditions, v1alpha1.ConditionAnswering)
		return cond != nil && cond.Status == metav1.ConditionTrue && strings.Contains(cond.Message, mac)
	})

	const count = 150
	ping := c.Client.Start("ping", "-n", "-i", "0.02", "-c", strconv.Itoa(count), "-W", "5", eip)
	if err := ping.WaitForOutput("icmp_seq=", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		node.Agent.Kill()
		c.StartAgent(node)
	}
	if err := ping.Wait(time.Minute); err != nil {
		t.Fatalf("ping: %v\n%s", err, ping.Output())
	}
	m := pingSummary.FindStringSubmatch(ping.Output())
	if m == nil || m[1] != strconv.Itoa(count) || m[2] != strconv.Itoa(count) {
		t.Errorf("packets lost across agent restarts:\n%s", ping.Output())
	}

	if err := c.CP.Juneau.JuneauV1alpha1().ElasticIPAttachments(ns).Delete(ctx, "steady-attach", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitGone("the mapping removed from the node", func(context.Context) bool {
		out, err := node.NS.Output("nft", "list", "map", "ip", "juneau", "eip2vpc")
		return err == nil && !strings.Contains(out, eip)
	})
}
