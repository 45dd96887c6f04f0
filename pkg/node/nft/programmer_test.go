package nft

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"testing"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/loutres/juneau/pkg/listdiff"
)

// recorder stands in for the kernel: it records every batch a Programmer
// sends and acknowledges each message, or fails them all when failNext is set.
type recorder struct {
	batches  [][]netlink.Message
	failNext bool
	// dials counts the connections opened, lasting ones in lasting.
	dials, lasting int
	// cleanups records the connection-tracking clean-ups asked for.
	cleanups []flowMatcher
}

func (r *recorder) dial(_ int, lasting bool) (*nftables.Conn, func(int) error, error) {
	r.dials++
	if lasting {
		r.lasting++
	}
	c, err := nftables.New(nftables.WithTestDial(func(req []netlink.Message) ([]netlink.Message, error) {
		if len(req) == 0 {
			return nil, nil // a further receive after all acks were delivered
		}
		r.batches = append(r.batches, req)
		if r.failNext {
			r.failNext = false
			return nil, unix.ENOENT
		}
		acks := make([]netlink.Message, 0, len(req))
		for _, msg := range req {
			if msg.Header.Flags&netlink.Acknowledge != 0 {
				acks = append(acks, netlink.Message{
					Header: netlink.Header{Type: netlink.Error, Sequence: msg.Header.Sequence, PID: msg.Header.PID},
					Data:   make([]byte, 4),
				})
			}
		}
		return acks, nil
	}))
	return c, nil, err
}

func newRecorded() (*Programmer, *recorder) {
	p := NewProgrammer(Options{})
	r := &recorder{}
	p.dial = r.dial
	// Never the test process's own connection-tracking table.
	p.deleteFlows = func(m flowMatcher) (int, error) {
		r.cleanups = append(r.cleanups, m)
		return 0, nil
	}
	return p, r
}

// msgNames names the nftables message types the Programmer sends.
var msgNames = map[uint16]string{
	unix.NFT_MSG_NEWTABLE: "newtable", unix.NFT_MSG_DELTABLE: "deltable", unix.NFT_MSG_NEWCHAIN: "newchain",
	unix.NFT_MSG_NEWRULE: "newrule", unix.NFT_MSG_NEWSET: "newset", unix.NFT_MSG_NEWSETELEM: "newsetelem",
	unix.NFT_MSG_DELSETELEM: "delsetelem", unix.NFNL_MSG_BATCH_BEGIN: "begin", unix.NFNL_MSG_BATCH_END: "end",
	unix.NFT_MSG_DELCHAIN: "delchain", unix.NFT_MSG_DELRULE: "delrule",
}

// kinds counts the nftables message types in a batch, by name.
func kinds(batch []netlink.Message) map[string]int {
	out := map[string]int{}
	for _, m := range batch {
		t := uint16(m.Header.Type)
		if t>>8 == unix.NFNL_SUBSYS_NFTABLES {
			t &= 0xff
		}
		name, ok := msgNames[t]
		if !ok {
			name = fmt.Sprintf("type%#x", uint16(m.Header.Type))
		}
		out[name]++
	}
	return out
}

// elementCount returns the number of elements in a set element message.
func elementCount(t *testing.T, msg netlink.Message) int {
	t.Helper()
	ad, err := netlink.NewAttributeDecoder(msg.Data[4:]) // after nfgenmsg
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ad.Next() {
		if ad.Type()&^unix.NLA_F_NESTED == unix.NFTA_SET_ELEM_LIST_ELEMENTS {
			inner, err := netlink.NewAttributeDecoder(ad.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			for inner.Next() {
				n++
			}
		}
	}
	return n
}

func manyMappings(n int) []Mapping {
	out := make([]Mapping, n)
	for i := range out {
		out[i] = Mapping{
			ElasticIP: netip.AddrFrom4([4]byte{10, 225, byte(i >> 8), byte(i)}),
			PodIP:     netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)}),
		}
	}
	return out
}

func testState(mappings []Mapping) DesiredState {
	return DesiredState{
		Config:   Config{ExternalInterface: "ext0", ClusterCIDRs: prefixes("10.244.0.0/16", "10.96.0.0/12")},
		Mappings: mappings,
	}
}

func TestFirstSyncIsOneTransaction(t *testing.T) {
	p, r := newRecorded()
	st := testState(manyMappings(10000))
	st.Direct = manyDirect(500)
	if err := p.Sync(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	if len(r.batches) != 1 {
		t.Fatalf("%d batches, want 1", len(r.batches))
	}
	k := kinds(r.batches[0])
	if k["begin"] != 1 || k["end"] != 1 || k["newtable"] != 4 || k["deltable"] != 2 || k["newset"] != 24 || k["newchain"] != 20 {
		t.Errorf("batch = %v", k)
	}
	elems := 0
	for _, msg := range r.batches[0] {
		if uint16(msg.Header.Type)&0xff == unix.NFT_MSG_NEWSETELEM {
			if l := len(msg.Data); l >= 1<<16 {
				t.Errorf("element message of %d bytes exceeds 64 KiB", l)
			}
			elems += elementCount(t, msg)
		}
	}
	// 5 elements per mapping (none limited) and one more in the in-cluster
	// map, 5 ICMP types and 4 ICMPv6 ones, 2 interval bounds per cluster
	// range, an interface in each family's table and a pair per direct NIC
	if want := 6*10000 + 5 + 4 + 4 + 3*500; elems != want {
		t.Errorf("%d elements, want %d", elems, want)
	}
	if st := p.LastSync(); !st.Full || st.Mappings != 10000 || st.Direct != 500 {
		t.Errorf("stats = %+v", st)
	}
}

func TestSameStateWritesNothing(t *testing.T) {
	p, r := newRecorded()
	s := testState(manyMappings(3))
	for range 3 {
		if err := p.Sync(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	if len(r.batches) != 1 || !p.LastSync().Skipped {
		t.Errorf("%d batches for three identical syncs (stats %+v), want 1", len(r.batches), p.LastSync())
	}
}

func TestOneChangeTouchesOnlyItsElements(t *testing.T) {
	p, r := newRecorded()
	ms := manyMappings(10000)
	if err := p.Sync(context.Background(), testState(ms)); err != nil {
		t.Fatal(err)
	}
	ms[1234].PodIP = netip.MustParseAddr("10.244.200.1")
	if err := p.Sync(context.Background(), testState(ms)); err != nil {
		t.Fatal(err)
	}
	if len(r.batches) != 2 {
		t.Fatalf("%d batches", len(r.batches))
	}
	k := kinds(r.batches[1])
	// The five NAT maps (the mapping has no limit) and the in-cluster map.
	if k["delsetelem"] != 6 || k["newsetelem"] != 6 || k["begin"] != 1 || k["end"] != 1 || len(k) != 4 {
		t.Errorf("incremental batch = %v, want 6 element deletions and 6 additions only", k)
	}
	for _, msg := range r.batches[1] {
		if tp := uint16(msg.Header.Type) & 0xff; uint16(msg.Header.Type)>>8 == unix.NFNL_SUBSYS_NFTABLES &&
			(tp == unix.NFT_MSG_NEWSETELEM || tp == unix.NFT_MSG_DELSETELEM) && elementCount(t, msg) != 1 {
			t.Errorf("message carries %d elements, want 1", elementCount(t, msg))
		}
	}
	if st := p.LastSync(); st.Full || st.Removed != 1 || st.Added != 1 {
		t.Errorf("stats = %+v", st)
	}
}

// TestChangeToldIsTaken: a Sync told where the mappings changed since the version it
// applied (DesiredState.MappingsChange) takes that window without comparing the lists:
// told a window that leaves the change out, it writes nothing. Told a change from a
// version it did not apply (one it missed), it compares, and writes the change.
func TestChangeToldIsTaken(t *testing.T) {
	for _, missed := range []bool{false, true} {
		p, r := newRecorded()
		ms := manyMappings(1000)
		first := testState(ms)
		first.MappingsChange = listdiff.Change{To: 1000001}
		if err := p.Sync(context.Background(), first); err != nil {
			t.Fatal(err)
		}
		ms[500].PodIP = netip.MustParseAddr("10.244.200.1")
		next := testState(ms)
		from := first.MappingsChange.To
		if missed {
			from++
		}
		// The window of the first 100 entries: the change at 500 is outside it.
		next.MappingsChange = listdiff.Change{From: from, To: 1000003, Window: listdiff.Window{Start: 0, OldEnd: 100, NewEnd: 100}}
		if err := p.Sync(context.Background(), next); err != nil {
			t.Fatal(err)
		}
		if st := p.LastSync(); missed != (len(r.batches) == 2) || st.Skipped == missed {
			t.Errorf("missed %v: %d batches, stats %+v; want the change written only when the version told is not the one applied", missed, len(r.batches), st)
		}
	}
}

func TestConfigChangeRebuilds(t *testing.T) {
	p, r := newRecorded()
	s := testState(manyMappings(2))
	_ = p.Sync(context.Background(), s)
	s.ExternalInterface = "ext1"
	if err := p.Sync(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if len(r.batches) != 2 || kinds(r.batches[1])["deltable"] != 2 {
		t.Errorf("interface change did not rebuild the table: %v", kinds(r.batches[len(r.batches)-1]))
	}
}

func TestFailureMakesNextSyncFull(t *testing.T) {
	p, r := newRecorded()
	ms := manyMappings(2)
	_ = p.Sync(context.Background(), testState(ms))
	ms[0].PodIP = netip.MustParseAddr("10.244.99.1")
	r.failNext = true
	if err := p.Sync(context.Background(), testState(ms)); err == nil {
		t.Fatal("failed write reported success")
	}
	if err := p.Sync(context.Background(), testState(ms)); err != nil {
		t.Fatal(err)
	}
	if !p.LastSync().Full || kinds(r.batches[2])["deltable"] != 2 {
		t.Error("sync after a failure was not a full rebuild")
	}
	// The failed connection was dropped and a new one opened.
	if r.dials != 2 || r.lasting != 2 {
		t.Errorf("%d connections opened (%d lasting), want 2 lasting", r.dials, r.lasting)
	}
	p.Invalidate()
	_ = p.Sync(context.Background(), testState(ms))
	if !p.LastSync().Full {
		t.Error("sync after Invalidate was not a full rebuild")
	}
}

// TestOneConnectionAcrossSyncs: syncs share one lasting netlink connection
// (closing one makes the kernel wait for an RCU grace period), and a
// caller changing its desired state in place after a Sync is seen as a
// change by the next one.
func TestOneConnectionAcrossSyncs(t *testing.T) {
	p, r := newRecorded()
	st := testState(manyMappings(100))
	for i := range 5 {
		st.Mappings[i].PodIP = netip.AddrFrom4([4]byte{10, 244, 200, byte(i)})
		if err := p.Sync(context.Background(), st); err != nil {
			t.Fatal(err)
		}
		if i > 0 && p.LastSync().Removed != 1 {
			t.Errorf("sync %d: stats %+v, want one mapping replaced", i, p.LastSync())
		}
	}
	p.Invalidate()
	if err := p.Sync(context.Background(), st); err != nil || !p.LastSync().Full {
		t.Fatalf("resync: %v, %+v", err, p.LastSync())
	}
	if r.dials != 1 || r.lasting != 1 || len(r.batches) != 6 {
		t.Errorf("%d connections (%d lasting) for %d batches, want 1 lasting connection", r.dials, r.lasting, len(r.batches))
	}
}

func TestInvalidInput(t *testing.T) {
	p, r := newRecorded()
	err := p.Sync(context.Background(), DesiredState{})
	if !errors.Is(err, ErrInvalidConfig) || len(r.batches) != 0 {
		t.Errorf("invalid config: err %v, %d batches", err, len(r.batches))
	}
	s := testState([]Mapping{m("10.225.51.5", "10.244.1.5"), m("10.225.51.5", "10.244.1.6"), m("10.225.51.7", "10.244.1.7")})
	err = p.Sync(context.Background(), s)
	if !errors.Is(err, ErrInvalidMapping) || len(r.batches) != 1 || p.LastSync().Mappings != 1 {
		t.Errorf("conflict: err %v, %d batches, stats %+v; want the valid mapping applied", err, len(r.batches), p.LastSync())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Sync(ctx, testState(nil)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

// manyDirect returns n direct NICs, one address each.
func manyDirect(n int) []DirectNIC {
	out := make([]DirectNIC, n)
	for i := range out {
		out[i] = DirectNIC{
			HostInterface: fmt.Sprintf("jn%06x", i),
			Address:       netip.AddrFrom4([4]byte{10, 225, 128 + byte(i>>8), byte(i)}),
		}
	}
	return out
}

// setElems is the content of one set element message: its set, keys and,
// for a verdict map, the chains the elements jump to.
type setElems struct {
	del    bool
	set    string
	keys   []string
	chains []string
}

func (s setElems) String() string {
	return fmt.Sprintf("{del=%v %s %q %q}", s.del, s.set, s.keys, s.chains)
}

// elementMessages decodes the element messages of a batch.
func elementMessages(t *testing.T, batch []netlink.Message) []setElems {
	t.Helper()
	var out []setElems
	for _, msg := range batch {
		tp := uint16(msg.Header.Type)
		if tp>>8 != unix.NFNL_SUBSYS_NFTABLES || (tp&0xff != unix.NFT_MSG_NEWSETELEM && tp&0xff != unix.NFT_MSG_DELSETELEM) {
			continue
		}
		se := setElems{del: tp&0xff == unix.NFT_MSG_DELSETELEM}
		ad, err := netlink.NewAttributeDecoder(msg.Data[4:])
		if err != nil {
			t.Fatal(err)
		}
		for ad.Next() {
			switch ad.Type() &^ unix.NLA_F_NESTED {
			case unix.NFTA_SET_ELEM_LIST_SET:
				se.set = ad.String()
			case unix.NFTA_SET_ELEM_LIST_ELEMENTS:
				ad.Nested(func(elems *netlink.AttributeDecoder) error {
					for elems.Next() {
						elems.Nested(func(el *netlink.AttributeDecoder) error {
							for el.Next() {
								switch el.Type() &^ unix.NLA_F_NESTED {
								case unix.NFTA_SET_ELEM_KEY:
									el.Nested(func(k *netlink.AttributeDecoder) error {
										for k.Next() {
											se.keys = append(se.keys, string(bytes.TrimRight(k.Bytes(), "\x00")))
										}
										return nil
									})
								case unix.NFTA_SET_ELEM_DATA:
									el.Nested(func(d *netlink.AttributeDecoder) error {
										for d.Next() {
											if d.Type()&^unix.NLA_F_NESTED == unix.NFTA_DATA_VERDICT {
												se.chains = append(se.chains, verdictChain(d))
											}
										}
										return nil
									})
								}
							}
							return nil
						})
					}
					return nil
				})
			}
		}
		if err := ad.Err(); err != nil {
			t.Fatal(err)
		}
		out = append(out, se)
	}
	return out
}

// key renders a direct_allowed key as elementMessages reports it.
func pairKey(iface, a string) string {
	b := netip.MustParseAddr(a).As4()
	return string(ifname(iface)) + string(b[:])
}

// TestOneDirectChangeTouchesOnlyItsElements: changing, adding or removing
// one direct NIC among 1,000 writes only that NIC's elements, in one
// transaction.
func TestOneDirectChangeTouchesOnlyItsElements(t *testing.T) {
	p, r := newRecorded()
	st := testState(manyMappings(10))
	st.Direct = manyDirect(1000)
	if err := p.Sync(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	nic := st.Direct[42]
	steps := []struct {
		name   string
		change func()
		want   []setElems
		stats  SyncStats
	}{
		{
			name:   "address changed",
			change: func() { st.Direct[42].Address = netip.MustParseAddr("10.225.250.1") },
			want: []setElems{
				{del: true, set: SetDirectAllowed, keys: []string{pairKey(nic.HostInterface, nic.Address.String())}},
				{set: SetDirectAllowed, keys: []string{pairKey(nic.HostInterface, "10.225.250.1")}},
			},
			stats: SyncStats{DirectRemoved: 1, DirectAdded: 1},
		},
		{
			name:   "NIC added",
			change: func() { st.Direct = append(st.Direct, dn("jnnew", "10.225.250.2")) },
			want: []setElems{
				{set: SetDirectIfaces, keys: []string{"jnnew"}},
				{set: SetDirectAllowed, keys: []string{pairKey("jnnew", "10.225.250.2")}},
				{set: SetDirectIfaces, keys: []string{"jnnew"}}, // the ip6 table's
			},
			stats: SyncStats{DirectAdded: 1},
		},
		{
			name:   "NIC removed",
			change: func() { st.Direct = st.Direct[:len(st.Direct)-1] },
			want: []setElems{
				{del: true, set: SetDirectIfaces, keys: []string{"jnnew"}},
				{del: true, set: SetDirectAllowed, keys: []string{pairKey("jnnew", "10.225.250.2")}},
				{del: true, set: SetDirectIfaces, keys: []string{"jnnew"}}, // the ip6 table's
			},
			stats: SyncStats{DirectRemoved: 1},
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
			if k := kinds(batch); k["begin"] != 1 || k["end"] != 1 || k["newtable"]+k["deltable"]+k["newrule"]+k["newset"] != 0 {
				t.Errorf("incremental batch = %v", k)
			}
			if got := elementMessages(t, batch); !reflect.DeepEqual(got, step.want) {
				t.Errorf("element messages = %v, want %v", got, step.want)
			}
			got := p.LastSync()
			got.Duration = 0
			step.stats.Mappings, step.stats.Direct, step.stats.InCluster = 10, len(st.Direct), 10
			if got != step.stats {
				t.Errorf("stats = %+v, want %+v", got, step.stats)
			}
		})
	}
	p.Invalidate()
	if err := p.Sync(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	if k := kinds(r.batches[len(r.batches)-1]); k["deltable"] != 2 || k["newset"] != 24 {
		t.Errorf("sync after Invalidate = %v, want the whole table in one transaction", k)
	}
}

// verdictChain returns the chain of an NFTA_DATA_VERDICT attribute.
func verdictChain(d *netlink.AttributeDecoder) string {
	var chain string
	d.Nested(func(v *netlink.AttributeDecoder) error {
		for v.Next() {
			if v.Type() == unix.NFTA_VERDICT_CHAIN {
				chain = v.String()
			}
		}
		return nil
	})
	return chain
}
