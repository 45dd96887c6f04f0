package nft

import (
	"context"
	"net/netip"
	"testing"

	"github.com/loutres/juneau/test/netns"
)

func benchState(n int) DesiredState {
	s := testState(manyMappings(n))
	s.ExternalInterface = "ext0"
	return s
}

// BenchmarkSync10k programs 10,000 mappings into an empty namespace: one
// transaction with the table, its rules and 60,000 map elements (the five
// NAT maps, none of the mappings being limited, and the in-cluster map).
func BenchmarkSync10k(b *testing.B) {
	syncFromEmpty(b, benchState(10000))
}

// BenchmarkSyncOneChange changes the Pod IP of one mapping among 10,000.
func BenchmarkSyncOneChange(b *testing.B) {
	ns := netns.New(b, "bench")
	ctx := context.Background()
	state := benchState(10000)
	p := NewProgrammer(Options{NetNS: ns.FD()})
	if err := p.Sync(ctx, state); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		// Mapping j moves to a Pod IP unique to it, alternating between two
		// ranges each round, so every iteration changes exactly one mapping.
		j, round := i%len(state.Mappings), i/len(state.Mappings)
		state.Mappings[j].PodIP = netip.AddrFrom4([4]byte{10, 245 + byte(round%2), byte(j >> 8), byte(j)})
		if err := p.Sync(ctx, state); err != nil {
			b.Fatal(err)
		}
		if st := p.LastSync(); st.Full || st.Added != 1 || st.Removed != 1 {
			b.Fatalf("not an incremental one-mapping sync: %+v", st)
		}
		i++
	}
}

// BenchmarkSyncOneAdded adds one new mapping on top of 10,000 (an add needs
// no element deletion, whose commit waits for an RCU grace period).
func BenchmarkSyncOneAdded(b *testing.B) {
	ns := netns.New(b, "bench")
	ctx := context.Background()
	state := benchState(10000)
	p := NewProgrammer(Options{NetNS: ns.FD()})
	if err := p.Sync(ctx, state); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		state.Mappings = append(state.Mappings, Mapping{
			ElasticIP: netip.AddrFrom4([4]byte{10, 226, byte(i >> 8), byte(i)}),
			PodIP:     netip.AddrFrom4([4]byte{10, 246, byte(i >> 8), byte(i)}),
		})
		if err := p.Sync(ctx, state); err != nil {
			b.Fatal(err)
		}
		if st := p.LastSync(); st.Full || st.Added != 1 || st.Removed != 0 {
			b.Fatalf("not an incremental one-mapping sync: %+v", st)
		}
		i++
	}
}

// limitedBenchState is benchState with every ElasticIP limited.
func limitedBenchState(n int) DesiredState {
	s := benchState(n)
	for i := range s.Mappings {
		s.Mappings[i].BandwidthMbps = int32(1 + i%1000)
	}
	return s
}

// BenchmarkSync10kLimited programs 10,000 limited mappings into an empty
// namespace: BenchmarkSync10k plus 20,000 limit chains with one rule each and
// 20,000 verdict map elements, in one transaction.
func BenchmarkSync10kLimited(b *testing.B) {
	syncFromEmpty(b, limitedBenchState(10000))
}

// BenchmarkSyncOneLimitChange changes the limit of one ElasticIP among
// 10,000 limited ones: its two chains get a new rule each.
func BenchmarkSyncOneLimitChange(b *testing.B) {
	ns := netns.New(b, "bench")
	ctx := context.Background()
	state := limitedBenchState(10000)
	p := NewProgrammer(Options{NetNS: ns.FD()})
	if err := p.Sync(ctx, state); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		j := i % len(state.Mappings)
		state.Mappings[j].BandwidthMbps = state.Mappings[j].BandwidthMbps%MaxBandwidthMbps + 1
		if err := p.Sync(ctx, state); err != nil {
			b.Fatal(err)
		}
		if st := p.LastSync(); st.Full || st.LimitsChanged != 1 {
			b.Fatalf("not an incremental one-limit sync: %+v", st)
		}
		i++
	}
}

// syncFromEmpty times programming state into a namespace whose table was removed first.
func syncFromEmpty(b *testing.B, state DesiredState) {
	ns := netns.New(b, "bench")
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		if err := NewProgrammer(Options{NetNS: ns.FD()}).Remove(ctx); err != nil {
			b.Fatal(err)
		}
		p := NewProgrammer(Options{NetNS: ns.FD()})
		b.StartTimer()
		if err := p.Sync(ctx, state); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIndexFull10k validates 10,000 mappings into an empty index, the
// Go side of a full sync (no kernel, no root).
func BenchmarkIndexFull10k(b *testing.B) {
	st := benchState(10000)
	for b.Loop() {
		ix, err := newIndex(st.Config)
		if err != nil {
			b.Fatal(err)
		}
		ix.apply(nil, st.Mappings, nil, st.Direct, nil, st.InCluster)
	}
}
