package nft

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"testing"
	"time"

	"github.com/google/nftables"
)

// scaleMappings returns n mappings: the topology's own (so traffic can be
// checked) plus n-1 others that no packet ever uses.
func scaleMappings(n int) []Mapping {
	out := []Mapping{{ElasticIP: netip.MustParseAddr(elasticIP), PodIP: netip.MustParseAddr(podIP)}}
	for i := 1; len(out) < n; i++ {
		out = append(out, Mapping{
			ElasticIP: netip.AddrFrom4([4]byte{10, 225, 100 + byte(i>>8), byte(i)}),
			PodIP:     netip.AddrFrom4([4]byte{10, 244, 100 + byte(i>>8), byte(i)}),
		})
	}
	return out
}

// TestTenThousandMappings loads 10,000 mappings in one transaction, then
// changes one and shows, from the kernel's own change notifications, that
// exactly that mapping's elements were written.
func TestTenThousandMappings(t *testing.T) {
	tp := newTopology(t, topologyOptions{})
	ctx := context.Background()
	tp.state.Mappings = scaleMappings(10000)

	before := generation(t, tp.node)
	if err := tp.prog.Sync(ctx, tp.state); err != nil {
		t.Fatal(err)
	}
	if after := generation(t, tp.node); after != before+1 {
		t.Errorf("generation went from %d to %d: not one transaction", before, after)
	}
	for _, name := range []string{MapEIP2VPC, MapVPC2EIP, MapEIP2VPCQuoted, MapVPC2EIPQuoted} {
		if n := len(kernelElements(t, tp.node, name)); n != 10000 {
			t.Errorf("map %s holds %d elements, want 10000", name, n)
		}
	}
	ping(t, tp.client, elasticIP, 2)

	// Watch the kernel's notifications while one mapping changes.
	c, err := nftables.New(nftables.WithNetNSFd(tp.node.FD()), nftables.WithSockOptions(raiseBuffers))
	if err != nil {
		t.Fatal(err)
	}
	mon := nftables.NewMonitor(nftables.WithMonitorEventBuffer(16))
	events, err := c.AddGenerationalMonitor(mon)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()

	changed := netip.MustParseAddr("10.244.250.1")
	old := tp.state.Mappings[4321]
	tp.state.Mappings[4321].PodIP = changed
	if err := tp.prog.Sync(ctx, tp.state); err != nil {
		t.Fatal(err)
	}
	if st := tp.prog.LastSync(); st.Full || st.Removed != 1 || st.Added != 1 {
		t.Errorf("stats = %+v, want one mapping replaced incrementally", st)
	}

	var gen *nftables.MonitorEvents
	select {
	case gen = <-events:
	case <-time.After(5 * time.Second):
		t.Fatal("no change notification")
	}
	var dels, adds int
	for _, ev := range gen.Changes {
		elems, _ := ev.Data.([]nftables.SetElement)
		switch ev.Type {
		case nftables.MonitorEventTypeDelSetElem:
			dels += len(elems)
			for _, e := range elems {
				if !containsAddr(e.Key, old.ElasticIP) && !containsAddr(e.Key, old.PodIP) {
					t.Errorf("deleted an element of another mapping: key %v", e.Key)
				}
			}
		case nftables.MonitorEventTypeNewSetElem:
			adds += len(elems)
			for _, e := range elems {
				if !containsAddr(e.Key, old.ElasticIP) && !containsAddr(e.Key, changed) {
					t.Errorf("wrote an element of another mapping: key %v", e.Key)
				}
			}
		default:
			t.Errorf("unexpected change %v in the transaction", ev.Type)
		}
	}
	// The five NAT maps (the mapping has no limit) and the in-cluster map.
	if dels != 6 || adds != 6 {
		t.Errorf("transaction deleted %d and added %d elements, want 6 and 6", dels, adds)
	}
	if n := len(kernelElements(t, tp.node, MapEIP2VPC)); n != 10000 {
		t.Errorf("after the change eip2vpc holds %d elements", n)
	}
	ping(t, tp.client, elasticIP, 2)
}

func containsAddr(key []byte, a netip.Addr) bool {
	b := a.As4()
	return bytes.Equal(key, b[:]) || bytes.Equal(key, append(b[:], b[:]...))
}

// TestTenThousandLimits loads 10,000 limited mappings (20,000 limit chains)
// in one transaction, then changes one limit and shows, from the kernel's own
// change notifications, that only that ElasticIP's two rules were replaced:
// no other limit chain is rewritten and no token bucket reset.
func TestTenThousandLimits(t *testing.T) {
	tp := newTopology(t, topologyOptions{})
	ctx := context.Background()
	tp.state.Mappings = scaleMappings(10000)
	for i := range tp.state.Mappings {
		tp.state.Mappings[i].BandwidthMbps = 100
	}
	before := generation(t, tp.node)
	if err := tp.prog.Sync(ctx, tp.state); err != nil {
		t.Fatal(err)
	}
	if after := generation(t, tp.node); after != before+1 {
		t.Errorf("generation went from %d to %d: not one transaction", before, after)
	}
	t.Logf("full sync of 10,000 limited mappings: %v", tp.prog.LastSync().Duration)
	for _, name := range []string{MapLimitIn, MapLimitOut} {
		if n := len(kernelElements(t, tp.node, name)); n != 10000 {
			t.Errorf("map %s holds %d elements, want 10000", name, n)
		}
	}
	ping(t, tp.client, elasticIP, 2)

	c, err := nftables.New(nftables.WithNetNSFd(tp.node.FD()), nftables.WithSockOptions(raiseBuffers))
	if err != nil {
		t.Fatal(err)
	}
	mon := nftables.NewMonitor(nftables.WithMonitorEventBuffer(16))
	events, err := c.AddGenerationalMonitor(mon)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()

	changed := tp.state.Mappings[4321].ElasticIP
	tp.state.Mappings[4321].BandwidthMbps = 200
	if err := tp.prog.Sync(ctx, tp.state); err != nil {
		t.Fatal(err)
	}
	if st := tp.prog.LastSync(); st.Full || st.LimitsChanged != 1 {
		t.Errorf("stats = %+v, want one limit changed incrementally", st)
	}
	var gen *nftables.MonitorEvents
	select {
	case gen = <-events:
	case <-time.After(5 * time.Second):
		t.Fatal("no change notification")
	}
	in, out := LimitChainNames(changed)
	got := map[string]int{}
	for _, ev := range gen.Changes {
		r, ok := ev.Data.(*nftables.Rule)
		if !ok || (ev.Type != nftables.MonitorEventTypeDelRule && ev.Type != nftables.MonitorEventTypeNewRule) {
			t.Errorf("unexpected change %v (%T) in the transaction", ev.Type, ev.Data)
			continue
		}
		got[fmt.Sprintf("%v %s", ev.Type == nftables.MonitorEventTypeNewRule, r.Chain.Name)]++
	}
	want := map[string]int{"false " + in: 1, "false " + out: 1, "true " + in: 1, "true " + out: 1}
	if !maps.Equal(got, want) {
		t.Errorf("changes (new? chain) = %v, want %v", got, want)
	}
	limits, err := tp.prog.KernelLimits(ctx)
	if err != nil || len(limits) != 10000 || limits[changed] != 200 || limits[addr(elasticIP)] != 100 {
		t.Errorf("KernelLimits: %d limits, changed %d, other %d, %v", len(limits), limits[changed], limits[addr(elasticIP)], err)
	}
}
