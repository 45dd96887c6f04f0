package nft

import (
	"context"
	"encoding/binary"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/test/require"
)

// notification builds an nftables notification of type msgType for an object of
// table in family, as the kernel sends them.
func notification(t *testing.T, msgType uint16, family uint8, table string) netlink.Message {
	t.Helper()
	ae := netlink.NewAttributeEncoder()
	ae.String(1, table)
	ae.String(3, "some-object")
	attrs, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | msgType)},
		Data:   append([]byte{family, unix.NFNETLINK_V0, 0, 0}, attrs...),
	}
}

// newGen builds the NEWGEN notification that ends a transaction of process comm.
func newGen(t *testing.T, comm string) netlink.Message {
	t.Helper()
	ae := netlink.NewAttributeEncoder()
	ae.ByteOrder = binary.BigEndian
	ae.Uint32(unix.NFTA_GEN_ID, 42)
	ae.Uint32(unix.NFTA_GEN_PROC_PID, 4242)
	ae.String(unix.NFTA_GEN_PROC_NAME, comm)
	attrs, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWGEN)},
		Data:   append([]byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0}, attrs...),
	}
}

func TestTransactionsDecideDrift(t *testing.T) {
	const v4, v6, inet = unix.NFPROTO_IPV4, unix.NFPROTO_IPV6, unix.NFPROTO_INET
	for _, tc := range []struct {
		name string
		msgs func(t *testing.T) []netlink.Message
		want []Drift // one per transaction reported
	}{
		{"nft flushes our table", func(t *testing.T) []netlink.Message {
			return []netlink.Message{
				notification(t, unix.NFT_MSG_DELRULE, v4, TableName),
				notification(t, unix.NFT_MSG_DELRULE, v4, TableName),
				notification(t, unix.NFT_MSG_DELSETELEM, v4, TableName),
				newGen(t, "nft"),
			}
		}, []Drift{{Processes: []string{"nft"}, Changes: 3}}},
		{"our own transaction", func(t *testing.T) []netlink.Message {
			return []netlink.Message{
				notification(t, unix.NFT_MSG_DELTABLE, v4, TableName),
				notification(t, unix.NFT_MSG_NEWTABLE, v4, TableName),
				notification(t, unix.NFT_MSG_NEWSETELEM, v4, TableName),
				newGen(t, "juneau"),
			}
		}, nil},
		{"another program's table", func(t *testing.T) []netlink.Message {
			return []netlink.Message{
				notification(t, unix.NFT_MSG_NEWRULE, v4, "kube-proxy"),
				notification(t, unix.NFT_MSG_NEWSETELEM, inet, TableName), // inet juneau is not ours
				newGen(t, "kube-proxy"),
			}
		}, nil},
		{"our ip6 table", func(t *testing.T) []netlink.Message {
			return []netlink.Message{
				notification(t, unix.NFT_MSG_DELSETELEM, v6, TableName),
				newGen(t, "nft"),
			}
		}, []Drift{{Processes: []string{"nft"}, Changes: 1}}},
		{"a transaction of ours then one of nft", func(t *testing.T) []netlink.Message {
			return []netlink.Message{
				notification(t, unix.NFT_MSG_NEWSETELEM, v4, TableName),
				newGen(t, "juneau"),
				notification(t, unix.NFT_MSG_DELSETELEM, v4, "other"),
				notification(t, unix.NFT_MSG_DELSETELEM, v4, TableName),
				newGen(t, "nft"),
				newGen(t, "nft"), // touched nothing
			}
		}, []Drift{{Processes: []string{"nft"}, Changes: 1}}},
		{"a process of unknown name", func(t *testing.T) []netlink.Message {
			return []netlink.Message{notification(t, unix.NFT_MSG_DELCHAIN, v4, TableName), newGen(t, "")}
		}, []Drift{{Processes: []string{"unknown"}, Changes: 1}}},
		{"not nftables, or too short", func(t *testing.T) []netlink.Message {
			m := notification(t, unix.NFT_MSG_DELRULE, v4, TableName)
			m.Header.Type = netlink.HeaderType(unix.NFNL_SUBSYS_CTNETLINK<<8 | unix.NFT_MSG_DELRULE)
			short := notification(t, unix.NFT_MSG_DELRULE, v4, TableName)
			short.Data = short.Data[:2]
			return []netlink.Message{m, short, newGen(t, "nft")}
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := transactions{self: "juneau"}
			var got []Drift
			for _, m := range tc.msgs(t) {
				if d, ok := tr.message(m); ok {
					got = append(got, d)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i].String() != tc.want[i].String() {
					t.Errorf("drift %d: %v, want %v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestDriftMerge(t *testing.T) {
	var d Drift
	d.merge(Drift{Processes: []string{"nft"}, Changes: 2})
	d.merge(Drift{Processes: []string{"iptables-nft", "nft"}, Changes: 1})
	d.merge(Drift{Lost: true})
	if got, want := d.String(), "3 objects changed by iptables-nft, nft; change notifications lost"; got != want {
		t.Errorf("merged: %q, want %q", got, want)
	}
	if got := (Drift{Lost: true}).String(); got != "change notifications lost" {
		t.Errorf("lost only: %q", got)
	}
}

// driftRecorder runs a DriftWatcher on the node of a topology and records what it
// reports.
type driftRecorder struct {
	mu     sync.Mutex
	drifts []Drift
}

func watchDrift(t *testing.T, tp *topology, configure func(*DriftWatcher)) *driftRecorder {
	t.Helper()
	w := NewDriftWatcher(Options{NetNS: tp.node.FD()})
	if configure != nil {
		configure(w)
	}
	rec := &driftRecorder{}
	joined := make(chan struct{})
	w.joined = func() { close(joined) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = w.Run(ctx, func(d Drift) {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.drifts = append(rec.drifts, d)
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-joined:
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher did not join the nftables notification group")
	}
	require.Binary(t, "nft")
	tp.sync(t)
	return rec
}

// take returns and forgets what was reported so far.
func (r *driftRecorder) take() []Drift {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.drifts
	r.drifts = nil
	return out
}

// next waits for the next report.
func (r *driftRecorder) next(t *testing.T) Drift {
	t.Helper()
	var got []Drift
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got = r.take()
		return len(got) > 0, nil
	})
	if err != nil {
		t.Fatal("no drift reported")
	}
	if len(got) > 1 {
		t.Errorf("one change reported %d times: %v", len(got), got)
	}
	return got[0]
}

// TestDriftWatcher: changes made to our table with nft(8) are reported, each burst
// once, naming nft; the Programmer's own transactions and changes to another table
// are not.
func TestDriftWatcher(t *testing.T) {
	tp := newTopology(t, topologyOptions{})
	rec := watchDrift(t, tp, nil)

	tp.node.MustRun("nft", "flush", "table", "ip", TableName)
	if d := rec.next(t); d.Lost || d.Changes == 0 || strings.Join(d.Processes, ",") != "nft" {
		t.Errorf("flush reported as %v", d)
	}
	tp.prog.Invalidate()
	tp.sync(t)
	tp.node.MustRun("nft", "delete", "element", "ip", TableName, MapEIP2VPC, "{", elasticIP, "}")
	if d := rec.next(t); d.Changes != 1 {
		t.Errorf("one element deleted, reported as %v", d)
	}

	// Our own full and incremental syncs, and another table's changes, are no drift;
	// a change to ours made after them is reported alone.
	tp.prog.Invalidate()
	tp.sync(t)
	tp.state.Mappings = append(tp.state.Mappings, Mapping{ElasticIP: addr("10.225.51.8"), PodIP: addr("10.244.1.8")})
	tp.sync(t)
	tp.node.MustRun("nft", "add", "table", "ip", "someone-else")
	tp.node.MustRun("nft", "add", "set", "ip", "someone-else", "s", "{ type ipv4_addr; }")
	tp.node.MustRun("nft", "add", "element", "ip", TableName, MapEIP2VPC, "{ 10.225.51.9 : 10.244.1.9 }")
	if d := rec.next(t); d.Changes != 1 || d.Lost {
		t.Errorf("one element added after our syncs, reported as %v", d)
	}
}

// TestDriftLostNotifications: when the watcher's socket overflows, the loss is
// reported (someone may have changed the table unseen); with the default buffer, a
// full sync of 100,000 own mappings, 10,000 of them bandwidth-limited, and 100,000
// in-cluster ones (700,000 notifications), loses nothing: a loss is repaired by a
// full sync, which at that size would lose notifications again.
func TestDriftLostNotifications(t *testing.T) {
	tp := newTopology(t, topologyOptions{})
	rec := watchDrift(t, tp, func(w *DriftWatcher) { w.receiveBuffer = 4096 })
	tp.state.Mappings = scaleMappings(2000)
	tp.prog.Invalidate()
	tp.sync(t)
	if d := rec.next(t); !d.Lost {
		t.Errorf("overflow reported as %v", d)
	}

	tp2 := newTopology(t, topologyOptions{})
	held := make(chan struct{})
	rec2 := watchDrift(t, tp2, func(w *DriftWatcher) { w.held = held })
	tp2.state.Mappings, tp2.state.InCluster = make([]Mapping, 100000), make([]Mapping, 100000)
	for i := range 100000 {
		b := [3]byte{byte(i >> 16), byte(i >> 8), byte(i)}
		tp2.state.Mappings[i] = Mapping{ElasticIP: netip.AddrFrom4([4]byte{10, 230 + b[0], b[1], b[2]}), PodIP: netip.AddrFrom4([4]byte{10, 244 + b[0], b[1], b[2]})}
		tp2.state.InCluster[i] = Mapping{ElasticIP: netip.AddrFrom4([4]byte{10, 232 + b[0], b[1], b[2]}), PodIP: netip.AddrFrom4([4]byte{10, 246 + b[0], b[1], b[2]})}
		if i < 10000 {
			tp2.state.Mappings[i].BandwidthMbps = 100
		}
	}
	tp2.state.ClusterCIDRs = append(tp2.state.ClusterCIDRs, netip.MustParsePrefix("10.244.0.0/14"))
	for range 2 { // into the empty table, then replacing it
		tp2.prog.Invalidate()
		tp2.sync(t)
	}
	close(held) // every notification of both syncs waits in the socket
	// A marker transaction of another process comes after every notification of the
	// sync: once it is reported, nothing of the sync was.
	touchTable(t, tp2)
	if d := rec2.next(t); d.Lost || d.Changes != 2 {
		t.Errorf("after two full syncs of 100,000 own and 100,000 in-cluster mappings: %v, want only the marker", d)
	}
}

// touchTable adds a chain to our table and deletes it in one transaction of nft(8):
// a change another process made, which leaves the table as it was.
func touchTable(t *testing.T, tp *topology) {
	t.Helper()
	tp.node.MustRun("nft", "add chain ip "+TableName+" probe; delete chain ip "+TableName+" probe")
}

// TestTableOf reads the table name of object messages as netlink's attribute decoder
// does, wherever attribute 1 stands, and nothing from malformed attributes.
func TestTableOf(t *testing.T) {
	for _, tc := range []struct {
		attrs []netlink.Attribute
		want  string
	}{
		{[]netlink.Attribute{{Type: 1, Data: []byte("juneau\x00")}}, "juneau"},
		{[]netlink.Attribute{{Type: 2, Data: []byte("eip2vpc\x00")}, {Type: 1, Data: []byte("juneau\x00")}}, "juneau"},
		{[]netlink.Attribute{{Type: 3, Data: []byte{1, 2, 3}}, {Type: 1, Data: []byte("kube-proxy\x00")}}, "kube-proxy"},
		{[]netlink.Attribute{{Type: 1 | unix.NLA_F_NET_BYTEORDER, Data: []byte("juneau\x00")}}, "juneau"},
		{[]netlink.Attribute{{Type: 2, Data: []byte("juneau\x00")}}, ""},
	} {
		b, err := netlink.MarshalAttributes(tc.attrs)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(tableOf(b)); got != tc.want {
			t.Errorf("tableOf(%v) = %q, want %q", tc.attrs, got, tc.want)
		}
	}
	for _, bad := range [][]byte{nil, {1}, {3, 0, 1, 0}, {200, 0, 1, 0, 'j'}} {
		if got := tableOf(bad); got != nil {
			t.Errorf("tableOf(%v) = %q, want nothing", bad, got)
		}
	}
}
