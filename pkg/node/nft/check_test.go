package nft

import (
	"errors"
	"maps"
	"net/netip"
	"testing"
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
