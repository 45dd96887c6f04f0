package nft

import (
	"bytes"
	"fmt"
	"net/netip"
	"reflect"
	"testing"

	"github.com/google/nftables"
)

func TestEntriesOf(t *testing.T) {
	s := newSets(fam4)
	fs := familySets{s, newSets(fam6)}
	eip, pod := []byte{10, 225, 51, 5}, []byte{10, 244, 1, 5}
	limited := []entry{
		{set: s.eip2vpc, key: eip, val: pod},
		{set: s.vpc2eip, key: pod, val: eip},
		{set: s.eip2vpcQuoted, key: append(append([]byte{}, eip...), eip...), val: pod},
		{set: s.vpc2eipQuoted, key: append(append([]byte{}, pod...), pod...), val: eip},
	}
	if es := entriesOf(fs, mbw("10.225.51.5", "10.244.1.5", 5)); !reflect.DeepEqual(es, limited) {
		t.Errorf("entriesOf(limited) = %v, want %v", es, limited)
	}
	// Without a limit the ElasticIP is also in the map of the fast path.
	unlimited := append(limited, entry{set: s.eip2vpcUnlimited, key: eip, val: pod})
	if es := entriesOf(fs, m("10.225.51.5", "10.244.1.5")); !reflect.DeepEqual(es, unlimited) {
		t.Errorf("entriesOf(unlimited) = %v, want %v", es, unlimited)
	}
}

func TestIntervalElements(t *testing.T) {
	a := netip.MustParseAddr
	got := intervalElements([]addrRange{{a("10.96.0.0"), a("10.111.255.255")}, {a("192.0.2.0"), a("255.255.255.255")}})
	want := []nftables.SetElement{
		{Key: []byte{10, 96, 0, 0}},
		{Key: []byte{10, 112, 0, 0}, IntervalEnd: true},
		{Key: []byte{192, 0, 2, 0}}, // open to the end of the address space
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("intervalElements = %v, want %v", got, want)
	}
}

func TestChunk(t *testing.T) {
	mk := func(n, keyLen int, withVal bool) []nftables.SetElement {
		out := make([]nftables.SetElement, n)
		for i := range out {
			out[i].Key = bytes.Repeat([]byte{byte(i)}, keyLen)
			if withVal {
				out[i].Val = []byte{1, 2, 3, 4}
			}
		}
		return out
	}
	for _, tc := range []struct {
		n, keyLen int
		val       bool
	}{{10000, 4, true}, {10000, 8, true}, {10000, 4, false}, {1, 4, true}, {0, 4, true}} {
		t.Run(fmt.Sprintf("%d×%dB val=%v", tc.n, tc.keyLen, tc.val), func(t *testing.T) {
			elems := mk(tc.n, tc.keyLen, tc.val)
			parts := chunk(elems)
			total := 0
			for _, p := range parts {
				total += len(p)
				if size := len(p) * encodedSize(p[0]); size > maxElementBytes {
					t.Errorf("chunk of %d elements is %d bytes", len(p), size)
				}
			}
			if total != tc.n {
				t.Errorf("chunks hold %d elements, want %d", total, tc.n)
			}
			if tc.n == 10000 && tc.val && (len(p0(parts)) < 1500 || len(p0(parts)) > 2100) {
				t.Errorf("chunk size %d, want about 2,000", len(p0(parts)))
			}
		})
	}
}

func p0(parts [][]nftables.SetElement) []nftables.SetElement {
	if len(parts) == 0 {
		return nil
	}
	return parts[0]
}

// deltaOf validates old as a whole, then applies the change to new the way
// an incremental Sync does, and returns what it would write.
func deltaOf(t *testing.T, old, new DesiredState) delta {
	t.Helper()
	ix, err := newIndex(old.Config)
	if err != nil {
		t.Fatal(err)
	}
	ix.apply(nil, old.Mappings, nil, old.Direct, nil, old.InCluster)
	remM, addM := changed(old.Mappings, new.Mappings)
	remD, addD := changed(old.Direct, new.Direct)
	remC, addC := changed(old.InCluster, new.InCluster)
	return ix.apply(remM, addM, remD, addD, remC, addC)
}

func TestDiffMappings(t *testing.T) {
	cfg := Config{ExternalInterface: "eth0"}
	old := DesiredState{Config: cfg, Mappings: []Mapping{m("10.225.51.5", "10.244.1.5"), m("10.225.51.6", "10.244.1.6"), m("10.225.51.7", "10.244.1.7")}}
	new := DesiredState{Config: cfg, Mappings: []Mapping{m("10.225.51.5", "10.244.1.5"), m("10.225.51.6", "10.244.1.9"), m("10.225.51.8", "10.244.1.8")}}
	d := deltaOf(t, old, new)
	wantRemoved := []Mapping{m("10.225.51.6", "10.244.1.6"), m("10.225.51.7", "10.244.1.7")}
	wantAdded := []Mapping{m("10.225.51.6", "10.244.1.9"), m("10.225.51.8", "10.244.1.8")}
	if !reflect.DeepEqual(d.removed, wantRemoved) || !reflect.DeepEqual(d.added, wantAdded) {
		t.Errorf("diff = -%v +%v, want -%v +%v", d.removed, d.added, wantRemoved, wantAdded)
	}
	if d := deltaOf(t, old, old); !d.empty() {
		t.Errorf("diff of equal states = %+v", d)
	}
	// The same entries in another order, or one listed twice, change nothing.
	shuffled := DesiredState{Config: cfg, Mappings: []Mapping{old.Mappings[2], old.Mappings[0], old.Mappings[1], old.Mappings[0]}}
	if d := deltaOf(t, old, shuffled); !d.empty() {
		t.Errorf("diff of a reordered state = %+v", d)
	}
}

// TestIncrementalMatchesWhole applies a series of changes one by one and
// checks after each that the applied state is the one a validation of the
// whole desired state gives: conflicts appearing and resolving, Pod IPs
// moving between ElasticIPs, limits coming and going, direct NICs sharing
// addresses with mappings.
func TestIncrementalMatchesWhole(t *testing.T) {
	cfg := Config{ExternalInterface: "eth0"}
	steps := []DesiredState{
		{Mappings: []Mapping{m("10.225.51.1", "10.244.1.1"), mbw("10.225.51.2", "10.244.1.2", 5)}},
		{Mappings: []Mapping{m("10.225.51.1", "10.244.1.1"), mbw("10.225.51.2", "10.244.1.2", 5), m("10.225.51.3", "10.244.1.1")}}, // Pod IP on two ElasticIPs
		{Mappings: []Mapping{mbw("10.225.51.2", "10.244.1.2", 5), m("10.225.51.3", "10.244.1.1")}},                                 // resolved
		{Mappings: []Mapping{mbw("10.225.51.2", "10.244.1.3", 7), m("10.225.51.3", "10.244.1.2")}},                                 // Pod IPs swap hands
		{Mappings: []Mapping{mbw("10.225.51.2", "10.244.1.3", 7), mbw("10.225.51.2", "10.244.1.3", 8)}},                            // two bandwidths
		{Mappings: []Mapping{m("10.225.51.2", "10.244.1.3"), m("10.244.1.3", "10.244.1.4")}, Direct: []DirectNIC{dnbw("jn1", "10.225.51.9", 3), dnbw("jn1", "10.244.1.3", 4)}},
		{Mappings: []Mapping{m("10.225.51.2", "10.244.1.3")}, Direct: []DirectNIC{dnbw("jn1", "10.225.51.9", 3), dnbw("jn2", "10.225.51.9", 3), dnbw("jn1", "10.244.1.3", 4)}},
		{Direct: []DirectNIC{dnbw("jn2", "10.225.51.9", 3), dnbw("jn1", "10.244.1.3", 4), {HostInterface: "jn3"}}},
		// In-cluster mappings: the node's own count too; an ElasticIP of
		// another node moving to this one; conflicts appearing and going.
		{Mappings: []Mapping{m("10.225.51.2", "10.244.1.3")}, InCluster: []Mapping{m("10.225.51.2", "10.244.1.3"), m("10.225.51.20", "10.244.2.20")}},
		{Mappings: []Mapping{m("10.225.51.2", "10.244.1.3"), m("10.225.51.20", "10.244.1.20")}, InCluster: []Mapping{m("10.225.51.2", "10.244.1.3"), m("10.225.51.20", "10.244.2.20")}},
		{Mappings: []Mapping{m("10.225.51.2", "10.244.1.3"), m("10.225.51.20", "10.244.1.20")}, InCluster: []Mapping{m("10.225.51.2", "10.244.1.3"), m("10.225.51.20", "10.244.1.20"), m("10.225.51.21", "10.225.51.2")}},
		{InCluster: []Mapping{m("10.225.51.21", "10.244.2.21"), mbw("10.225.51.21", "10.244.2.21", 9), m("10.225.51.22", "10.244.2.21"), m("10.225.51.23", "10.225.51.23")}},
		{InCluster: []Mapping{m("10.225.51.22", "10.244.2.21")}},
		{},
	}
	ix, err := newIndex(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var prev DesiredState
	for i, st := range steps {
		st.Config = cfg
		remM, addM := changed(prev.Mappings, st.Mappings)
		remD, addD := changed(prev.Direct, st.Direct)
		remC, addC := changed(prev.InCluster, st.InCluster)
		ix.apply(remM, addM, remD, addD, remC, addC)
		prev = st
		whole, wholeErr := normalize(st)
		if !reflect.DeepEqual(ix.s, whole) {
			t.Errorf("step %d: incremental state\n%+v\nwhole\n%+v", i, ix.s, whole)
		}
		if got := ix.err(); (got == nil) != (wholeErr == nil) || (got != nil && got.Error() != wholeErr.Error()) {
			t.Errorf("step %d: error %v, whole %v", i, got, wholeErr)
		}
	}
}

func TestDiffDirect(t *testing.T) {
	cfg := Config{ExternalInterface: "eth0"}
	old := DesiredState{Config: cfg, Direct: []DirectNIC{
		dn("veth1", "10.225.51.6"), dn("veth2", "10.225.51.7"), dn("veth3", "10.225.51.8"), dn("veth3", "10.244.1.8"),
	}}
	new := DesiredState{Config: cfg, Direct: []DirectNIC{
		dn("veth1", "10.225.51.6"), dn("veth2", "10.225.51.9"), dn("veth4", "10.225.51.8"), dn("veth4", "10.244.1.8"),
	}}
	got := deltaOf(t, old, new).direct
	want := directChange{
		removedIfaces: []familyIface{{fam: fam4, name: "veth3"}, {fam: fam6, name: "veth3"}},
		addedIfaces:   []familyIface{{fam: fam4, name: "veth4"}, {fam: fam6, name: "veth4"}},
		removedPairs:  []DirectNIC{dn("veth2", "10.225.51.7"), dn("veth3", "10.225.51.8"), dn("veth3", "10.244.1.8")},
		addedPairs:    []DirectNIC{dn("veth2", "10.225.51.9"), dn("veth4", "10.225.51.8"), dn("veth4", "10.244.1.8")},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("diff = %+v\nwant %+v", got, want)
	}
	if d := deltaOf(t, old, old); !d.empty() {
		t.Errorf("diff of equal states = %+v", d)
	}
}

// TestDirectElements checks the keys: the name padded to IFNAMSIZ (as the
// kernel stores iifname), then the address, 20 bytes in all.
func TestDirectElements(t *testing.T) {
	s := newSets(fam4)
	out := map[*nftables.Set][]nftables.SetElement{}
	addDirect(out, familySets{s, newSets(fam6)}, []familyIface{{fam: fam4, name: "jnab12cd"}}, []DirectNIC{dn("jnab12cd", "10.225.51.6")})
	name := append([]byte("jnab12cd"), make([]byte, 8)...)
	want := map[*nftables.Set][]nftables.SetElement{
		s.directIfaces:  {{Key: name}},
		s.directAllowed: {{Key: append(append([]byte{}, name...), 10, 225, 51, 6)}},
	}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("elements = %v, want %v", out, want)
	}
}
