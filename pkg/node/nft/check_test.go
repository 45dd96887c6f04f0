package nft

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/loutres/juneau/pkg/listdiff"
)

// TestCheck: Check keeps what Sync would program and reports the rest as Sync does.
func TestCheck(t *testing.T) {
	a := netip.MustParseAddr
	d := DesiredState{
		Config: Config{ExternalInterface: "ext0"},
		Mappings: []Mapping{
			{ElasticIP: a("10.225.51.5"), PodIP: a("10.244.1.5")},
			{ElasticIP: a("10.225.51.6"), PodIP: a("10.244.1.6")}, // one ElasticIP, two Pods
			{ElasticIP: a("10.225.51.6"), PodIP: a("10.244.1.7")},
			{ElasticIP: a("0.0.0.0"), PodIP: a("10.244.1.8")},
		},
		Direct: []DirectNIC{{HostInterface: "veth1", Address: a("10.225.51.9")}},
	}
	got, err := Check(d)
	if !errors.Is(err, ErrInvalidMapping) {
		t.Errorf("err = %v, want ErrInvalidMapping", err)
	}
	if want := map[netip.Addr]netip.Addr{a("10.225.51.5"): a("10.244.1.5")}; !maps.Equal(got.Mappings, want) {
		t.Errorf("mappings %v, want %v", got.Mappings, want)
	}
	if want := map[netip.Addr]string{a("10.225.51.9"): "veth1"}; !maps.Equal(got.Direct, want) {
		t.Errorf("direct %v, want %v", got.Direct, want)
	}

	d.ExternalInterface = ""
	if got, err := Check(d); !errors.Is(err, ErrInvalidConfig) || len(got.Mappings) != 0 || len(got.Direct) != 0 {
		t.Errorf("without an external interface: %+v, %v; want nothing and ErrInvalidConfig", got, err)
	}
}

// TestCheckerAgreesWithCheck: a Checker fed one desired state after another, each a
// small random change of the last (mappings and direct NICs added, removed, made to
// conflict or malformed, the configuration changed or made invalid), answers every
// time what Check answers for the same state; so does one told where the mapping lists
// changed (DesiredState.MappingsChange, InClusterChange, as the node agent's views tell
// them), which also misses states and is given one twice.
func TestCheckerAgreesWithCheck(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	addr := func() netip.Addr { return netip.AddrFrom4([4]byte{10, 225, 51, byte(rnd.IntN(24))}) }
	pod := func() netip.Addr { return netip.AddrFrom4([4]byte{10, 244, 1, byte(rnd.IntN(24))}) }
	d := DesiredState{Config: Config{ExternalInterface: "ext0"}}
	var c, told Checker
	var trM, trC listdiff.Tracker
	for step := range 3000 {
		switch k := rnd.IntN(10); {
		case k < 4:
			i := rnd.IntN(len(d.Mappings) + 1)
			d.Mappings = slices.Insert(slices.Clone(d.Mappings), i, Mapping{ElasticIP: addr(), PodIP: pod()})
			trM.Insert(i)
		case k < 6 && len(d.Mappings) > 0:
			i := rnd.IntN(len(d.Mappings))
			d.Mappings = slices.Delete(slices.Clone(d.Mappings), i, i+1)
			trM.Remove(i)
		case k == 6:
			d.Direct = append(slices.Clone(d.Direct), DirectNIC{HostInterface: fmt.Sprintf("veth%d", rnd.IntN(3)), Address: addr()})
		case k == 7 && len(d.Direct) > 0:
			d.Direct = slices.Clone(d.Direct[1:])
		case k == 8:
			trC.Insert(len(d.InCluster))
			d.InCluster = append(slices.Clone(d.InCluster), Mapping{ElasticIP: addr(), PodIP: pod()})
			if rnd.IntN(4) == 0 {
				d.InCluster = nil
				trC.Reset(0)
			}
		default:
			switch rnd.IntN(3) {
			case 0:
				d.ExternalInterface = []string{"ext0", "ext1", ""}[rnd.IntN(3)]
			case 1:
				d.ClusterCIDRs = []netip.Prefix{netip.PrefixFrom(pod(), 30)}
			default:
				trM.Insert(len(d.Mappings))
				d.Mappings = append(slices.Clone(d.Mappings), Mapping{ElasticIP: netip.IPv4Unspecified(), PodIP: pod()})
			}
		}
		d.MappingsChange, d.InClusterChange = trM.Mark(), trC.Mark()
		want, wantErr := Check(d)
		for _, ch := range []*Checker{&c, &told} {
			given := d
			if ch == &c {
				given.MappingsChange, given.InClusterChange = listdiff.Change{}, listdiff.Change{}
			} else if rnd.IntN(20) == 0 {
				continue // a state this one misses
			}
			for range 1 + rnd.IntN(2) { // and one it is given twice
				got, err := ch.Check(given)
				if !maps.Equal(got.Mappings, want.Mappings) || !maps.Equal(got.Direct, want.Direct) || fmt.Sprint(err) != fmt.Sprint(wantErr) {
					t.Fatalf("step %d, %+v:\nChecker %+v, %v\nCheck   %+v, %v", step, given, got, err, want, wantErr)
				}
			}
		}
	}
}
