package nft

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

func mbw(eip, pod string, mbps int32) Mapping {
	mp := m(eip, pod)
	mp.BandwidthMbps = mbps
	return mp
}

func dnbw(iface, a string, mbps int32) DirectNIC {
	d := dn(iface, a)
	d.BandwidthMbps = mbps
	return d
}

func addrMap[V any](kv map[string]V) map[netip.Addr]V {
	out := make(map[netip.Addr]V, len(kv))
	for k, v := range kv {
		out[netip.MustParseAddr(k)] = v
	}
	return out
}

func TestNormalizeLimits(t *testing.T) {
	tests := []struct {
		name     string
		mappings []Mapping
		direct   []DirectNIC
		limits   map[string]int32  // ElasticIP -> Mbit/s
		sources  map[string]string // outbound source -> ElasticIP
		eips     int               // NAT mappings kept
		allowed  int               // direct addresses kept
		invalid  bool
	}{
		{
			name:     "NAT: inbound by ElasticIP, outbound by Pod IP; unlimited has none",
			mappings: []Mapping{mbw("10.225.51.5", "10.244.1.5", 5), m("10.225.51.7", "10.244.1.7")},
			limits:   map[string]int32{"10.225.51.5": 5},
			sources:  map[string]string{"10.244.1.5": "10.225.51.5"},
			eips:     2,
		},
		{
			name:    "direct: both directions by the ElasticIP, the Pod IP entry unlimited",
			direct:  []DirectNIC{dnbw("jn1", "10.225.51.6", 7), dn("jn1", "10.244.1.9")},
			limits:  map[string]int32{"10.225.51.6": 7},
			sources: map[string]string{"10.225.51.6": "10.225.51.6"},
			allowed: 2,
		},
		{
			name:     "highest limit accepted",
			mappings: []Mapping{mbw("10.225.51.5", "10.244.1.5", MaxBandwidthMbps)},
			limits:   map[string]int32{"10.225.51.5": MaxBandwidthMbps},
			sources:  map[string]string{"10.244.1.5": "10.225.51.5"},
			eips:     1,
		},
		{
			name:     "out of range: the mapping is left out",
			mappings: []Mapping{mbw("10.225.51.5", "10.244.1.5", -1), mbw("10.225.51.6", "10.244.1.6", MaxBandwidthMbps+1), mbw("10.225.51.7", "10.244.1.7", 3)},
			limits:   map[string]int32{"10.225.51.7": 3},
			sources:  map[string]string{"10.244.1.7": "10.225.51.7"},
			eips:     1,
			invalid:  true,
		},
		{
			name:     "one mapping listed with two limits: left out",
			mappings: []Mapping{mbw("10.225.51.5", "10.244.1.5", 5), mbw("10.225.51.5", "10.244.1.5", 10), mbw("10.225.51.7", "10.244.1.7", 3)},
			limits:   map[string]int32{"10.225.51.7": 3},
			sources:  map[string]string{"10.244.1.7": "10.225.51.7"},
			eips:     1,
			invalid:  true,
		},
		{
			name:    "direct: out of range or two limits leave the address out",
			direct:  []DirectNIC{dnbw("jn1", "10.225.51.6", -5), dnbw("jn2", "10.225.51.8", 1), dnbw("jn2", "10.225.51.8", 2), dnbw("jn3", "10.225.51.9", 4)},
			limits:  map[string]int32{"10.225.51.9": 4},
			sources: map[string]string{"10.225.51.9": "10.225.51.9"},
			allowed: 1,
			invalid: true,
		},
		{
			name:     "direct address also used by NAT: the NAT limit wins",
			mappings: []Mapping{mbw("10.225.51.5", "10.244.1.5", 5)},
			direct:   []DirectNIC{dnbw("jn1", "10.225.51.5", 50), dnbw("jn2", "10.244.1.5", 50)},
			limits:   map[string]int32{"10.225.51.5": 5},
			sources:  map[string]string{"10.244.1.5": "10.225.51.5"},
			eips:     1,
			allowed:  2,
			invalid:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := normalize(DesiredState{Config: Config{ExternalInterface: "eth0"}, Mappings: tt.mappings, Direct: tt.direct})
			if s == nil {
				t.Fatalf("nil state: %v", err)
			}
			if tt.invalid != errors.Is(err, ErrInvalidMapping) {
				t.Errorf("err = %v, want invalid=%v", err, tt.invalid)
			}
			if want := addrMap(tt.limits); !maps.Equal(s.limits, want) {
				t.Errorf("limits = %v, want %v", s.limits, want)
			}
			want := map[netip.Addr]netip.Addr{}
			for src, eip := range tt.sources {
				want[netip.MustParseAddr(src)] = netip.MustParseAddr(eip)
			}
			if !maps.Equal(s.limitSrc, want) {
				t.Errorf("sources = %v, want %v", s.limitSrc, want)
			}
			if len(s.eip2vpc) != tt.eips || len(s.directOf) != tt.allowed {
				t.Errorf("kept %d mappings and %d direct addresses, want %d and %d", len(s.eip2vpc), len(s.directOf), tt.eips, tt.allowed)
			}
		})
	}
}

// TestLimitRules: the limit chains of an ElasticIP are named after it; each
// holds one rule that counts only traffic with the outside and drops what
// exceeds the rate, given in bytes per second (1 Mbit/s = 125,000 B/s).
func TestLimitRules(t *testing.T) {
	sets := newSets(fam4)
	eip := netip.MustParseAddr("10.225.51.5")
	if in, out := LimitChainNames(eip); in != "bw_in_10.225.51.5" || out != "bw_out_10.225.51.5" {
		t.Errorf("chain names %q, %q", in, out)
	}
	// nft reads no colon in a name: IPv6 addresses have dashes instead.
	eip6 := netip.MustParseAddr("2001:db8::5")
	in6, out6 := LimitChainNames(eip6)
	if in6 != "bw_in_2001-db8--5" || out6 != "bw_out_2001-db8--5" {
		t.Errorf("IPv6 chain names %q, %q", in6, out6)
	}
	for _, a := range []netip.Addr{eip, eip6} {
		in, _ := LimitChainNames(a)
		if got, err := limitChainAddr(strings.TrimPrefix(in, chainLimitInPrefix)); err != nil || got != a {
			t.Errorf("%s names %v (%v), want %v", in, got, err, a)
		}
	}
	for mbps, rate := range map[int32]uint64{1: 125_000, 5: 625_000, MaxBandwidthMbps: 12_500_000_000} {
		in, out := limitRules(sets, eip, mbps)
		for _, c := range []struct {
			rule    *nftables.Rule
			chain   string
			peerOff uint32
		}{{in, "bw_in_10.225.51.5", 12}, {out, "bw_out_10.225.51.5", 16}} {
			want := []expr.Any{
				fam4.loadNH(c.peerOff, reg0),
				&expr.Lookup{SourceRegister: reg0, SetName: SetClusterCIDRs, SetID: sets.cluster.ID, Invert: true},
				&expr.Limit{Type: expr.LimitTypePktBytes, Rate: rate, Unit: expr.LimitTimeSecond, Over: true},
				&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop},
			}
			if c.rule.Chain.Name != c.chain || c.rule.Table.Name != TableName || !reflect.DeepEqual(c.rule.Exprs, want) {
				t.Errorf("%d Mbit/s, chain %s: rule in %s = %#v", mbps, c.chain, c.rule.Chain.Name, c.rule.Exprs)
			}
		}
	}
}

func TestRulesetLimitChains(t *testing.T) {
	s, err := normalize(DesiredState{
		Config:   Config{ExternalInterface: "ext0"},
		Mappings: []Mapping{mbw("10.225.51.7", "10.244.1.7", 7), m("10.225.51.8", "10.244.1.8"), mbw("10.225.51.5", "10.244.1.5", 5)},
	})
	if err != nil {
		t.Fatal(err)
	}
	rs := buildRuleset(s, fam4)
	var names []string
	for _, c := range rs.chains[10:] {
		names = append(names, c.Name)
		if c.Hooknum != nil {
			t.Errorf("limit chain %s has a hook", c.Name)
		}
		if n := len(rulesOf(rs, c.Name)); n != 1 {
			t.Errorf("%s has %d rules", c.Name, n)
		}
	}
	want := []string{"bw_in_10.225.51.5", "bw_out_10.225.51.5", "bw_in_10.225.51.7", "bw_out_10.225.51.7"}
	if !slices.Equal(names, want) {
		t.Errorf("limit chains %v, want %v", names, want)
	}
	for _, set := range []*nftables.Set{rs.sets.limitIn, rs.sets.limitOut} {
		if !set.IsMap || set.DataType.Name != "verdict" || set.KeyType != nftables.TypeIPAddr {
			t.Errorf("%s is not an address verdict map: %+v", set.Name, set)
		}
	}
}

func TestLimitElements(t *testing.T) {
	sets := newSets(fam4)
	a := netip.MustParseAddr
	srcs := []limitSource{{addr: a("10.244.1.5"), eip: a("10.225.51.5")}, {addr: a("10.225.51.6"), eip: a("10.225.51.6")}}
	both := familySets{sets, newSets(fam6)}
	got := map[*nftables.Set][]nftables.SetElement{}
	limitElements(got, both, []netip.Addr{a("10.225.51.5"), a("10.225.51.6")}, srcs, false)
	jump := func(c string) *expr.Verdict { return &expr.Verdict{Kind: expr.VerdictJump, Chain: c} }
	want := map[*nftables.Set][]nftables.SetElement{
		sets.limitIn: {
			{Key: []byte{10, 225, 51, 5}, VerdictData: jump("bw_in_10.225.51.5")},
			{Key: []byte{10, 225, 51, 6}, VerdictData: jump("bw_in_10.225.51.6")},
		},
		sets.limitOut: {
			{Key: []byte{10, 244, 1, 5}, VerdictData: jump("bw_out_10.225.51.5")},
			{Key: []byte{10, 225, 51, 6}, VerdictData: jump("bw_out_10.225.51.6")},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("elements = %v, want %v", got, want)
	}
	keys := map[*nftables.Set][]nftables.SetElement{}
	limitElements(keys, both, []netip.Addr{a("10.225.51.5")}, srcs[:1], true)
	if keys[sets.limitIn][0].VerdictData != nil || keys[sets.limitOut][0].VerdictData != nil {
		t.Error("deletions carry verdicts")
	}
}

func TestDiffLimits(t *testing.T) {
	st := func(ms ...Mapping) DesiredState {
		return DesiredState{Config: Config{ExternalInterface: "ext0"}, Mappings: ms}
	}
	a := netip.MustParseAddr
	old := st(mbw("10.225.51.1", "10.244.1.1", 5), mbw("10.225.51.2", "10.244.1.2", 5), mbw("10.225.51.3", "10.244.1.3", 5), mbw("10.225.51.4", "10.244.1.4", 5))
	new := st(mbw("10.225.51.1", "10.244.1.1", 5), mbw("10.225.51.2", "10.244.1.2", 10), m("10.225.51.3", "10.244.1.3"),
		mbw("10.225.51.4", "10.244.1.44", 5), mbw("10.225.51.5", "10.244.1.5", 1))
	got := deltaOf(t, old, new).limits
	want := limitChange{
		removed: []netip.Addr{a("10.225.51.3")},
		added:   []netip.Addr{a("10.225.51.5")},
		changed: []netip.Addr{a("10.225.51.2")},
		removedSrc: []limitSource{
			{addr: a("10.244.1.3"), eip: a("10.225.51.3")}, {addr: a("10.244.1.4"), eip: a("10.225.51.4")},
		},
		addedSrc: []limitSource{
			{addr: a("10.244.1.5"), eip: a("10.225.51.5")}, {addr: a("10.244.1.44"), eip: a("10.225.51.4")},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("diff = %+v\nwant %+v", got, want)
	}
	if d := deltaOf(t, new, new); !d.empty() {
		t.Errorf("diff of a state with itself = %+v", d)
	}
}

// messageLog names the messages of a batch that touch chains, rules and set
// elements, in order: "delrule bw_in_10.225.0.42", "newsetelem bw_out", ...
func messageLog(t *testing.T, batch []netlink.Message) []string {
	t.Helper()
	attrOf := map[uint16]uint16{
		unix.NFT_MSG_NEWCHAIN: unix.NFTA_CHAIN_NAME, unix.NFT_MSG_DELCHAIN: unix.NFTA_CHAIN_NAME,
		unix.NFT_MSG_NEWRULE: unix.NFTA_RULE_CHAIN, unix.NFT_MSG_DELRULE: unix.NFTA_RULE_CHAIN,
		unix.NFT_MSG_NEWSETELEM: unix.NFTA_SET_ELEM_LIST_SET, unix.NFT_MSG_DELSETELEM: unix.NFTA_SET_ELEM_LIST_SET,
	}
	var out []string
	for _, msg := range batch {
		tp := uint16(msg.Header.Type)
		want, ok := attrOf[tp&0xff]
		if tp>>8 != unix.NFNL_SUBSYS_NFTABLES || !ok {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(msg.Data[4:])
		if err != nil {
			t.Fatal(err)
		}
		for ad.Next() {
			if ad.Type() == want {
				out = append(out, fmt.Sprintf("%s %s", msgNames[tp&0xff], ad.String()))
			}
		}
	}
	return out
}

// TestFirstSyncWithLimits: 10,000 limited ElasticIPs and their 20,000 limit
// chains go out in one transaction, each element message under 64 KiB.
func TestFirstSyncWithLimits(t *testing.T) {
	p, r := newRecorded()
	ms := manyMappings(10000)
	for i := range ms {
		ms[i].BandwidthMbps = int32(1 + i%100)
	}
	if err := p.Sync(context.Background(), testState(ms)); err != nil {
		t.Fatal(err)
	}
	if len(r.batches) != 1 {
		t.Fatalf("%d batches, want 1", len(r.batches))
	}
	k := kinds(r.batches[0])
	if k["newchain"] != 20+20000 || k["newrule"] != 26+29+20000 || k["newset"] != 24 {
		t.Errorf("batch = %v", k)
	}
	limitElems := 0
	for _, msg := range r.batches[0] {
		if uint16(msg.Header.Type)&0xff == unix.NFT_MSG_NEWSETELEM {
			if l := len(msg.Data); l >= 1<<16 {
				t.Errorf("element message of %d bytes exceeds 64 KiB", l)
			}
			if se := elementMessages(t, []netlink.Message{msg}); se[0].set == MapLimitIn || se[0].set == MapLimitOut {
				limitElems += len(se[0].chains)
			}
		}
	}
	if limitElems != 20000 {
		t.Errorf("%d verdict map elements, want 20000", limitElems)
	}
	// Chains come before the elements that jump to them.
	log := messageLog(t, r.batches[0])
	lastChain := slices.IndexFunc(log, func(s string) bool { return s == "newchain bw_out_"+ms[len(ms)-1].ElasticIP.String() })
	firstLimitElem := slices.IndexFunc(log, func(s string) bool { return s == "newsetelem "+MapLimitIn })
	if lastChain < 0 || firstLimitElem < lastChain {
		t.Errorf("limit chain created at %d, its map elements at %d", lastChain, firstLimitElem)
	}
	if st := p.LastSync(); !st.Full || st.Limited != 10000 || st.LimitsAdded != 10000 {
		t.Errorf("stats = %+v", st)
	}
}

// TestOneLimitChangeTouchesOnlyItsChains: with 1,000 limited ElasticIPs,
// changing, adding or removing one limit, or moving a limited ElasticIP to
// another Pod, writes only that ElasticIP's chains and elements, in one
// transaction; every other limit chain keeps its rule (and token bucket).
func TestOneLimitChangeTouchesOnlyItsChains(t *testing.T) {
	p, r := newRecorded()
	ms := manyMappings(1000)
	for i := range ms {
		ms[i].BandwidthMbps = 5
	}
	ms[7].BandwidthMbps = 0
	st := testState(ms)
	st.Direct = []DirectNIC{dnbw("jnd", "10.225.250.6", 20)}
	if err := p.Sync(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	e42, e7 := ms[42].ElasticIP.String(), ms[7].ElasticIP.String()
	limited := func() int {
		n := len(st.Direct)
		for _, mp := range ms {
			if mp.BandwidthMbps > 0 {
				n++
			}
		}
		return n
	}
	steps := []struct {
		name   string
		change func()
		log    []string
		elems  []setElems
		stats  SyncStats
	}{
		{
			name:   "rate changed",
			change: func() { ms[42].BandwidthMbps = 10 },
			log:    []string{"delrule bw_in_" + e42, "delrule bw_out_" + e42, "newrule bw_in_" + e42, "newrule bw_out_" + e42},
			stats:  SyncStats{LimitsChanged: 1},
		},
		{
			name:   "limit added",
			change: func() { ms[7].BandwidthMbps = 1 },
			log: []string{"delsetelem " + MapEIP2VPCUnlimited, "newchain bw_in_" + e7, "newchain bw_out_" + e7, "newrule bw_in_" + e7, "newrule bw_out_" + e7,
				"newsetelem " + MapLimitIn, "newsetelem " + MapLimitOut},
			// The ElasticIP leaves the map of the fast path; eip2vpc keeps it.
			elems: []setElems{
				{del: true, set: MapEIP2VPCUnlimited, keys: []string{string(addrBytes(ms[7].ElasticIP))}},
				{set: MapLimitIn, keys: []string{string(addrBytes(ms[7].ElasticIP))}, chains: []string{"bw_in_" + e7}},
				{set: MapLimitOut, keys: []string{string(addrBytes(ms[7].PodIP))}, chains: []string{"bw_out_" + e7}},
			},
			stats: SyncStats{LimitsAdded: 1},
		},
		{
			name:   "limit removed",
			change: func() { ms[7].BandwidthMbps = 0 },
			log: []string{"delsetelem " + MapLimitIn, "delsetelem " + MapLimitOut,
				"delchain bw_in_" + e7, "delchain bw_out_" + e7, "newsetelem " + MapEIP2VPCUnlimited},
			elems: []setElems{
				{del: true, set: MapLimitIn, keys: []string{string(addrBytes(ms[7].ElasticIP))}},
				{del: true, set: MapLimitOut, keys: []string{string(addrBytes(ms[7].PodIP))}},
				{set: MapEIP2VPCUnlimited, keys: []string{string(addrBytes(ms[7].ElasticIP))}},
			},
			stats: SyncStats{LimitsRemoved: 1},
		},
		{
			name:   "limited ElasticIP moved to another Pod",
			change: func() { ms[42].PodIP = netip.MustParseAddr("10.244.250.42") },
			log: []string{"delsetelem eip2vpc", "delsetelem vpc2eip", "delsetelem eip2vpc_quoted", "delsetelem vpc2eip_quoted", "delsetelem " + MapLimitOut,
				"delsetelem " + MapClusterEIP2VPC,
				"newsetelem eip2vpc", "newsetelem vpc2eip", "newsetelem eip2vpc_quoted", "newsetelem vpc2eip_quoted", "newsetelem " + MapLimitOut,
				"newsetelem " + MapClusterEIP2VPC},
			stats: SyncStats{Removed: 1, Added: 1, InClusterRemoved: 1, InClusterAdded: 1},
		},
		{
			name:   "direct NIC limit changed",
			change: func() { st.Direct[0].BandwidthMbps = 30 },
			log:    []string{"delrule bw_in_10.225.250.6", "delrule bw_out_10.225.250.6", "newrule bw_in_10.225.250.6", "newrule bw_out_10.225.250.6"},
			stats:  SyncStats{LimitsChanged: 1},
		},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			before := len(r.batches)
			step.change()
			if err := p.Sync(context.Background(), st); err != nil {
				t.Fatal(err)
			}
			if len(r.batches) != before+1 {
				t.Fatalf("%d batches, want one more", len(r.batches)-before)
			}
			batch := r.batches[len(r.batches)-1]
			if k := kinds(batch); k["begin"] != 1 || k["end"] != 1 || k["newtable"]+k["deltable"]+k["newset"] != 0 {
				t.Errorf("incremental batch = %v", k)
			}
			if got := messageLog(t, batch); !slices.Equal(got, step.log) {
				t.Errorf("messages:\n got %q\nwant %q", got, step.log)
			}
			if step.elems != nil {
				if got := elementMessages(t, batch); !reflect.DeepEqual(got, step.elems) {
					t.Errorf("element messages = %v, want %v", got, step.elems)
				}
			}
			got := p.LastSync()
			got.Duration = 0
			step.stats.Mappings, step.stats.Direct, step.stats.Limited, step.stats.InCluster = 1000, 1, limited(), 1000
			if got != step.stats {
				t.Errorf("stats = %+v, want %+v", got, step.stats)
			}
		})
	}
	if err := p.Sync(context.Background(), st); err != nil || !p.LastSync().Skipped {
		t.Errorf("the same state again: %v, stats %+v; want nothing written", err, p.LastSync())
	}
}
