package nft

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

func TestNormalizeInCluster(t *testing.T) {
	tests := []struct {
		name     string
		local    []Mapping
		cluster  []Mapping
		want     map[string]string // ElasticIP -> Pod IP
		wantErrs []string          // substrings of the error, in order
	}{
		{
			name:    "other nodes' mappings",
			cluster: []Mapping{m("10.225.51.5", "10.244.1.5"), m("10.225.51.6", "10.244.2.6")},
			want:    map[string]string{"10.225.51.5": "10.244.1.5", "10.225.51.6": "10.244.2.6"},
		},
		{
			name:  "the node's own mappings count without being listed",
			local: []Mapping{mbw("10.225.51.5", "10.244.1.5", 5)},
			want:  map[string]string{"10.225.51.5": "10.244.1.5"},
		},
		{
			name:    "listed in both, bandwidth ignored",
			local:   []Mapping{mbw("10.225.51.5", "10.244.1.5", 5)},
			cluster: []Mapping{mbw("10.225.51.5", "10.244.1.5", 200000), m("10.225.51.5", "10.244.1.5")},
			want:    map[string]string{"10.225.51.5": "10.244.1.5"},
		},
		{
			name:    "one Pod, two ElasticIPs: both kept",
			cluster: []Mapping{m("10.225.51.5", "10.244.1.5"), m("10.225.51.6", "10.244.1.5")},
			want:    map[string]string{"10.225.51.5": "10.244.1.5", "10.225.51.6": "10.244.1.5"},
		},
		{
			name:     "one ElasticIP, two Pods: dropped",
			cluster:  []Mapping{m("10.225.51.5", "10.244.1.5"), m("10.225.51.5", "10.244.2.5"), m("10.225.51.7", "10.244.1.7")},
			want:     map[string]string{"10.225.51.7": "10.244.1.7"},
			wantErrs: []string{"in-cluster clients: ElasticIP 10.225.51.5 mapped to several Pod IPs [10.244.1.5 10.244.2.5]"},
		},
		{
			name:     "an ElasticIP that is a Pod IP is never redirected",
			cluster:  []Mapping{m("10.225.51.5", "10.244.1.5"), m("10.244.1.5", "10.244.2.9")},
			want:     map[string]string{"10.225.51.5": "10.244.1.5"},
			wantErrs: []string{"in-cluster clients: 10.244.1.5 used both as ElasticIP and as Pod IP"},
		},
		{
			name:     "malformed",
			cluster:  []Mapping{m("10.225.51.5", "10.225.51.5"), {ElasticIP: netip.MustParseAddr("fd00::5"), PodIP: netip.MustParseAddr("10.244.1.5")}, {}},
			want:     map[string]string{},
			wantErrs: []string{"in-cluster mapping invalid IP<->invalid IP", "in-cluster mapping 10.225.51.5<->10.225.51.5", "in-cluster mapping fd00::5<->10.244.1.5"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := normalize(DesiredState{Config: Config{ExternalInterface: "ext0"}, Mappings: tt.local, InCluster: tt.cluster})
			got := map[string]string{}
			for e, p := range s.cluster {
				got[e.String()] = p.String()
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("in-cluster map = %v, want %v", got, tt.want)
			}
			if (err != nil) != (len(tt.wantErrs) > 0) || (err != nil && !errors.Is(err, ErrInvalidMapping)) {
				t.Fatalf("err = %v, want errors %q", err, tt.wantErrs)
			}
			rest := ""
			if err != nil {
				rest = err.Error()
			}
			for _, w := range tt.wantErrs {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Errorf("error %q lacks (or misorders) %q", err, w)
					break
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

// TestInClusterRules: the raw prerouting chain lets a cluster source's
// packets to an in-cluster ElasticIP through untouched and tracked; the NAT
// chains translate them with one lookup each.
func TestInClusterRules(t *testing.T) {
	rs := testRuleset(t)
	s := rs.sets
	dnat := func(reg uint32) *expr.NAT {
		return &expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: reg}
	}
	lookupCluster := &expr.Lookup{SourceRegister: reg0, DestRegister: reg0, IsDestRegSet: true, SetName: MapClusterEIP2VPC, SetID: s.clusterEIP2VPC.ID}
	fromCluster := [][]expr.Any{{
		fam4.loadNH(16, reg0), lookupCluster,
		fam4.loadNH(12, reg1), &expr.Lookup{SourceRegister: reg1, SetName: SetClusterCIDRs, SetID: s.cluster.ID},
		dnat(reg0),
	}}
	want := map[string][][]expr.Any{
		ChainInClusterDNAT:   fromCluster,
		ChainInClusterOutput: fromCluster,
		ChainInClusterHairpin: {{
			&expr.Ct{Key: expr.CtKeySTATUS, Register: reg0},
			&expr.Bitwise{SourceRegister: reg0, DestRegister: reg0, Len: 4,
				Mask: binaryutil.NativeEndian.PutUint32(1 << 5), Xor: []byte{0, 0, 0, 0}},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: reg0, Data: []byte{0, 0, 0, 0}},
			fam4.loadNH(12, reg0), fam4.loadNH(16, reg1),
			&expr.Lookup{SourceRegister: reg0, DestRegister: reg0, IsDestRegSet: true, SetName: MapVPC2EIPQuoted, SetID: s.vpc2eipQuoted.ID},
			&expr.NAT{Type: expr.NATTypeSourceNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: reg0},
		}},
	}
	for chain, rules := range want {
		if got := rulesOf(rs, chain); !reflect.DeepEqual(got, rules) {
			t.Errorf("%s rules:\n got %#v\nwant %#v", chain, got, rules)
		}
	}
	if m := s.clusterEIP2VPC; !m.IsMap || m.KeyType != s.vpc2eip.KeyType || m.DataType != s.vpc2eip.DataType {
		t.Errorf("%s is not an address map: %+v", MapClusterEIP2VPC, m)
	}
}

func TestFlowCleanup(t *testing.T) {
	a := netip.MustParseAddr
	e5, e6, e7 := a("10.225.51.5"), a("10.225.51.6"), a("10.225.51.7")
	p5, p6, old := a("10.244.1.5"), a("10.244.1.6"), a("10.244.9.9")
	f := newFlowCleanup()
	woken := func() bool {
		select {
		case <-f.wake:
			return true
		default:
			return false
		}
	}
	check := func(step string, m flowMatcher, cases map[[2]netip.Addr]bool) {
		t.Helper()
		for c, want := range cases {
			if got := m(c[0], c[1]); got != want {
				t.Errorf("%s: %v -> %v selected %v, want %v", step, c[0], c[1], got, want)
			}
		}
	}

	// The first sync of a Programmer checks every translated flow to an
	// ElasticIP of the map, since it cannot know what changed before.
	f.replaced(map[netip.Addr]netip.Addr{e5: p5, e6: p6})
	w, ok := f.work()
	if !ok || !woken() {
		t.Fatal("the first sync left nothing to clean up")
	}
	check("first sync", w.matcher(), map[[2]netip.Addr]bool{
		{e5, p5}:  false, // translated to the current Pod IP
		{e5, old}: true,  // translated to another
		{e5, e5}:  false, // not translated (a source outside the cluster)
		{e7, old}: false, // not an ElasticIP of the map
	})
	f.done(w)
	if _, ok := f.work(); ok || woken() {
		t.Error("work left after a clean-up with nothing changed since")
	}

	// An incremental sync re-points e5 and removes e6: only their flows. A
	// clean-up that fails leaves them for the next one.
	f.applied([]Mapping{{ElasticIP: e5, PodIP: p5}, {ElasticIP: e6, PodIP: p6}}, []Mapping{{ElasticIP: e5, PodIP: old}})
	w, ok = f.work()
	if !ok || !woken() {
		t.Fatal("a re-pointed and a removed ElasticIP left nothing to clean up")
	}
	check("incremental", w.matcher(), map[[2]netip.Addr]bool{
		{e5, p5}:  true,  // the old Pod IP
		{e5, old}: false, // the new one
		{e6, p6}:  true,  // e6 is gone
		{e6, e6}:  false,
	})
	// e5 moves again while that clean-up runs: it stays to be cleaned.
	f.applied([]Mapping{{ElasticIP: e5, PodIP: old}}, []Mapping{{ElasticIP: e5, PodIP: p6}})
	f.done(w)
	w, ok = f.work()
	if !ok || len(w.stale) != 1 || w.pods[e5] != p6 {
		t.Fatalf("after the second move: %+v, %v; want e5 alone, now at %v", w, ok, p6)
	}
	f.done(w)

	// A full sync (after Invalidate) compares with what the kernel held.
	f.replaced(map[netip.Addr]netip.Addr{e5: p6, e7: p5})
	if _, ok := f.work(); ok {
		t.Error("a full sync that changed nothing left work")
	}
	woken()
	f.replaced(map[netip.Addr]netip.Addr{e7: p6})
	w, ok = f.work()
	if !ok || !woken() {
		t.Fatal("a full sync that changed ElasticIPs left nothing to clean up")
	}
	check("full sync", w.matcher(), map[[2]netip.Addr]bool{{e5, p6}: true, {e7, p5}: true, {e7, p6}: false})
}

// TestProgrammerCleansUpMovedFlows: Sync never walks the connection-tracking
// table; CleanupFlows does, after the first sync with in-cluster mappings
// and after a sync that re-points one, and only then.
func TestProgrammerCleansUpMovedFlows(t *testing.T) {
	p, r := newRecorded()
	st := testState(manyMappings(3))
	st.InCluster = []Mapping{m("10.225.60.1", "10.244.60.1")}
	cleaned := 0
	sync := func() {
		t.Helper()
		if err := p.Sync(context.Background(), st); err != nil {
			t.Fatal(err)
		}
		if len(r.cleanups) != cleaned {
			t.Fatalf("Sync walked the connection-tracking table")
		}
	}
	cleanup := func(want int) {
		t.Helper()
		if _, err := p.CleanupFlows(); err != nil || len(r.cleanups) != want {
			t.Fatalf("%d clean-ups (%v), want %d", len(r.cleanups), err, want)
		}
		cleaned = want
	}
	sync()
	cleanup(1)
	cleanup(1) // nothing changed since
	st.Direct = manyDirect(2)
	sync()
	cleanup(1)
	st.InCluster = []Mapping{m("10.225.60.1", "10.244.61.1")}
	sync()
	cleanup(2)
	if !r.cleanups[1](addr("10.225.60.1"), addr("10.244.60.1")) || r.cleanups[1](addr("10.225.60.1"), addr("10.244.61.1")) {
		t.Error("the clean-up does not select the re-pointed ElasticIP's flows to its old Pod IP only")
	}
	if st := p.LastSync(); st.InClusterRemoved != 1 || st.InClusterAdded != 1 || st.InCluster != 4 {
		t.Errorf("stats = %+v", st)
	}
}
