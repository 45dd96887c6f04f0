package validation

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func TestPoolsOfNetwork(t *testing.T) {
	arp, bgp := v1alpha1.AdvertiseARP, v1alpha1.AdvertiseBGP
	network := func(name string, created int64, pools ...string) *v1alpha1.ExternalNetwork {
		n := &v1alpha1.ExternalNetwork{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ExternalNetworkSpec{Type: arp, AddressPools: pools}}
		if created > 0 {
			n.CreationTimestamp = metav1.Unix(created, 0)
		}
		return n
	}
	pools := map[string]*v1alpha1.AddressPool{}
	for name, mode := range map[string]v1alpha1.AdvertiseMode{"a": arp, "b": arp, "c": bgp} {
		pools[name] = &v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.AddressPoolSpec{AdvertiseMode: mode}}
	}
	lookup := func(name string) *v1alpha1.AddressPool { return pools[name] }
	type verdict struct {
		Usable, Missing, WrongMode []string
		Taken                      []TakenPool
	}
	names := func(ps []*v1alpha1.AddressPool) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	ext := network("ext", 10, "b", "gone", "a", "c", "zz-gone")
	tests := []struct {
		name   string
		net    *v1alpha1.ExternalNetwork
		others []*v1alpha1.ExternalNetwork
		want   verdict
	}{
		{name: "alone: existing pools of its mode, in spec order", net: ext,
			want: verdict{Usable: []string{"b", "a"}, Missing: []string{"gone", "zz-gone"}, WrongMode: []string{"c"}}},
		{name: "a pool an older network names is that network's", net: ext,
			others: []*v1alpha1.ExternalNetwork{network("older", 5, "a")},
			want: verdict{Usable: []string{"b"}, Missing: []string{"gone", "zz-gone"}, WrongMode: []string{"c"},
				Taken: []TakenPool{{Pool: "a", Owner: "older"}}}},
		{name: "a newer network naming its pool changes nothing", net: ext,
			others: []*v1alpha1.ExternalNetwork{network("newer", 50, "a", "b")},
			want:   verdict{Usable: []string{"b", "a"}, Missing: []string{"gone", "zz-gone"}, WrongMode: []string{"c"}}},
		{name: "same age: the name decides", net: ext,
			others: []*v1alpha1.ExternalNetwork{network("aaa", 10, "b"), network("zzz", 10, "a")},
			want: verdict{Usable: []string{"a"}, Missing: []string{"gone", "zz-gone"}, WrongMode: []string{"c"},
				Taken: []TakenPool{{Pool: "b", Owner: "aaa"}}}},
		{name: "a network not created yet owns nothing another names", net: network("new", 0, "a"),
			others: []*v1alpha1.ExternalNetwork{network("zzz", 99, "a")},
			want:   verdict{Taken: []TakenPool{{Pool: "a", Owner: "zzz"}}}},
		{name: "its own older copy in the list is itself", net: ext,
			others: []*v1alpha1.ExternalNetwork{network("ext", 10, "a")},
			want:   verdict{Usable: []string{"b", "a"}, Missing: []string{"gone", "zz-gone"}, WrongMode: []string{"c"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PoolsOfNetwork(tt.net, lookup, tt.others)
			v := verdict{Usable: names(got.Usable), Missing: got.Missing, WrongMode: names(got.WrongMode), Taken: got.Taken}
			if diff := cmp.Diff(tt.want, v); diff != "" {
				t.Errorf("PoolsOfNetwork (-want +got):\n%s", diff)
			}
			if got.Refused() != (len(tt.want.Missing)+len(tt.want.WrongMode)+len(tt.want.Taken) > 0) {
				t.Errorf("Refused() = %v", got.Refused())
			}
		})
	}
}

func TestPoolOwner(t *testing.T) {
	if PoolOwner("a", nil) != nil {
		t.Error("a pool no network names has an owner")
	}
}
