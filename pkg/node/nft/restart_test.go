package nft

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/loutres/juneau/test/require"
)

// helperEnv, when set, makes the test binary act as a separate agent process:
// it syncs the DesiredState in the file the variable names (JSON) once, in
// the network namespace it was started in, and exits.
const helperEnv = "JUNEAU_NFT_HELPER_STATE"

func TestMain(m *testing.M) {
	if s := os.Getenv(helperEnv); s != "" {
		os.Exit(runHelper(s))
	}
	os.Exit(m.Run())
}

func runHelper(path string) int {
	encoded, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "read state:", err)
		return 2
	}
	var d DesiredState
	if err := json.Unmarshal(encoded, &d); err != nil {
		fmt.Fprintln(os.Stderr, "decode state:", err)
		return 2
	}
	p := NewProgrammer(Options{})
	if err := p.Sync(context.Background(), d); err != nil {
		fmt.Fprintln(os.Stderr, "sync:", err)
		return 1
	}
	st := p.LastSync()
	fmt.Printf("synced full=%v mappings=%d limited=%d in %v\n", st.Full, st.Mappings, st.Limited, st.Duration)
	return 0
}

// TestRestartLosesNoPacket: a continuous ping through the NAT loses nothing
// while new Programmers — in this process and in separate processes — take
// over the table, each replacing it in one transaction.
func TestRestartLosesNoPacket(t *testing.T) {
	tp := newTopology(t, topologyOptions{masquerade: true})
	tp.state.Mappings = scaleMappings(2000) // a realistic table, not a trivial one
	for i := range tp.state.Mappings {
		if i%2 == 0 { // the pinged mapping too: limit chains are taken over as well
			tp.state.Mappings[i].BandwidthMbps = 100
		}
	}
	tp.sync(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	encoded, err := json.Marshal(tp.state)
	if err != nil {
		t.Fatal(err)
	}

	const count = 300 // 3 s at 10 ms
	pinger := tp.client.Start("ping", "-n", "-i", "0.01", "-c", fmt.Sprint(count), "-W", "5", elasticIP)
	if err := pinger.WaitForOutput("icmp_seq=", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	genBefore := generation(t, tp.node)
	restarts := 0
	for !pinger.Exited() && restarts < 30 {
		if restarts%3 == 2 {
			out := helperProcess(t, tp, self, string(encoded))
			if !strings.Contains(out, "synced full=true mappings=2000 limited=1000") {
				t.Fatalf("helper process: %s", out)
			}
		} else {
			p := NewProgrammer(Options{NetNS: tp.node.FD()})
			if err := p.Sync(context.Background(), tp.state); err != nil {
				t.Fatalf("restart %d: %v", restarts, err)
			}
			if !p.LastSync().Full {
				t.Fatal("a new Programmer did not replace the table")
			}
		}
		restarts++
	}
	if err := pinger.Wait(30 * time.Second); err != nil {
		t.Fatalf("ping: %v\n%s", err, pinger.Output())
	}
	if gens := generation(t, tp.node) - genBefore; gens != uint32(restarts) || restarts < 6 {
		t.Errorf("%d restarts made %d transactions; want one each, and at least 6", restarts, gens)
	}
	sent, recv, err := pingLoss(pinger.Output())
	if err != nil || sent != count || recv != count {
		t.Errorf("lost %d of %d packets across %d restarts (%v)", sent-recv, sent, restarts, err)
	}
	t.Logf("%d restarts during %d pings, none lost", restarts, count)
}

func helperProcess(t *testing.T, tp *topology, self, encoded string) string {
	t.Helper()
	require.Binary(t, "ip")
	// A file, not the variable itself: one environment string is limited to 128 KiB.
	cmd := tp.node.Start("env", helperEnv+"="+writeTemp(t, "state.json", encoded), self)
	if err := cmd.Wait(30 * time.Second); err != nil {
		t.Fatalf("helper process: %v\n%s", err, cmd.Output())
	}
	return cmd.Output()
}

// TestRemovedMappingDisappears: after one sync without a mapping, its
// elements are gone from every map and its traffic no longer reaches the Pod;
// adding it back restores it; Remove deletes the table.
func TestRemovedMappingDisappears(t *testing.T) {
	tp := newTopology(t, topologyOptions{})
	ctx := context.Background()
	tp.sync(t)
	ping(t, tp.client, elasticIP, 2)

	kept := tp.state.Mappings
	tp.state.Mappings = nil
	tp.sync(t)
	for _, name := range []string{MapEIP2VPC, MapVPC2EIP, MapEIP2VPCQuoted, MapVPC2EIPQuoted} {
		if n := len(kernelElements(t, tp.node, name)); n != 0 {
			t.Errorf("map %s still holds %d elements", name, n)
		}
	}
	out, _ := tp.client.Output("ping", "-n", "-c", "2", "-i", "0.1", "-W", "1", elasticIP)
	if _, recv, err := pingLoss(out); err != nil || recv != 0 {
		t.Errorf("removed ElasticIP still answers: %s", out)
	}

	tp.state.Mappings = kept
	tp.sync(t)
	got, err := tp.prog.KernelMappings(ctx)
	if err != nil || len(got) != 1 || got[0] != kept[0] {
		t.Errorf("KernelMappings = %v, %v", got, err)
	}
	ping(t, tp.client, elasticIP, 2)

	if err := tp.prog.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tp.prog.KernelMappings(ctx); err != ErrNoTable {
		t.Errorf("after Remove: %v, want ErrNoTable", err)
	}
	if err := tp.prog.Remove(ctx); err != nil {
		t.Errorf("Remove without a table: %v", err)
	}
}

// TestDriftRepairedByResync: someone deletes the table behind the
// Programmer's back. A sync that changes something fails (its elements have
// no table) and makes the next one full; a periodic resync (Invalidate, as
// the agent does) rebuilds the table even when nothing changed.
func TestDriftRepairedByResync(t *testing.T) {
	require.Binary(t, "nft")
	tp := newTopology(t, topologyOptions{})
	ctx := context.Background()
	tp.sync(t)
	tp.node.MustRun("nft", "delete", "table", "ip", TableName)
	if _, err := tp.prog.KernelMappings(ctx); err != ErrNoTable {
		t.Fatalf("table still there: %v", err)
	}
	tp.state.Mappings = append(tp.state.Mappings, Mapping{ElasticIP: addr("10.225.51.8"), PodIP: addr("10.244.1.8")})
	if err := tp.prog.Sync(ctx, tp.state); err == nil {
		t.Fatal("an incremental sync into a missing table succeeded")
	}
	tp.sync(t)
	if st := tp.prog.LastSync(); !st.Full {
		t.Errorf("sync after the failure: %+v, want full", st)
	}
	tp.node.MustRun("nft", "delete", "table", "ip", TableName)
	tp.prog.Invalidate()
	tp.sync(t)
	got, err := tp.prog.KernelMappings(ctx)
	if err != nil || len(got) != 2 {
		t.Errorf("after the resync the kernel holds %v, %v; want 2 mappings", got, err)
	}
	ping(t, tp.client, elasticIP, 3)
}
