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
		loadNH(16, reg0), lookupCluster,
		loadNH(12, reg1), &expr.Lookup{SourceRegister: reg1, SetName: SetClusterCIDRs, SetID: s.cluster.ID},
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
			loadNH(12, reg0), loadNH(16, reg1),
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
	var f flowCleanup
	var asked []flowMatcher
	del := func(m flowMatcher) (int, error) { asked = append(asked, m); return 1, nil }

	// The first sync of a Programmer checks every translated flow to an
	// ElasticIP of the map, since it cannot know what changed before.
	now := map[netip.Addr]netip.Addr{e5: p5, e6: p6}
	f.replaced(now)
	if n, err := f.clean(now, del); n != 1 || err != nil || len(asked) != 1 {
		t.Fatalf("first clean-up: %d, %v, %d calls", n, err, len(asked))
	}
	first := asked[0]
	for _, c := range []struct {
		dst, src netip.Addr
		want     bool
	}{
		{e5, p5, false},  // translated to the current Pod IP
		{e5, old, true},  // translated to another
		{e5, e5, false},  // not translated (a source outside the cluster)
		{e7, old, false}, // not an ElasticIP of the map
	} {
		if got := first(c.dst, c.src); got != c.want {
			t.Errorf("first clean-up of %v -> %v: %v, want %v", c.dst, c.src, got, c.want)
		}
	}
	if _, _ = f.clean(now, del); len(asked) != 1 {
		t.Error("a clean-up with nothing changed dumped the table")
	}

	// An incremental sync re-points e5 and removes e6: only their flows.
	f.applied([]Mapping{{ElasticIP: e5, PodIP: p5}, {ElasticIP: e6, PodIP: p6}}, []Mapping{{ElasticIP: e5, PodIP: old}})
	now = map[netip.Addr]netip.Addr{e5: old}
	failing := func(m flowMatcher) (int, error) { asked = append(asked, m); return 0, errors.New("dump interrupted") }
	if _, err := f.clean(now, failing); err == nil {
		t.Fatal("a failed clean-up reported no error")
	}
	if _, err := f.clean(now, del); err != nil || len(asked) != 3 {
		t.Fatalf("the clean-up was not retried after a failure: %v, %d calls", err, len(asked))
	}
	retry := asked[2]
	for _, c := range []struct {
		dst, src netip.Addr
		want     bool
	}{
		{e5, p5, true},   // the old Pod IP
		{e5, old, false}, // the new one
		{e6, p6, true},   // e6 is gone
		{e6, e6, false},
	} {
		if got := retry(c.dst, c.src); got != c.want {
			t.Errorf("clean-up of %v -> %v: %v, want %v", c.dst, c.src, got, c.want)
		}
	}

	// A full sync (after Invalidate) compares with what the kernel held.
	f.replaced(map[netip.Addr]netip.Addr{e5: old, e7: p5})
	if _, _ = f.clean(map[netip.Addr]netip.Addr{e5: old, e7: p5}, del); len(asked) != 3 {
		t.Error("a full sync that changed nothing cleaned up")
	}
	f.replaced(map[netip.Addr]netip.Addr{e7: p6})
	if _, _ = f.clean(map[netip.Addr]netip.Addr{e7: p6}, del); len(asked) != 4 || !asked[3](e5, old) || !asked[3](e7, p5) || asked[3](e7, p6) {
		t.Error("a full sync did not clean up the flows of the ElasticIPs it changed")
	}
}

// TestProgrammerCleansUpMovedFlows: the Programmer asks for a clean-up on its
// first sync with in-cluster mappings and after a sync that re-points one,
// not after syncs that leave them alone.
func TestProgrammerCleansUpMovedFlows(t *testing.T) {
	p, r := newRecorded()
	st := testState(manyMappings(3))
	st.InCluster = []Mapping{m("10.225.60.1", "10.244.60.1")}
	sync := func() {
		t.Helper()
		if err := p.Sync(context.Background(), st); err != nil {
			t.Fatal(err)
		}
	}
	sync()
	if len(r.cleanups) != 1 {
		t.Fatalf("%d clean-ups after the first sync, want 1", len(r.cleanups))
	}
	st.Direct = manyDirect(2)
	sync()
	if len(r.cleanups) != 1 {
		t.Errorf("%d clean-ups after a change of direct NICs only, want still 1", len(r.cleanups))
	}
	st.InCluster = []Mapping{m("10.225.60.1", "10.244.61.1")}
	sync()
	if len(r.cleanups) != 2 || !r.cleanups[1](addr("10.225.60.1"), addr("10.244.60.1")) {
		t.Errorf("a re-pointed in-cluster mapping did not clean up its old flows (%d clean-ups)", len(r.cleanups))
	}
	if st := p.LastSync(); st.InClusterRemoved != 1 || st.InClusterAdded != 1 || st.InCluster != 4 {
		t.Errorf("stats = %+v", st)
	}
}
