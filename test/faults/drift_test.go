package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/node/nft"
	"github.com/loutres/juneau/test/e2e/harness"
	"github.com/loutres/juneau/test/framework"
	"github.com/loutres/juneau/test/require"
)

// driftRepairBound is how soon the agent must undo a change made to its table by hand.
const driftRepairBound = time.Second

// TestTableDriftRepaired: on node-a, someone flushes juneau's table, then deletes one
// map element, then deletes the whole table, each with nft(8). Each time the agent
// notices (nftables change notifications, not its periodic resync, which is set far
// away) and restores exactly the table it had within a second, logs it and counts it
// in juneau_node_drift_repairs_total; the NAT ElasticIP is reachable again.
//
// Harness, not the real cluster: the fault is a command on a Node, the same in both,
// and the harness reads the Node's table and the agent's log and metrics directly,
// polling the kernel every 10 ms to time the repair.
func TestTableDriftRepaired(t *testing.T) {
	require.Binary(t, "nft")
	s := newScenario(t, framework.Shared(t), harness.Options{AgentArgs: []string{"--resync-period=30m"}})
	n := s.c.Nodes["node-a"]
	want := listTable(t, n)
	if !strings.Contains(want, s.natEIP+" : "+s.nat.IP) {
		t.Fatalf("node-a's table does not map %s to %s:\n%s", s.natEIP, s.nat.IP, want)
	}
	faults := []struct {
		name string
		args []string
	}{
		{"the table flushed", []string{"flush", "table", "ip", nft.TableName}},
		{"one map element deleted", []string{"delete", "element", "ip", nft.TableName, nft.MapEIP2VPC, "{ " + s.natEIP + " }"}},
		{"the table deleted", []string{"delete", "table", "ip", nft.TableName}},
	}
	for i, f := range faults {
		n.NS.MustRun("nft", f.args...)
		changed := time.Now()
		var got string
		err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*driftRepairBound, true, func(context.Context) (bool, error) {
			got = listTable(t, n)
			return got == want, nil
		})
		took := time.Since(changed)
		if err != nil {
			t.Fatalf("%s: not repaired after %s; the table:\n%s\nwant:\n%s", f.name, took.Round(time.Millisecond), got, want)
		}
		if took > driftRepairBound {
			t.Errorf("%s: repaired after %s, want within %s", f.name, took.Round(time.Millisecond), driftRepairBound)
		}
		t.Logf("%s: repaired within %s", f.name, took.Round(time.Millisecond))
		s.waitReachable(t, s.targets()[0])
		framework.EventuallyWithin(t, time.Minute, "the repair counted and logged", func(ctx context.Context) (bool, string) {
			text, err := n.Metrics(ctx)
			if err != nil {
				return false, err.Error()
			}
			v, _ := harness.MetricValue(text, `juneau_node_drift_repairs_total{reason="changed"}`)
			logged := strings.Count(n.Agent.Log(), "Repairing the nftables table changed behind the agent's back")
			return v == float64(i+1) && logged == i+1, fmt.Sprintf("counted %v, logged %d times", v, logged)
		})
	}
	if !strings.Contains(n.Agent.Log(), `processes=["nft"]`) {
		t.Errorf("the agent's log does not name nft as the process that changed the table:\n%s", n.Agent.LogTail(20))
	}
}

// listTable is `nft list table ip juneau` on the Node.
func listTable(t *testing.T, n *harness.Node) string {
	t.Helper()
	out, err := n.NS.Output("nft", "list", "table", "ip", nft.TableName)
	if err != nil {
		return err.Error() + "\n" + out
	}
	return out
}
