package podaddr

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func TestOfAndOfFamily(t *testing.T) {
	dual := &v1alpha1.NetworkInterface{Status: v1alpha1.NetworkInterfaceStatus{Address: "10.244.1.5/32",
		Addresses: []string{"10.244.1.5/32", "fd00:244:1::5/128", "bogus"}}}
	legacy := &v1alpha1.NetworkInterface{Status: v1alpha1.NetworkInterfaceStatus{Address: "10.244.1.6/32"}}
	v6 := &v1alpha1.NetworkInterface{Status: v1alpha1.NetworkInterfaceStatus{Addresses: []string{"fd00:244:1::7"}}}
	if got := Of(dual); !slices.Equal(got, []netip.Addr{netip.MustParseAddr("10.244.1.5"), netip.MustParseAddr("fd00:244:1::5")}) {
		t.Errorf("Of(dual) = %v", got)
	}
	for _, tc := range []struct {
		nic    *v1alpha1.NetworkInterface
		family v1alpha1.IPFamily
		want   string
	}{
		{dual, v1alpha1.IPv4, "10.244.1.5"}, {dual, v1alpha1.IPv6, "fd00:244:1::5"},
		{legacy, v1alpha1.IPv4, "10.244.1.6"}, {legacy, v1alpha1.IPv6, ""},
		{v6, v1alpha1.IPv6, "fd00:244:1::7"}, {v6, "", ""},
	} {
		a, ok := OfFamily(tc.nic, tc.family)
		if got := a.String(); !ok {
			got = ""
			if tc.want == "" {
				continue
			}
			t.Errorf("OfFamily(%v, %s) = none, want %s", tc.nic.Status, tc.family, tc.want)
		} else if got != tc.want {
			t.Errorf("OfFamily(%v, %s) = %s, want %s", tc.nic.Status, tc.family, got, tc.want)
		}
	}
}

// TestFirstPerFamily: the first valid address of each family, IPv4 first, mapped
// addresses unmapped, zoned ones and anything else skipped.
func TestFirstPerFamily(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []netip.Addr
	}{
		{nil, nil},
		{[]string{"", "bogus", "fe80::1%eth0"}, nil},
		{[]string{"fd00::5", "10.0.0.1", "10.0.0.2", "fd00::6"}, []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::5")}},
		{[]string{"::ffff:10.0.0.9", "fd00::5"}, []netip.Addr{netip.MustParseAddr("10.0.0.9"), netip.MustParseAddr("fd00::5")}},
	} {
		if got := FirstPerFamily(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("FirstPerFamily(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestOfPod(t *testing.T) {
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
		want []netip.Addr
	}{
		{"nil", nil, nil},
		{"no IPs yet", &corev1.Pod{}, nil},
		{"podIP only", &corev1.Pod{Status: corev1.PodStatus{PodIP: "10.244.1.5"}}, []netip.Addr{netip.MustParseAddr("10.244.1.5")}},
		{"dual stack, IPv6 first", &corev1.Pod{Status: corev1.PodStatus{PodIP: "fd00:244:1::5",
			PodIPs: []corev1.PodIP{{IP: "fd00:244:1::5"}, {IP: "10.244.1.5"}}}},
			[]netip.Addr{netip.MustParseAddr("10.244.1.5"), netip.MustParseAddr("fd00:244:1::5")}},
		{"nothing valid", &corev1.Pod{Status: corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: "bogus"}}}}, nil},
	} {
		if got := OfPod(c.pod); !slices.Equal(got, c.want) {
			t.Errorf("%s: OfPod = %v, want %v", c.name, got, c.want)
		}
	}
}
